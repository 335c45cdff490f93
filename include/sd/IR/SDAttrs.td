//===- SDAttrs.td - sd attributes ---------------------------*- tablegen -*-===//
//
// Typed attributes: the device mesh, tensor shardings, logical axis names and
// the roles of a model's arguments. Each is parsed once and verified; nothing
// here is a string re-parsed at each use.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDATTRS_TD
#define SD_IR_SDATTRS_TD

include "sd/IR/SDDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class SD_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<SD_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def SD_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>,
    I32EnumAttrCase<"normal", 3>,
    I32EnumAttrCase<"uniform", 4>,
    I32EnumAttrCase<"xavier_uniform", 5>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_InputKind : I32EnumAttr<"InputKind", "model input kind", [
    I32EnumAttrCase<"latents", 0>,
    I32EnumAttrCase<"noise", 1>,
    I32EnumAttrCase<"timestep", 2>,
    I32EnumAttrCase<"context", 3>,
    I32EnumAttrCase<"labels", 4>,
    I32EnumAttrCase<"step", 5>,
    I32EnumAttrCase<"pooled", 6>,
    I32EnumAttrCase<"guidance", 7>,
    I32EnumAttrCase<"hyperparameters", 8>,
    I32EnumAttrCase<"time_ids", 9>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_CompareDirection : I32EnumAttr<"CompareDirection",
    "comparison direction", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_CompareDirectionAttr
    : EnumAttr<SD_Dialect, SD_CompareDirection, "compare_direction">;

def SD_PredictionType : I32EnumAttr<"PredictionType",
    "what a model's @loss regresses (diffusers' prediction_type)", [
    I32EnumAttrCase<"epsilon", 0>, I32EnumAttrCase<"v_prediction", 1>,
    I32EnumAttrCase<"flow", 2>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_PredictionTypeAttr
    : EnumAttr<SD_Dialect, SD_PredictionType, "prediction"> {
  let summary = "what a model's @loss regresses";
  let assemblyFormat = "`<` $value `>`";
  let description = [{
    On a model function as `sd.prediction_type`: the network's target, with
    diffusers' names. `epsilon` and `v_prediction` share the cosine schedule
    ᾱ = cos²(πt/2); epsilon's target is the noise, v's is
    cos(πt/2)·noise − sin(πt/2)·x0. `flow` (flow matching) has
    x_t = (1−t)·x0 + t·noise and target noise − x0.

    ```mlir
    func.func @loss(...) -> tensor<f32>
        attributes {sd.prediction_type = #sd.prediction<flow>}
    ```
  }];
}

def SD_ContextParallel : I32EnumAttr<"ContextParallel",
    "how attention spreads a sequence over the mesh axes sharding it", [
    I32EnumAttrCase<"ring", 0>, I32EnumAttrCase<"ulysses", 1>,
    I32EnumAttrCase<"ulysses_ring", 2>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_ContextParallelAttr
    : EnumAttr<SD_Dialect, SD_ContextParallel, "context_parallel">;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def SD_MeshAxisAttr : SD_Attr<"MeshAxis", "mesh_axis"> {
  let summary = "A named mesh axis with its size and DCN part";
  let description = [{
    One axis of a device mesh, e.g. `"data"=8` or, when part of the axis
    spans processes/hosts, `"data"=8(dcn=2)`: 8 devices along `data`, of which
    the major factor 2 is across processes (DCN) and 4 inside a process (ICI),
    as MaxDiffusion's `dcn_data_parallelism × ici_data_parallelism`.

    Constraints:
    * the name is a non-empty identifier (`[A-Za-z_][A-Za-z0-9_]*`)
    * the size is positive
    * the DCN part is positive and divides the size
  }];
  let parameters = (ins "::mlir::StringAttr":$name, "int64_t":$size,
                        DefaultValuedParameter<"int64_t", "1">:$dcn);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Devices along this axis inside one process.
    int64_t getIci() const { return getSize() / getDcn(); }
  }];
}

def SD_MeshAttr : SD_Attr<"Mesh", "mesh"> {
  let summary = "The axes of a device mesh, major to minor";
  let description = [{
    `<["data"=8, "fsdp"=4]>`: a 32-device mesh. Devices are numbered
    row-major over the axes (the first axis is the most major).

    Constraints:
    * axis names are unique
  }];
  let parameters = (ins ArrayRefParameter<"MeshAxisAttr">:$axes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axis called `name`, or null.
    MeshAxisAttr getAxis(::llvm::StringRef name) const;
    /// Product of all axis sizes.
    int64_t getNumDevices() const;
  }];
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

def SD_DimShardingAttr : SD_Attr<"DimSharding", "dim_sharding"> {
  let summary = "The mesh axes one tensor dimension is split over";
  let description = [{
    Printed inside a `#sd.sharding`: `{"data", "fsdp"}` splits the dimension
    over `data` (major) then `fsdp` (minor); `{}` leaves it whole. A trailing
    `?` (`{"data", ?}`, `{?}`) marks the dimension *open*: propagation may
    append further axes; without it the dimension is *closed*. A suffix
    `p<N>` gives the dimension a user priority (0 is the highest).

    Constraints:
    * the priority, when present, is not negative
  }];
  let parameters = (ins
      ArrayRefParameter<"::mlir::StringAttr">:$axes,
      "bool":$is_closed,
      OptionalParameter<"std::optional<int64_t>">:$priority);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def SD_ShardingAttr : SD_Attr<"Sharding", "sharding"> {
  let summary = "How a tensor is laid out over a device mesh";
  let description = [{
    `#sd.sharding<@mesh, [{"data"}, {}, {"fsdp", "tensor"} ], replicated = ["context"]>`:
    dimension 0 is split over mesh axis `data`, dimension 2 over `fsdp` and
    then `tensor`, and the tensor is explicitly replicated over `context`.
    Axes that appear nowhere are implicitly replicated.

    An optional `unreduced = ["fsdp"]` (after `replicated`, when both are
    given) marks a partial sum: each device along the listed axes holds a
    summand, and the value is their sum. Sharding propagation records it on
    the result of an op whose reduction factor (a contracted dimension) is
    sharded; the partitioner resolves it with an all-reduce or a
    reduce-scatter.

    Constraints (checked against the tensor and the mesh where the sharding
    is used):
    * the mesh symbol names an `sd.mesh` op
    * there is one dimension sharding per tensor dimension
    * every axis exists in the mesh (dimension, replicated and unreduced
      axes)
    * no axis is used twice (over all dimensions, the replicated and the
      unreduced lists)
    * each static dimension is divisible by the product of its axes' sizes
  }];
  let parameters = (ins
      "::mlir::FlatSymbolRefAttr":$mesh_name,
      ArrayRefParameter<"DimShardingAttr">:$dim_shardings,
      OptionalArrayRefParameter<"::mlir::StringAttr">:$replicated_axes,
      OptionalArrayRefParameter<"::mlir::StringAttr">:$unreduced_axes);
  let builders = [
    // Without unreduced axes: the common case, and the form callers used
    // before partial sums existed.
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$meshName,
                     "::llvm::ArrayRef<DimShardingAttr>":$dimShardings,
                     CArg<"::llvm::ArrayRef<::mlir::StringAttr>", "{}">:$replicatedAxes), [{
      return $_get($_ctxt, meshName, dimShardings, replicatedAxes,
                   ::llvm::ArrayRef<::mlir::StringAttr>());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDimShardings().size(); }
    /// True when no dimension is split.
    bool isFullyReplicated() const;
    /// Checks the constraints that need the tensor type and the mesh; reports
    /// through `emitError` naming `valueName`.
    ::llvm::LogicalResult verifyFor(
        ::mlir::Type type, MeshAttr mesh, ::llvm::StringRef valueName,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) const;
  }];
}

def SD_ShardingPerValueAttr
    : SD_Attr<"ShardingPerValue", "sharding_per_value"> {
  let summary = "The sharding of each result of an op";
  let description = [{
    `#sd.sharding_per_value<[<@mesh, [{"data", ?}, {?} ]>]>`: one
    `#sd.sharding` per op result, in result order. `sd-propagate-sharding`
    records each op's result shardings in the op's discardable attribute
    `sd.sharding`; an op that carries one before propagation gives its
    results these shardings as annotations.

    Constraints (checked on the op that carries it):
    * there is one sharding per op result
    * each sharding satisfies the `#sd.sharding` constraints for its result
  }];
  let parameters = (ins ArrayRefParameter<"ShardingAttr">:$shardings);
  let hasCustomAssemblyFormat = 1;
}

//===----------------------------------------------------------------------===//
// Logical axes and argument roles
//===----------------------------------------------------------------------===//

def SD_LogicalAxesAttr : SD_Attr<"LogicalAxes", "logical_axes"> {
  let summary = "A logical axis name per tensor dimension";
  let description = [{
    `#sd.logical_axes<[batch, activation_length, embed]>` names each dimension
    the way MaxDiffusion's models do; `_` leaves a dimension unnamed. Logical
    axis rules map the names to mesh axes.

    Constraints:
    * each name is `_` or an identifier
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$names);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getNames().size(); }
  }];
}

def SD_InitAttr : SD_Attr<"Init", "init"> {
  let summary = "How a parameter is initialized";
  let description = [{
    Printed inside `#sd.param`: `zeros`, `ones`, `constant(0.5)`,
    `normal(0.02)` (mean 0, the given standard deviation), `uniform(0.1)`
    (uniform in ±0.1), `xavier_uniform` (uniform in ±sqrt(6/(fan_in+fan_out)),
    fan_in the last dimension, fan_out the product of the others: a PyTorch
    Linear weight [out, in], or a fused projection's view [k, out, in] as
    the Linear(in, k·out) it is).

    Constraints:
    * `normal` and `uniform` have a positive scale
    * `zeros`, `ones` and `xavier_uniform` take no scale
  }];
  let parameters = (ins "InitKind":$kind, APFloatParameter<"the scale">:$scale);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def SD_ParamAttr : SD_Attr<"Param", "param"> {
  let summary = "Marks a function argument as a trainable parameter";
  let description = [{
    `#sd.param<"blocks.0.attn.q.weight", xavier_uniform>`: the parameter's
    name (as in a checkpoint) and its initializer.

    `#sd.param<"blocks.0.attn.qkv.weight", xavier_uniform, stored[192, 64]>`:
    checkpoints (`--init-from`, `--export`) store the parameter under another
    shape, the reference implementation's, of which the argument's type is a
    row-major view with the same elements in the same order: PyTorch's fused
    Linear(64, 3·64) weight [192, 64] is the argument [3, 64, 64], whose
    leading dimension the chunks of the projection index, so that the
    compiler shards and contracts each chunk without slicing the weight.

    Constraints:
    * the name is not empty
    * a stored shape has no negative size
    * parameter names are unique within a function, and a stored shape has
      as many elements as the argument's type (checked on the function)
  }];
  let parameters = (ins "::mlir::StringAttr":$name, "InitAttr":$init,
                        OptionalArrayRefParameter<"int64_t">:$stored_shape);
  let builders = [
    AttrBuilder<(ins "::mlir::StringAttr":$name, "InitAttr":$init), [{
      return $_get($_ctxt, name, init, ::llvm::ArrayRef<int64_t>{});
    }]>,
  ];
  let assemblyFormat =
      "`<` $name `,` $init (`,` `stored` `[` $stored_shape^ `]`)? `>`";
  let genVerifyDecl = 1;
}

def SD_InputAttr : SD_Attr<"Input", "input"> {
  let summary = "Marks a function argument as a model input";
  let description = [{
    `#sd.input<latents>`: clean latents x0; `noise`: the Gaussian noise;
    `timestep`: the diffusion time t per sample; `context`: conditioning
    (text embeddings); `labels`: one-hot class labels; `step`: the number of
    optimizer steps taken so far (a scalar, an input of `@train_step`);
    `pooled`: a pooled text vector; `guidance`: a distilled guidance
    strength per sample; `hyperparameters`: the optimizer's values, one per
    element (sd-build-train-step's hyperparameter-inputs); `time_ids`:
    SDXL's micro-conditioning per sample, [original height, original
    width, crop top, crop left, target height, target width] in pixels.
  }];
  let parameters = (ins "InputKind":$kind);
  let hasCustomAssemblyFormat = 1;
}

def SD_MomentKind : I32EnumAttr<"MomentKind", "optimizer moment", [
    I32EnumAttrCase<"mu", 0>,
    I32EnumAttrCase<"nu", 1>,
    I32EnumAttrCase<"ema", 2>]> {
  let cppNamespace = "::mlir::sd";
  let genSpecializedAttr = 0;
}

def SD_OptimizerStateAttr : SD_Attr<"OptimizerState", "optimizer_state"> {
  let summary = "Marks a function argument as a parameter's optimizer state";
  let description = [{
    `#sd.optimizer_state<"blocks.0.attn.proj.weight", mu>`: AdamW's first
    moment (`mu`) or second moment (`nu`) of the named parameter, as
    `sd-differentiate` adds them to `@train_step`. It has the parameter's
    shape, logical axes and sharding (ZeRO: the state lives where the
    parameter's shard lives) and starts at zero.
  }];
  let parameters = (ins "::mlir::StringAttr":$param, "MomentKind":$kind);
  let hasCustomAssemblyFormat = 1;
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

def SD_DimMappingAttr : SD_Attr<"DimMapping", "dim_mapping"> {
  let summary = "The factors one tensor dimension is made of, major to minor";
  let description = [{
    Part of a `#sd.sharding_rule`; standalone `#sd.dim_mapping<jk>`. Factors
    are written by name (see `#sd.sharding_rule`); several names written
    together (`jk`) form a compound factor: the dimension is `j` (major)
    times `k` (minor), as for a reshape that merges two dimensions. `1` is a
    dimension of size 1 that maps to no factor (a broadcast or reshaped unit
    dimension).
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$factor_indices);
  let hasCustomAssemblyFormat = 1;
}

def SD_TensorMappingAttr : SD_Attr<"TensorMapping", "tensor_mapping"> {
  let summary = "The factors of each dimension of one operand or result";
  let description = [{
    Part of a `#sd.sharding_rule`; standalone `#sd.tensor_mapping<[i, jk, 1]>`:
    one `#sd.dim_mapping` per dimension.
  }];
  let parameters = (ins ArrayRefParameter<"DimMappingAttr">:$dim_mappings);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDimMappings().size(); }
    /// True when some dimension is made of factor `factor`.
    bool containsFactor(int64_t factor) const;
  }];
}

def SD_OpShardingRuleAttr : SD_Attr<"OpShardingRule", "sharding_rule"> {
  let summary = "How an op's operand and result dimensions map to factors";
  let description = [{
    ```mlir
    #sd.sharding_rule<([i, j], [j, k]) -> ([i, k]) {i=8, j=16, k=32}, reduction={j}>
    ```
    An einsum-like description of an op (here a 8x16 by 16x32 matmul) in
    Shardy's terms: the op's iteration space is a set of *factors*, each
    with a size; every operand and result dimension is made of factors,
    major to minor. Sharding propagation projects each tensor's sharding
    onto the factors, merges them, and projects back, so it needs no
    knowledge of the op.

    Syntax: the operand mappings in parentheses, `->`, the result mappings,
    then the factor sizes in braces. Factors are named by position: `i`,
    `j`, ..., `z`, then `z_1`, `z_2`, ...; the sizes list them in that
    order. Per dimension: one name; several names written together (`jk`)
    for a compound factor (a reshape merging dimensions: `j` major, `k`
    minor); or `1` for a size-1 dimension that maps to no factor. After the
    sizes, optionally `, reduction={...}` and `, need_replication={...}`
    (printed only when not empty) give factor kinds; other factors are
    *pass-through*:

    * pass-through: the factor may be sharded; operands and results sharded
      alike along it need no communication (batch, non-contracting
      dimensions, elementwise dimensions).
    * reduction: the op sums (or maxes) over the factor (a contracted or
      reduced dimension); sharding it leaves a partial result that the
      partitioner resolves with an all-reduce or reduce-scatter.
    * need_replication: the op cannot run with the factor sharded (a sliced,
      padded or concatenated dimension, the softmax dimension); the
      partitioner gathers it first.

    Ops state their rule through `ShardingRuleOpInterface`; the
    `sd.sharding_rule` attribute records one on an op.

    Constraints:
    * factor sizes are positive
    * every factor a mapping names has a size (the index is in range)
    * no tensor uses a factor twice
    * `reduction` and `need_replication` name factors that have a size,
      none twice, and no factor is in both
    * (on an op) there is one mapping per operand and per result
    * (on an op) each mapping has one entry per dimension of its tensor
    * (on an op) each static dimension's size is the product of its
      factors' sizes (1 for a dimension without factors)
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$factor_sizes,
                        ArrayRefParameter<"TensorMappingAttr">:$operand_mappings,
                        ArrayRefParameter<"TensorMappingAttr">:$result_mappings,
                        ArrayRefParameter<"int64_t">:$reduction_factors,
                        ArrayRefParameter<"int64_t">:$need_replication_factors);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumFactors() const { return getFactorSizes().size(); }
    /// The kind of factor `factor`.
    FactorKind getFactorKind(int64_t factor) const;
    /// Checks the constraints that relate the rule to `op`'s operand and
    /// result types; reports through `emitError`.
    ::llvm::LogicalResult verifyFor(
        ::mlir::Operation *op,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) const;
  }];
}

//===----------------------------------------------------------------------===//
// Attention tiling
//===----------------------------------------------------------------------===//

def SD_FlashBlocksAttr : SD_Attr<"FlashBlocks", "flash_blocks"> {
  let summary = "Flash-attention block sizes (MaxDiffusion's flash_block_sizes)";
  let description = [{
    ```mlir
    #sd.flash_blocks<block_q = 128, block_kv_compute = 128, block_kv = 512,
                     block_q_dkv = 128, block_kv_dkv = 512,
                     block_kv_dkv_compute = 128, block_q_dq = 128,
                     block_kv_dq = 512, use_fused_bwd_kernel = false>
    ```
    The tile sizes of `sd.flash_attention` and `sd.flash_attention_grad`,
    under MaxDiffusion's names. Forward: query rows per work item
    (`block_q`), keys per pass over K/V (`block_kv`), keys per score tile
    inside it (`block_kv_compute`). Backward dK/dV pass: keys per work item
    (`block_kv_dkv`), keys per score tile (`block_kv_dkv_compute`), query
    rows per tile (`block_q_dkv`). Backward dQ pass: query rows per work
    item (`block_q_dq`), keys per tile (`block_kv_dq`); with
    `use_fused_bwd_kernel` dQ is accumulated in the dK/dV pass instead and
    the dQ sizes are unused. A size larger than the length it tiles is
    that length; a length that a block does not divide ends in a partial
    block, as if padded with masked keys or rows. A size may be left out:
    it is then 512, MaxDiffusion's default (and the printer leaves out the
    sizes that are 512 and a `false` fused flag).

    Constraints:
    * every block size is positive
  }];
  let parameters = (ins
      DefaultValuedParameter<"int64_t", "512">:$block_q,
      DefaultValuedParameter<"int64_t", "512">:$block_kv_compute,
      DefaultValuedParameter<"int64_t", "512">:$block_kv,
      DefaultValuedParameter<"int64_t", "512">:$block_q_dkv,
      DefaultValuedParameter<"int64_t", "512">:$block_kv_dkv,
      DefaultValuedParameter<"int64_t", "512">:$block_kv_dkv_compute,
      DefaultValuedParameter<"int64_t", "512">:$block_q_dq,
      DefaultValuedParameter<"int64_t", "512">:$block_kv_dq,
      DefaultValuedParameter<"bool", "false">:$use_fused_bwd_kernel);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // SD_IR_SDATTRS_TD
