//===- SDOps.td - sd operations -----------------------------*- tablegen -*-===//
//
// The ops of diffusion-model programs. Tensors are ranked, of f32 or bf16
// (i1 for predicates); shapes are static except for the batch dimension,
// which may be dynamic (`?`) until `sd-specialize-batch` fixes it. There is
// no implicit broadcasting: `broadcast_in_dim` makes it explicit, so each op
// has a simple per-dimension sharding rule.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDOPS_TD
#define SD_IR_SDOPS_TD

include "sd/IR/SDDialect.td"
include "sd/IR/SDAttrs.td"
include "sd/IR/SDInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def SD_FloatTensor : RankedTensorOf<[F32, BF16]>;
def SD_PredTensor : RankedTensorOf<[I1]>;
def SD_Tensor : RankedTensorOf<[F32, BF16, I1]>;
def SD_LossTensor : 0DTensorOf<[F32]>;

// Sharding rules (ShardingRuleOpInterface): elementwise ops take the
// interface's default, the one elementwise rule; every other op defines its
// own getShardingRule in ShardingRules.cpp.
defvar SD_ElementwiseShardingRule =
    DeclareOpInterfaceMethods<SD_ShardingRuleOpInterface>;
defvar SD_OwnShardingRule =
    DeclareOpInterfaceMethods<SD_ShardingRuleOpInterface, ["getShardingRule"]>;

// Costs (CostOpInterface), partitioning (PartitionOpInterface) and VJPs
// (VjpOpInterface) are not declared here: the libraries that use them attach
// them as external models (sd/Analysis/CostModels.h,
// sd/Passes/PartitionModels.h, sd/Autodiff/VjpModels.h).

// Ops whose single result type follows from the operands and attributes.
// ODS writes `inferReturnTypes` itself where a trait such as
// SameOperandsAndResultType implies it; the others define it in SDOps.cpp
// (the layer ops in SDLayerOps.cpp).
class SD_InferredOp<string mnemonic, list<Trait> traits = []>
    : SD_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits)>;

// Ops whose result type equals an operand's: ODS generates the inference.
class SD_SameTypeOp<string mnemonic, list<Trait> traits = []>
    : SD_Op<mnemonic, !listconcat([Pure, InferTypeOpInterface], traits)>;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def SD_MeshOp : SD_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "A named device mesh";
  let description = [{
    ```mlir
    sd.mesh @mesh = <["data"=2, "fsdp"=4(dcn=2)]>
    ```
    Declares the mesh that shardings refer to by symbol. Created by
    `sd-materialize-mesh` from `--mesh`/`--dcn-mesh`, or written by hand.
    May appear at every stage.

    Constraints:
    * the mesh attribute's own constraints (unique axis names, sizes)
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, SD_MeshAttr:$mesh);
  let assemblyFormat = "$sym_name `=` $mesh attr-dict";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class SD_UnaryOp<string mnemonic, string formula>
    : SD_SameTypeOp<mnemonic, [SameOperandsAndResultType,
                               SD_ElementwiseShardingRule]> {
  let summary = "Elementwise " # formula;
  let description = [{
    Computes }] # formula # [{ for every element. All stages.
  }];
  let arguments = (ins SD_FloatTensor:$operand);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

def SD_NegOp : SD_UnaryOp<"neg", "-x">;
def SD_ExpOp : SD_UnaryOp<"exp", "e^x">;
def SD_LogOp : SD_UnaryOp<"log", "the natural logarithm ln(x)">;
def SD_SqrtOp : SD_UnaryOp<"sqrt", "the square root">;
def SD_RsqrtOp : SD_UnaryOp<"rsqrt", "the reciprocal square root 1/sqrt(x)">;
def SD_TanhOp : SD_UnaryOp<"tanh", "the hyperbolic tangent">;
def SD_SinOp : SD_UnaryOp<"sin", "the sine">;
def SD_CosOp : SD_UnaryOp<"cos", "the cosine">;
def SD_SigmoidOp : SD_UnaryOp<"sigmoid", "the logistic sigmoid 1/(1+e^-x)">;
def SD_SiluOp : SD_UnaryOp<"silu", "SiLU (swish) x·sigmoid(x)">;
def SD_ErfOp : SD_UnaryOp<"erf", "the error function erf(x)">;

def SD_GeluOp : SD_SameTypeOp<"gelu", [SameOperandsAndResultType,
                                      SD_ElementwiseShardingRule]> {
  let summary = "Elementwise GELU";
  let description = [{
    `approximate = true` (the default, as in DiT and MaxDiffusion's models)
    uses the tanh approximation
    0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))); `false` the exact
    0.5·x·(1 + erf(x/sqrt(2))). All stages.
  }];
  let arguments = (ins SD_FloatTensor:$operand,
                       DefaultValuedAttr<BoolAttr, "true">:$approximate);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($result)";
}

class SD_BinaryOp<string mnemonic, string formula>
    : SD_SameTypeOp<mnemonic, [SameOperandsAndResultType,
                               SD_ElementwiseShardingRule]> {
  let summary = "Elementwise " # formula;
  let description = [{
    Computes }] # formula # [{ elementwise. Both operands have the result's
    type; broadcast explicitly with `sd.broadcast_in_dim`. All stages.
  }];
  let arguments = (ins SD_FloatTensor:$lhs, SD_FloatTensor:$rhs);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def SD_AddOp : SD_BinaryOp<"add", "lhs + rhs">;
def SD_SubOp : SD_BinaryOp<"sub", "lhs - rhs">;
def SD_MulOp : SD_BinaryOp<"mul", "lhs · rhs">;
def SD_DivOp : SD_BinaryOp<"div", "lhs / rhs">;
def SD_MaxOp : SD_BinaryOp<"max", "max(lhs, rhs)">;
def SD_MinOp : SD_BinaryOp<"min", "min(lhs, rhs)">;
def SD_PowOp : SD_BinaryOp<"pow", "lhs raised to the power rhs">;

def SD_CompareOp : SD_InferredOp<"compare",
    [SameTypeOperands, SameOperandsAndResultShape,
     SD_ElementwiseShardingRule]> {
  let summary = "Elementwise comparison producing i1";
  let description = [{
    ```mlir
    %m = sd.compare lt, %a, %b : tensor<4x4xf32>
    ```
    Compares elementwise with `eq`, `ne`, `lt`, `le`, `gt` or `ge`; the
    result is a tensor of i1 of the operands' shape. All stages.
  }];
  let arguments = (ins SD_CompareDirectionAttr:$direction,
                       SD_FloatTensor:$lhs, SD_FloatTensor:$rhs);
  let results = (outs SD_PredTensor:$result);
  let assemblyFormat = "$direction `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def SD_SelectOp : SD_InferredOp<"select",
    [AllTypesMatch<["on_true", "on_false"]>, SD_ElementwiseShardingRule]> {
  let summary = "Elementwise choice by a predicate";
  let description = [{
    `result[i] = pred[i] ? on_true[i] : on_false[i]`. All stages.

    Constraints:
    * `pred` has the shape of the other operands
  }];
  let arguments = (ins SD_PredTensor:$pred, SD_FloatTensor:$on_true,
                       SD_FloatTensor:$on_false);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($on_true)
  }];
  let hasVerifier = 1;
}

def SD_ConvertOp : SD_Op<"convert", [Pure, SameOperandsAndResultShape,
    DeclareOpInterfaceMethods<SD_RefineShapesOpInterface>,
    SD_ElementwiseShardingRule]> {
  let summary = "Element type conversion";
  let description = [{
    ```mlir
    %h = sd.convert %x : tensor<8x384xf32> -> tensor<8x384xbf16>
    ```
    Converts between f32 and bf16 (rounding to nearest even), or from i1 to
    a float type (true → 1, false → 0). All stages.

    Constraints:
    * the result element type is f32 or bf16 (i1 only converts to a float)
  }];
  let arguments = (ins SD_Tensor:$operand);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class SD_ReduceOp<string mnemonic, string what>
    : SD_Op<mnemonic, [Pure, InferTypeOpAdaptorWithIsCompatible,
                       SD_OwnShardingRule]> {
  let summary = "The " # what # " over some dimensions";
  let description = [{
    ```mlir
    %r = sd.}] # mnemonic # [{ %x dims = [1] : (tensor<8x16xf32>) -> tensor<8xf32>
    ```
    Reduces with the }] # what # [{ over `dims`, which disappear from the
    result shape. A sharded reduced dimension leaves a partial result for
    the partitioner to resolve. A bf16 operand may produce an f32 result
    (accumulated in f32 and not rounded to bf16). All stages.

    Constraints:
    * `dims` are in range, unique and sorted ascending
    * the result has the operand's element type, or f32
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$dims);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `dims` `=` $dims attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::sd::inferReduceType(getOperationName(), loc,
          adaptor.getOperand().getType(), adaptor.getDims(), types);
    }
    bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange inferred,
                                            ::mlir::TypeRange actual) {
      return ::mlir::sd::isInferredOrF32(inferred, actual);
    }
    ::mlir::sd::OpShardingRuleAttr $cppClass::getShardingRule() {
      return ::mlir::sd::getReduceShardingRule(*this, getDims());
    }
  }];
}

def SD_ReduceSumOp : SD_ReduceOp<"reduce_sum", "sum">;
def SD_ReduceMaxOp : SD_ReduceOp<"reduce_max", "maximum">;
def SD_ReduceMeanOp : SD_ReduceOp<"reduce_mean", "mean">;

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def SD_BroadcastInDimOp : SD_Op<"broadcast_in_dim", [Pure,
    DeclareOpInterfaceMethods<SD_RefineShapesOpInterface>,
    SD_OwnShardingRule]> {
  let summary = "Broadcast into a larger shape";
  let description = [{
    ```mlir
    %b = sd.broadcast_in_dim %bias dims = [2] : (tensor<384xf32>) -> tensor<8x256x384xf32>
    ```
    Operand dimension `i` becomes result dimension `dims[i]`; its size is the
    result's or 1 (then repeated). Other result dimensions are new.
    All stages.

    Constraints:
    * `dims` has one entry per operand dimension
    * `dims` are in range of the result rank and strictly increasing
    * each operand dimension has the size of its result dimension, or 1
    * operand and result element types match
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$dims);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `dims` `=` $dims attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def SD_ReshapeOp : SD_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<SD_RefineShapesOpInterface>,
    SD_OwnShardingRule]> {
  let summary = "Row-major reshape";
  let description = [{
    ```mlir
    %r = sd.reshape %x : (tensor<8x256x384xf32>) -> tensor<8x256x6x64xf32>
    ```
    Reinterprets the elements in row-major order. At most one result
    dimension may be dynamic; `sd-specialize-batch` infers it from the
    element count. All stages.

    Constraints:
    * element types match
    * at most one result dimension is dynamic
    * when both shapes are static, the element counts are equal
  }];
  let arguments = (ins SD_FloatTensor:$operand);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def SD_TransposeOp : SD_InferredOp<"transpose",
    [SD_OwnShardingRule]> {
  let summary = "Permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`. All stages.

    Constraints:
    * `permutation` is a permutation of `[0, rank)`
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `permutation` `=` $permutation attr-dict `:` functional-type(operands, results)
  }];
}

def SD_SliceOp : SD_InferredOp<"slice",
    [SD_OwnShardingRule]> {
  let summary = "A strided slice";
  let description = [{
    ```mlir
    %s = sd.slice %x start = [0, 0] limit = [8, 192] strides = [1, 1] : (tensor<8x384xf32>) -> tensor<8x192xf32>
    ```
    Takes elements `start[d], start[d]+strides[d], ... < limit[d]` along
    each dimension; a limit of -1 means the end of the dimension. All
    stages.

    Constraints:
    * `start`, `limit` and `strides` have one entry per dimension
    * `0 <= start <= limit <= size` on static dimensions (limit -1 = size),
      strides positive
    * a dynamic dimension is taken whole (start 0, stride 1, limit -1)
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$strides);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `start` `=` $start `limit` `=` $limit `strides` `=` $strides attr-dict
    `:` functional-type(operands, results)
  }];
}

def SD_ConcatOp : SD_InferredOp<"concat",
    [SD_OwnShardingRule]> {
  let summary = "Concatenate along one dimension";
  let description = [{
    All stages.

    Constraints:
    * at least one input
    * all inputs have the same rank and element type
    * `dim` is in range
    * all inputs agree on every other dimension
  }];
  let arguments = (ins Variadic<SD_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` functional-type($inputs, results)
  }];
}

def SD_PadOp : SD_InferredOp<"pad",
    [SD_OwnShardingRule]> {
  let summary = "Pad with a constant";
  let description = [{
    Adds `low[d]` elements before and `high[d]` after each dimension, filled
    with `padding_value` (default 0). All stages.

    Constraints:
    * `low` and `high` have one entry per dimension and are not negative
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high,
                       DefaultValuedAttr<F64Attr, "0.0">:$padding_value);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `low` `=` $low `high` `=` $high attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra, normalization, attention, convolution
//===----------------------------------------------------------------------===//

def SD_DotGeneralOp : SD_Op<"dot_general",
    [Pure, InferTypeOpAdaptorWithIsCompatible, SD_OwnShardingRule]> {
  let summary = "Generalized matrix product (einsum with one contraction)";
  let description = [{
    ```mlir
    %y = sd.dot_general %x, %w batch = [] x [] contract = [2] x [0]
        : (tensor<8x256x384xf32>, tensor<384x1152xf32>) -> tensor<8x256x1152xf32>
    ```
    As StableHLO's dot_general: the result dimensions are the batch
    dimensions, then the lhs free dimensions, then the rhs free dimensions,
    each in order. bf16 operands may produce an f32 result (f32
    accumulation). A projection `x·W` has no batch dimensions; attention's
    `QKᵀ` has. All stages.

    Constraints:
    * batch lists have equal length, contracting lists have equal length
    * all listed dimensions are in range and no dimension is listed twice
    * paired batch and contracting dimensions have equal sizes
    * operands have the same element type; the result has it too, or f32
  }];
  let arguments = (ins SD_FloatTensor:$lhs, SD_FloatTensor:$rhs,
                       DenseI64ArrayAttr:$lhs_batch,
                       DenseI64ArrayAttr:$rhs_batch,
                       DenseI64ArrayAttr:$lhs_contract,
                       DenseI64ArrayAttr:$rhs_contract);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `batch` `=` $lhs_batch `x` $rhs_batch
    `contract` `=` $lhs_contract `x` $rhs_contract attr-dict
    `:` functional-type(operands, results)
  }];
  // The result element type is not implied by the operands (f32 accumulation
  // of bf16): isCompatibleReturnTypes accepts f32 besides the operands' type.
  let extraClassDeclaration = [{
    /// How a row-major GEMM reads the operands as they are stored: the lhs
    /// as [batch, M, K] or, transposed, [batch, K, M]; the rhs as
    /// [batch, K, N] or, transposed, [batch, N, K]. An operand in neither
    /// layout is copied into the untransposed one first (`copy...`). The
    /// OpenMP lowering emits these; the cost model prices the forms apart
    /// (Aᵀ·B: the weight gradients' form, another library on some CPUs).
    struct GemmOperands {
      bool transLhs = false, transRhs = false;
      bool copyLhs = false, copyRhs = false;
      /// Aᵀ·B: a transposed lhs and an untransposed rhs.
      bool isTransposedLhsOnly() const { return transLhs && !transRhs; }
    };
    GemmOperands getGemmOperands();
    /// The lhs (rhs) dimensions that are neither batch nor contracting, in
    /// order: the result's M (N) dimensions.
    llvm::SmallVector<int64_t> getLhsFreeDims();
    llvm::SmallVector<int64_t> getRhsFreeDims();
  }];
}

def SD_LayerNormOp : SD_InferredOp<"layer_norm",
    [AttrSizedOperandSegments, SD_OwnShardingRule]> {
  let summary = "Layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) · scale + bias`, statistics over the
    last dimension (biased variance). `scale` and `bias` are optional (DiT's
    adaLN blocks have neither). All stages.

    Constraints:
    * the operand has rank at least 1
    * `scale` and `bias`, when present, are 1-D of the last dimension's size
      and the operand's element type
    * `epsilon` is positive
  }];
  let arguments = (ins SD_FloatTensor:$operand,
                       Optional<SD_FloatTensor>:$scale,
                       Optional<SD_FloatTensor>:$bias,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`scale` $scale^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def SD_RmsNormOp : SD_InferredOp<"rms_norm",
    [SD_OwnShardingRule]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x²) + epsilon) · scale` over the last dimension (Flux and
    Wan normalize q and k this way). All stages.

    Constraints:
    * the operand has rank at least 1
    * `scale`, when present, is 1-D of the last dimension's size and the
      operand's element type
    * `epsilon` is positive
  }];
  let arguments = (ins SD_FloatTensor:$operand, Optional<SD_FloatTensor>:$scale,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`scale` $scale^)? attr-dict `:` functional-type(operands, results)
  }];
}

def SD_GroupNormOp : SD_InferredOp<"group_norm",
    [AttrSizedOperandSegments, SD_OwnShardingRule]> {
  let summary = "Group normalization, channels last";
  let description = [{
    The operand is `[N, ..., C]` (NHWC for images). The C channels form
    `num_groups` groups; each sample's group is normalized over all its
    non-batch elements, then scaled and shifted per channel. All stages.

    Constraints:
    * the operand has rank at least 2
    * `num_groups` is positive and divides the channel count
    * `scale` and `bias`, when present, are 1-D of the channel count and the
      operand's element type
    * `epsilon` is positive
  }];
  let arguments = (ins SD_FloatTensor:$operand,
                       Optional<SD_FloatTensor>:$scale,
                       Optional<SD_FloatTensor>:$bias, I64Attr:$num_groups,
                       DefaultValuedAttr<F64Attr, "1e-6">:$epsilon);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand (`scale` $scale^)? (`bias` $bias^)? `groups` `=` $num_groups attr-dict
    `:` functional-type(operands, results)
  }];
}

def SD_SoftmaxOp : SD_SameTypeOp<"softmax",
    [SameOperandsAndResultType, SD_OwnShardingRule]> {
  let summary = "Softmax along one dimension";
  let description = [{
    Numerically stable softmax along `dim`. All stages.

    Constraints:
    * `dim` is in range
  }];
  let arguments = (ins SD_FloatTensor:$operand, I64Attr:$dim);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$operand `dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def SD_AttentionOp : SD_InferredOp<"attention",
    [SD_OwnShardingRule]> {
  let summary = "Multi-head scaled dot-product attention";
  let description = [{
    ```mlir
    %o = sd.attention %q, %k, %v scale = 0.125
        : (tensor<8x6x256x64xf32>, tensor<8x6x256x64xf32>, tensor<8x6x256x64xf32>)
        -> tensor<8x6x256x64xf32>
    ```
    Layout `[batch, heads, length, head_dim]`: query `[B, H, Sq, D]`, key
    `[B, H, Skv, D]`, value `[B, H, Skv, Dv]`, result `[B, H, Sq, Dv]` =
    `softmax(scale · Q·Kᵀ)·V` per batch and head. The optional i1 `mask`,
    `[B or 1, H or 1, Sq, Skv]`, is true where a query may attend a key; a
    query with no key to attend yields zeros. `scale` defaults to
    `1/sqrt(D)`. Later stages tile it into flash-attention blocks.
    All stages.

    Sharding rule: batch, heads, Sq and Dv pass through. Skv and D need
    replication for now: softmax normalizes over Skv (and Q·Kᵀ sums over D)
    before any partial sum could be completed, so sharding them needs the
    online-softmax exchange of context parallelism (ring or Ulysses), which
    comes with attention tiling.

    Constraints:
    * query, key and value have rank 4 and one element type
    * batch and heads agree; key and value agree on Skv; query and key on D
    * the mask is `[B or 1, H or 1, Sq, Skv]`
    * `scale`, when given, is positive
  }];
  let arguments = (ins SD_FloatTensor:$query, SD_FloatTensor:$key,
                       SD_FloatTensor:$value, Optional<SD_PredTensor>:$mask,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`scale` `=` $scale^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The scale actually applied: the attribute or 1/sqrt(head_dim).
    double getEffectiveScale();
  }];
}

def SD_FlashAttentionOp : SD_InferredOp<"flash_attention",
    [SD_OwnShardingRule]> {
  let summary = "Attention tiled into flash-attention blocks";
  let description = [{
    ```mlir
    %o, %lse = sd.flash_attention %q, %k, %v scale = 0.125
        blocks = #sd.flash_blocks<block_q = 128, block_kv_compute = 128>
        : (tensor<8x6x256x64xf32>, tensor<8x6x256x64xf32>,
           tensor<8x6x256x64xf32>)
        -> (tensor<8x6x256x64xf32>, tensor<8x6x256xf32>)
    ```
    `sd.attention` in FlashAttention-2's tiled form, as `sd-tile-attention`
    writes it: for each block of `block_q` query rows, the keys and values
    pass by in blocks of `block_kv`, in score tiles of `block_kv_compute`,
    and an online softmax (a running row maximum and sum) rescales the
    output accumulated so far; no `[Sq, Skv]` score matrix exists. Results:
    the attention output (as `sd.attention`'s, with the same mask and
    fully-masked-row conventions) and the per-row log-sum-exp of the scaled
    scores over the allowed keys, `lse = log Σ exp(scale·q·k)` (`-inf` for
    a row with no allowed key), in f32, which is all the backward pass
    (`sd.flash_attention_dq`, `sd.flash_attention_dkv`) needs besides the
    inputs. All stages.

    Sharding rule: as `sd.attention`'s; the log-sum-exp follows batch,
    heads and Sq.

    Context parallelism: with `context_parallel`, the query and key lengths
    are one factor, so that a sequence sharded over mesh axes stays sharded
    in the query, the key and the value, and `sd-partition` spreads the
    attention over those axes (the group of P devices that share the
    other coordinates):
    * `ring`: the key and value blocks travel around the group by
      `sd.collective_permute`, P−1 hops, each block's permute issued
      before the current block's tiles; the partial outputs merge by
      log-sum-exp (`lse = max + log(exp(lse₁ − max) + exp(lse₂ − max))`,
      `out = out₁·exp(lse₁ − lse) + out₂·exp(lse₂ − lse)`).
    * `ulysses`: `sd.all_to_all` moves the group's axes from the sequence
      to the heads of query, key and value, each device attends whole
      sequences of its heads, and `sd.all_to_all`s move the output and
      log-sum-exp back; the local head count must be divisible by P.
    * `ulysses_ring` with `ulysses_shards = U`: Ulysses inside subgroups of
      U consecutive group members (`sd.all_to_all` with `subgroup_size`),
      then a ring of P/U hops across the subgroups, each permute moving a
      block U members along; U must divide P and the local head count.
    Without sharded sequences the attribute changes nothing.

    Constraints:
    * `sd.attention`'s constraints on query, key, value and mask
    * `scale` is positive
    * with `context_parallel`: no mask, and the query and key lengths are
      equal
    * `ulysses_shards` is given exactly with `context_parallel =
      ulysses_ring`, and is positive
  }];
  let arguments = (ins SD_FloatTensor:$query, SD_FloatTensor:$key,
                       SD_FloatTensor:$value, Optional<SD_PredTensor>:$mask,
                       F64Attr:$scale, SD_FlashBlocksAttr:$blocks,
                       OptionalAttr<SD_ContextParallelAttr>:$context_parallel,
                       OptionalAttr<I64Attr>:$ulysses_shards);
  let results = (outs SD_FloatTensor:$result,
                      RankedTensorOf<[F32]>:$logsumexp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? `scale` `=` $scale
    `blocks` `=` $blocks (`context_parallel` `=` $context_parallel^)?
    (`ulysses_shards` `=` $ulysses_shards^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

// The backward of sd.flash_attention is two ops, because its cotangents are
// sums over different factors: dQ sums over the keys, dK and dV over the
// queries. Each op's sharding rule then has one set of reduction factors,
// and a sharded query (or key) length leaves partial sums that the
// partitioner resolves like any other.
class SD_FlashAttentionBackwardOp<string mnemonic, string what, string tiling,
                                  string rule>
    : SD_InferredOp<mnemonic, [SD_OwnShardingRule]> {
  let summary = "The backward pass of sd.flash_attention, tiled: " # what;
  let description = [{
    The cotangent }] # what # [{ of `sd.flash_attention` from the output's
    cotangent `d_out`, by FlashAttention-2's backward: the probabilities
    are recomputed per tile from the saved log-sum-exp,
    `P = exp(scale·Q·Kᵀ − lse)`, never renormalized; with
    `Di = rowsum(d_out ∘ out)` and `dS = P ∘ (dO·Vᵀ − Di)`, `dV = Pᵀ·dO`,
    `dK = scale·dSᵀ·Q` and `dQ = scale·dS·K`. }] # tiling # [{ Since P is
    not renormalized, key and value may be a slice of the keys that `out`
    and `lse` were computed over (ring attention): the cotangents are then
    that slice's share. Written by `sd-differentiate` as part of the VJP
    of `sd.flash_attention`. All stages.

    Sharding rule: batch and heads pass through; }] # rule # [{ With
    `context_parallel`, the query and key lengths are one pass-through
    factor and `sd-partition` spreads the backward over the axes sharding
    it, as `sd.flash_attention` does the forward: `ring` rotates the key
    and value blocks (dQ sums each block's share; dK and dV travel with
    their block and come home after the last hop), `ulysses` moves the
    sequence to the heads and back by `sd.all_to_all`, `ulysses_ring` does
    the latter within subgroups of `ulysses_shards` members and the former
    across them.

    Constraints:
    * `sd.attention`'s constraints on query, key, value and mask
    * `out` and `d_out` have the type of `sd.attention`'s result
    * `logsumexp` is f32 `[B, H, Sq]`
    * `scale` is positive
    * with `context_parallel`: no mask, and the query and key lengths are
      equal
    * `ulysses_shards` is given exactly with `context_parallel =
      ulysses_ring`, and is positive
  }];
  let arguments = (ins SD_FloatTensor:$query, SD_FloatTensor:$key,
                       SD_FloatTensor:$value, SD_FloatTensor:$out,
                       RankedTensorOf<[F32]>:$logsumexp,
                       SD_FloatTensor:$d_out, Optional<SD_PredTensor>:$mask,
                       F64Attr:$scale, SD_FlashBlocksAttr:$blocks,
                       OptionalAttr<SD_ContextParallelAttr>:$context_parallel,
                       OptionalAttr<I64Attr>:$ulysses_shards);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $logsumexp `,` $d_out
    (`mask` $mask^)? `scale` `=` $scale `blocks` `=` $blocks
    (`context_parallel` `=` $context_parallel^)?
    (`ulysses_shards` `=` $ulysses_shards^)? attr-dict
    `:` functional-type(operands, results)
  }];
}

def SD_FlashAttentionDqOp : SD_FlashAttentionBackwardOp<"flash_attention_dq",
    "of the query",
    [{Work items are blocks of `block_q_dq` query rows, each looping over
    the keys in blocks of `block_kv_dq`. With `use_fused_bwd_kernel` and an
    `sd.flash_attention_dkv` of the same operands earlier in the block (as
    sd-differentiate writes them), dQ is instead accumulated in that op's
    dK/dV pass, one partial per key block added in block order: the
    OpenMP target makes one runtime call of the two, and the cost model
    prices this op as the pass's extra dS·K.}],
    [{the query length passes through to dQ;
    the key length and the value's head_dim are summed over (reduction
    factors: a sharded key length leaves a partial dQ); the query's
    head_dim needs replication.}]> {
  let results = (outs SD_FloatTensor:$d_query);
  let extraClassDeclaration = [{
    /// With `use_fused_bwd_kernel`: the sd.flash_attention_dkv of the same
    /// operands and attributes earlier in the block whose dK/dV pass
    /// accumulates this dQ; otherwise null.
    FlashAttentionDkvOp getFusingDkv();
  }];
}

def SD_FlashAttentionDkvOp : SD_FlashAttentionBackwardOp<"flash_attention_dkv",
    "of the key and the value",
    [{Work items are blocks of `block_kv_dkv` keys, each owning its dK and
    dV rows and looping over the queries in blocks of `block_q_dkv`, in
    score tiles of `block_kv_dkv_compute` keys.}],
    [{the key length passes through to dK and
    dV; the query length is summed over (a reduction factor: a sharded
    query length leaves partial dK and dV); head_dims need replication.}]> {
  let results = (outs SD_FloatTensor:$d_key, SD_FloatTensor:$d_value);
}

def SD_Conv2DOp : SD_InferredOp<"conv2d",
    [SD_OwnShardingRule]> {
  let summary = "2-D convolution, NHWC with HWIO kernels";
  let description = [{
    ```mlir
    %y = sd.conv2d %x, %w bias %b strides = [2, 2] padding = [1, 1, 1, 1] groups = 1
        : (tensor<8x64x64x4xf32>, tensor<3x3x4x320xf32>, tensor<320xf32>) -> tensor<8x32x32x320xf32>
    ```
    Input `[N, H, W, Cin]`, kernel `[KH, KW, Cin/groups, Cout]`, optional bias
    `[Cout]`, zero padding `[top, bottom, left, right]`. Output size
    `(H + top + bottom − KH) / sh + 1` (and likewise for W). All stages.

    Constraints:
    * input and kernel have rank 4 and one element type
    * `strides` has 2 positive entries, `padding` 4 non-negative ones
    * `groups` is positive and divides Cin and Cout
    * the kernel's input-channel dimension is Cin/groups
    * the bias, when present, is `[Cout]`
    * the padded input is at least as large as the kernel
  }];
  let arguments = (ins SD_FloatTensor:$input, SD_FloatTensor:$kernel,
                       Optional<SD_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       I64Attr:$groups);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $kernel (`bias` $bias^)? `strides` `=` $strides `padding` `=` $padding
    `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
}

// The two gradients of sd.conv2d, as convolutions of their own, so that one
// sharding rule (and one halo exchange) serves the forward and backward
// passes. Their result shapes do not follow from the operands (a strided
// convolution drops up to `stride - 1` rows), so the result type is written.
class SD_Conv2DGradOp<string mnemonic, string what, string example,
                      string body>
    : SD_Op<mnemonic, [Pure, SD_OwnShardingRule,
        DeclareOpInterfaceMethods<SD_RefineShapesOpInterface>]> {
  let summary = "The gradient of sd.conv2d with respect to its " # what;
  let description = !strconcat([{
    ```mlir
    }], example, [{
    ```
    }], body, [{

    `strides`, `padding` and `groups` are the forward convolution's; the
    forward input `[N, H, W, Cin]`, kernel `[KH, KW, Cin/groups, Cout]` and
    result `[N, Ho, Wo, Cout]` satisfy sd.conv2d's shape rules. All stages;
    after sd-partition, a spatially sharded convolution's local op has the
    halo rows in its operands and no padding on that dimension.

    Constraints:
    * every operand and the result have rank 4 and one element type
    * `strides` has 2 positive entries, `padding` 4 non-negative ones
    * `groups` is positive and divides Cin and Cout
    * the shapes are those of an sd.conv2d with these attributes
  }]);
  let hasVerifier = 1;
}

def SD_Conv2DInputGradOp : SD_Conv2DGradOp<"conv2d_input_grad", "input", [{
    %dx = sd.conv2d_input_grad %dy, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1
        : (tensor<8x32x32x320xf32>, tensor<3x3x320x320xf32>) -> tensor<8x64x64x320xf32>
    }], [{
    `dx[n, iy, ix, ci]` sums `dy[n, oy, ox, co] · w[ky, kx, ci, co]` over
    every output position and tap that reads input pixel (iy, ix):
    `iy = oy·sh − top + ky`, `ix = ox·sw − left + kx` (a transposed
    convolution). The runtime computes dy·wᵀ as one GEMM per convolution
    group and chunk of samples and scatters its rows back (col2im).}]> {
  let arguments = (ins SD_FloatTensor:$result_grad, SD_FloatTensor:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       I64Attr:$groups);
  let results = (outs SD_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $result_grad `,` $kernel `strides` `=` $strides `padding` `=` $padding
    `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
}

def SD_Conv2DFilterGradOp : SD_Conv2DGradOp<"conv2d_filter_grad", "kernel", [{
    %dw = sd.conv2d_filter_grad %x, %dy strides = [1, 1] padding = [1, 1, 1, 1] groups = 1
        : (tensor<8x64x64x4xf32>, tensor<8x64x64x320xf32>) -> tensor<3x3x4x320xf32>
    }], [{
    `dw[ky, kx, ci, co]` sums `x[n, oy·sh − top + ky, ox·sw − left + kx, ci]
    · dy[n, oy, ox, co]` over samples and output positions (taps in the
    padding read 0). The runtime makes the forward's im2col rows and
    contracts them with dy in one GEMM per convolution group and chunk of
    samples. With bf16 operands the result may be f32 (the products' f32
    sum, unrounded), as sd-widen-gradients makes a weight gradient.}]> {
  let arguments = (ins SD_FloatTensor:$input, SD_FloatTensor:$result_grad,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       I64Attr:$groups);
  let results = (outs SD_FloatTensor:$kernel_grad);
  let assemblyFormat = [{
    $input `,` $result_grad `strides` `=` $strides `padding` `=` $padding
    `groups` `=` $groups attr-dict `:` functional-type(operands, results)
  }];
}

def SD_UpsampleNearestOp : SD_InferredOp<"upsample_nearest",
    [SD_OwnShardingRule]> {
  let summary = "Nearest-neighbour upsampling of NHWC images";
  let description = [{
    Repeats each pixel `scale[0]` times along H and `scale[1]` times along W.
    All stages.

    Constraints:
    * the operand has rank 4
    * `scale` has 2 positive entries
  }];
  let arguments = (ins SD_FloatTensor:$operand, DenseI64ArrayAttr:$scale);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $operand `scale` `=` $scale attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Constants and random numbers
//===----------------------------------------------------------------------===//

def SD_ConstantOp : SD_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
     SD_OwnShardingRule]> {
  let summary = "A constant tensor";
  let description = [{
    ```mlir
    %c = sd.constant dense<1.0> : tensor<384xf32>
    ```
    All stages.

    Constraints:
    * the type is static
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def SD_IotaOp : SD_Op<"iota",
    [Pure, SD_OwnShardingRule]> {
  let summary = "Indices along one dimension";
  let description = [{
    `result[i0, ..., in] = i_dim` as a float. All stages.

    Constraints:
    * the type is static
    * `dim` is in range
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "`dim` `=` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// An f32 scalar, written without its type: the offsets of the rng ops.
def SD_OffsetScalar : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

def SD_RngNormalOp : SD_Op<"rng_normal",
    [Pure, SD_OwnShardingRule]> {
  let summary = "Normally distributed random numbers from a seed";
  let description = [{
    Counter-based: element `i` (row-major) is a function of `(seed, i)` only,
    so every device computes its own block of the same global tensor and
    results never depend on the mesh. All stages.

    The *offsets form*, which sd-partition creates, computes one device's
    block of the global tensor:
    ```mlir
    %r = sd.rng_normal seed = 7 offsets(%o0, %o1) global_shape = [8, 16] : tensor<4x16xf32>
    ```
    Element `j` of the result is element `offsets + j` of the tensor of
    `global_shape`; each offset is an f32 scalar holding a whole number
    (the device's block index times the block size, from `sd.axis_index`).

    Constraints:
    * the type is static
    * `stddev` is positive
    * `offsets` (one per dimension) and `global_shape` (one entry per
      dimension, each at least the result's) come together
  }];
  let arguments = (ins I64Attr:$seed, Variadic<SD_OffsetScalar>:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       DefaultValuedAttr<F64Attr, "0.0">:$mean,
                       DefaultValuedAttr<F64Attr, "1.0">:$stddev);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    `seed` `=` $seed (`offsets` `(` $offsets^ `)`)?
    (`global_shape` `=` $global_shape^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def SD_RngUniformOp : SD_Op<"rng_uniform",
    [Pure, SD_OwnShardingRule]> {
  let summary = "Uniformly distributed random numbers from a seed";
  let description = [{
    Uniform in `[low, high)`, counter-based like `sd.rng_normal`, with the
    same offsets form for one device's block. All stages.

    Constraints:
    * the type is static
    * `low < high`
    * `offsets` (one per dimension) and `global_shape` (one entry per
      dimension, each at least the result's) come together
  }];
  let arguments = (ins I64Attr:$seed, Variadic<SD_OffsetScalar>:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       DefaultValuedAttr<F64Attr, "0.0">:$low,
                       DefaultValuedAttr<F64Attr, "1.0">:$high);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    `seed` `=` $seed (`offsets` `(` $offsets^ `)`)?
    (`global_shape` `=` $global_shape^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Loss and sharding annotations
//===----------------------------------------------------------------------===//

def SD_MseLossOp : SD_InferredOp<"mse_loss",
    [SameTypeOperands, SD_OwnShardingRule]> {
  let summary = "Mean squared error, an f32 scalar";
  let description = [{
    `mean((predictions - targets)²)` over all elements, accumulated in f32.
    All stages.
  }];
  let arguments = (ins SD_FloatTensor:$predictions, SD_FloatTensor:$targets);
  let results = (outs SD_LossTensor:$result);
  let assemblyFormat = "$predictions `,` $targets attr-dict `:` type($predictions)";
}

def SD_ShardingConstraintOp : SD_SameTypeOp<"sharding_constraint",
    [SameOperandsAndResultType,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     SD_ElementwiseShardingRule]> {
  let summary = "Pins the sharding of a value";
  let description = [{
    ```mlir
    %y = sd.sharding_constraint %x logical = <[batch, activation_length, embed]> : tensor<8x256x384xf32>
    %z = sd.sharding_constraint %x sharding = <@mesh, [{"data"}, {}, {} ]> : tensor<8x256x384xf32>
    ```
    Like `jax.lax.with_sharding_constraint`: propagation must give the
    result this sharding. Written with logical axis names, which
    `sd-apply-logical-rules` turns into a mesh sharding. Numerically the
    identity. Valid until partitioning removes it.

    Constraints:
    * at least one of `sharding` and `logical` is given
    * `logical` has one name per dimension
    * `sharding` satisfies the `#sd.sharding` constraints for the type
  }];
  let arguments = (ins SD_FloatTensor:$input,
                       OptionalAttr<SD_ShardingAttr>:$sharding,
                       OptionalAttr<SD_LogicalAxesAttr>:$logical);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`sharding` `=` $sharding^)? (`logical` `=` $logical^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

// An f32 scalar operand, written without its type.
def SD_F32Scalar : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

def SD_AdamWOp : SD_Op<"adamw", [Pure,
    AllTypesMatch<["param", "grad", "mu", "nu",
                   "new_param", "new_mu", "new_nu"]>,
    SD_ElementwiseShardingRule]> {
  let summary = "One parameter's AdamW update";
  let description = [{
    ```mlir
    %p1, %mu1, %nu1 = sd.adamw %p, %g, %mu, %nu lr = %lr corrections = (%c1, %c2)
        beta1 = (%b1, %omb1) beta2 = (%b2, %omb2) eps = %eps weight_decay = %wd
        : tensor<64x32xf32>
    ```
    Elementwise, with f32 scalars lr, c1 = 1 − b1^t, c2 = 1 − b2^t, b1,
    1 − b1, b2, 1 − b2, eps and (optionally) wd:
    mu' = b1·mu + (1−b1)·g, nu' = b2·nu + (1−b2)·(g·g),
    p' = p − lr·(mu'/c1 / (sqrt(nu'/c2) + eps) + wd·p); without wd the
    decay term is absent. Made by `sd-build-train-step`, one per trained
    parameter, so that the programs the planner prices, propagates and
    partitions hold one op per update instead of two dozen; a pointwise
    sharding rule (the scalars are replicated). `sd-lower-to-openmp`
    decomposes it into the elementwise ops above (`decompose`), each
    scalar converted to the parameter's element type and broadcast, in
    that order, which the lowering fuses into one loop. Valid from
    `sd-build-train-step` until `sd-lower-to-openmp`.

    Constraints:
    * the parameter, gradient, moments and results have one type
  }];
  let arguments = (ins SD_FloatTensor:$param, SD_FloatTensor:$grad,
                       SD_FloatTensor:$mu, SD_FloatTensor:$nu,
                       SD_F32Scalar:$learning_rate,
                       SD_F32Scalar:$correction1, SD_F32Scalar:$correction2,
                       SD_F32Scalar:$beta1, SD_F32Scalar:$one_minus_beta1,
                       SD_F32Scalar:$beta2, SD_F32Scalar:$one_minus_beta2,
                       SD_F32Scalar:$epsilon,
                       Optional<SD_F32Scalar>:$weight_decay);
  let results = (outs SD_FloatTensor:$new_param, SD_FloatTensor:$new_mu,
                      SD_FloatTensor:$new_nu);
  let assemblyFormat = [{
    $param `,` $grad `,` $mu `,` $nu `lr` `=` $learning_rate
    `corrections` `=` `(` $correction1 `,` $correction2 `)`
    `beta1` `=` `(` $beta1 `,` $one_minus_beta1 `)`
    `beta2` `=` `(` $beta2 `,` $one_minus_beta2 `)`
    `eps` `=` $epsilon (`weight_decay` `=` $weight_decay^)?
    attr-dict `:` type($param)
  }];
  let extraClassDeclaration = [{
    /// Builds the update's elementwise ops before this op and returns the
    /// new parameter, mu and nu (the op itself is left in place).
    std::array<::mlir::Value, 3> decompose(::mlir::OpBuilder &builder);
  }];
}

//===----------------------------------------------------------------------===//
// Collectives and reshards
//===----------------------------------------------------------------------===//

include "sd/IR/SDCollectiveOps.td"
include "sd/IR/SDMemoryOps.td"

#endif // SD_IR_SDOPS_TD
