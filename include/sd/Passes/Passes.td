//===- Passes.td - sd passes --------------------------------*- tablegen -*-===//

#ifndef SD_PASSES_TD
#define SD_PASSES_TD

include "mlir/Pass/PassBase.td"

def MaterializeMesh : Pass<"sd-materialize-mesh", "::mlir::ModuleOp"> {
  let summary = "Create the sd.mesh op from a mesh specification";
  let description = [{
    Parses a mesh in MaxDiffusion's terms — ICI axis sizes (`mesh`), an
    optional DCN part (`dcn-mesh`), `-1` filled from the device count — and
    adds (or replaces) `sd.mesh @<mesh-name>` at the top of the module.

    ```mlir
    // sd-materialize-mesh{mesh=data:2,fsdp:-1 devices=8}
    module {}
    // becomes
    module { sd.mesh @mesh = <["data"=2, "fsdp"=4]> }
    ```

    A malformed specification, two `-1` axes, or a device count the mesh
    does not match is an error on the module.
  }];
  let options = [
    Option<"meshSpec", "mesh", "std::string", "\"\"",
           "ICI mesh: comma-separated axis:size, e.g. data:8,fsdp:4 (-1 fills)">,
    Option<"dcnMeshSpec", "dcn-mesh", "std::string", "\"\"",
           "DCN mesh (across processes/hosts), e.g. data:2">,
    Option<"devices", "devices", "int64_t", "0",
           "Total device count (0: the product of the mesh)">,
    Option<"processes", "processes", "int64_t", "0",
           "Process count, to fill a -1 DCN axis (0: unknown)">,
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def ApplyLogicalRules : Pass<"sd-apply-logical-rules", "::mlir::func::FuncOp"> {
  let summary = "Turn logical axis names into mesh shardings";
  let description = [{
    For every function argument with `sd.logical_axes` and every
    `sd.sharding_constraint` with `logical`, resolves the logical names
    with the logical axis rules (a preset — `dit`, `sdxl`, `flux`, `wan` — or
    a MaxDiffusion YAML file) against the module's mesh, and records the
    resulting `#sd.sharding` (closed dimensions). An argument that already
    has `sd.sharding` keeps it. Rules follow flax/MaxDiffusion: for each
    dimension the first rule for its name whose mesh axes are not yet used
    by the tensor wins; mesh axes absent from the mesh are dropped.

    ```mlir
    func.func @loss(%w: tensor<384x1536xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>})
    // with rules=dit on sd.mesh @mesh = <["fsdp"=4, "tensor"=2]> becomes
    func.func @loss(%w: tensor<384x1536xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>,
                                              sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"} ]>})
    ```

    A dimension whose size is not divisible by the product of its mesh axes
    keeps them: it is padded (`sd-partition`), as GSPMD pads.
  }];
  let options = [
    Option<"rules", "rules", "std::string", "\"dit\"",
           "Logical axis rules: dit, sdxl, flux, wan, or a YAML file path">,
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def ApplyPrecision : Pass<"sd-apply-precision", "::mlir::ModuleOp"> {
  let summary = "Compute in bf16 from f32 master weights (mixed precision)";
  let description = [{
    MaxDiffusion's `weights_dtype` and `activations_dtype` as explicit
    `sd.convert`s. The parameters (`sd.role = #sd.param`) stay f32 arguments:
    the master copy the optimizer updates. With `weights-dtype=bfloat16`
    each is cast right before its first use, on its own shard (so that
    sd-differentiate puts the cast's VJP, and sd-build-train-step the
    parameter's update, where that use's backward ends), so a
    gather that the partitioner adds later moves bf16 (half the bytes of
    gathering the f32 master and casting after, which no cost could favour:
    the cast of a shard is also the smaller cast). With
    `activations-dtype=bfloat16` every value that depends on a parameter is
    computed in bf16: its op takes bf16 operands (f32 operands are cast where
    they meet one) and has a bf16 result, through calls; the ops' kernels
    still accumulate in f32 (GEMMs, attention tiles, norms, softmax,
    log-sum-exp, reductions) and round once. Values that depend on no
    parameter (the timestep embedding's sinusoids, the noised latents, the
    loss target) stay f32, as diffusers and MaxDiffusion compute them. The
    loss takes f32 operands (the prediction widened, exactly) and is f32;
    an entry's results keep their declared types. A remark says what the
    pass did.

    ```mlir
    // activations-dtype=bfloat16 weights-dtype=bfloat16
    %y = sd.dot_general %x, %w ... : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    // becomes
    %wb = sd.convert %w : tensor<64x64xf32> -> tensor<64x64xbf16>
    %xb = sd.convert %x : tensor<8x64xf32> -> tensor<8x64xbf16>
    %y = sd.dot_general %xb, %wb ... -> tensor<8x64xbf16>
    ```

    With `weights-dtype=bfloat16` and f32 activations, the weights are
    rounded to bf16 and widened back; with both f32 the pass does nothing.
    Block functions called with two different signatures are an error.
  }];
  let options = [
    Option<"weightsDtype", "weights-dtype", "::sd::DType",
           "::sd::DType::Float32",
           "The parameters' compute copy (MaxDiffusion's weights_dtype)",
           [{::llvm::cl::values(
               clEnumValN(::sd::DType::Float32, "float32", "f32"),
               clEnumValN(::sd::DType::BFloat16, "bfloat16", "bf16"))}]>,
    Option<"activationsDtype", "activations-dtype", "::sd::DType",
           "::sd::DType::Float32",
           "What values depending on the parameters are computed in "
           "(MaxDiffusion's activations_dtype)",
           [{::llvm::cl::values(
               clEnumValN(::sd::DType::Float32, "float32", "f32"),
               clEnumValN(::sd::DType::BFloat16, "bfloat16", "bf16"))}]>,
  ];
  let statistics = [
    Statistic<"numCast", "num-cast", "Parameters cast to weights-dtype">,
    Statistic<"numLowered", "num-lowered", "Ops computed in bf16">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def WidenGradients : Pass<"sd-widen-gradients", "::mlir::func::FuncOp"> {
  let summary = "Reduce bf16 gradients in f32 (grad-reduce-dtype=float32)";
  let description = [{
    Under `sd-apply-precision` the backward pass computes the parameters'
    cotangents in bf16 and widens each into its f32 gradient with a
    backward `sd.convert`. The partitioner reduces a partial sum where it is
    made (a product or sum over a sharded batch), so without this pass the
    gradients would cross the mesh in bf16. This pass makes the producers of
    every backward bf16-to-f32 convert compute f32 results directly: a
    `dot_general`, a `conv2d_filter_grad` or a reduction of bf16 operands
    gets an f32 result (the same f32 accumulation, not rounded to bf16), an
    `add`, `sub`,
    `transpose` or `reshape` of such values is done in f32, and anything
    else is widened where it is used. The converts marked `sd.derivative`
    (an activation's cotangent widened for a derivative computed in f32)
    are left as they are.
    The partial sums, and so the reduce-scatters and all-reduces of the
    gradients, are then f32, as torchtitan's and FSDP2's default
    `reduce_dtype`. Run on the inlined training step, before propagation.

    ```mlir
    %dw = sd.dot_general %x, %dy ... {sd.backward} -> tensor<64x64xbf16>
    %g = sd.convert %dw {sd.backward} : tensor<64x64xbf16> -> tensor<64x64xf32>
    // becomes
    %g = sd.dot_general %x, %dy ... {sd.backward} -> tensor<64x64xf32>
    ```
  }];
  let statistics = [
    Statistic<"numWidened", "num-widened",
               "Backward products and sums given f32 results">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def SpecializeBatch : Pass<"sd-specialize-batch", "::mlir::ModuleOp"> {
  let summary = "Fix the dynamic batch dimension and make all shapes static";
  let description = [{
    sd programs may leave the batch dimension dynamic (`?`). This pass sets
    every dynamic dimension of the entry functions' arguments (functions no
    other function calls) to `batch`, or to the function's
    `sd.default_batch` when `batch` is 0, then recomputes every result type
    in order: through InferTypeOpInterface, through RefineShapesOpInterface,
    and through calls (each callee is specialized once; calls with other
    types are an error). Function signatures are updated.

    ```mlir
    func.func @loss(%x: tensor<?x16xf32>) ... { %y = sd.exp %x : tensor<?x16xf32> ... }
    // with batch=8 becomes
    func.func @loss(%x: tensor<8x16xf32>) ... { %y = sd.exp %x : tensor<8x16xf32> ... }
    ```

    When `batch` is 0 and the default batch does not divide
    `batch-multiple` (the devices the batch dimension is sharded over), the
    batch is the smallest multiple of it above the default, with a remark
    (MaxDiffusion's per_device_batch_size works the same way).

    A program already static at another batch size, a non-positive batch,
    or no batch at all is an error.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", "0",
           "Global batch size (0: the function's sd.default_batch)">,
    Option<"batchMultiple", "batch-multiple", "int64_t", "1",
           "Devices the batch dimension is sharded over: a default batch "
           "that does not divide them becomes the next multiple">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def TileAttention : Pass<"sd-tile-attention", "::mlir::func::FuncOp"> {
  let summary = "Tile attention into flash-attention blocks";
  let description = [{
    Rewrites every `sd.attention` into `sd.flash_attention`, FlashAttention-2's
    tiled form, with MaxDiffusion's eight block sizes as an
    `#sd.flash_blocks` attribute. Runs before `sd-differentiate`, whose VJP
    of the tiled op is the tiled backward (`sd.flash_attention_dq` and
    `sd.flash_attention_dkv`, which need only the output and the per-row
    log-sum-exp of the forward pass besides its operands: that is all a
    remat policy sees saved).

    ```mlir
    %o = sd.attention %q, %k, %v : (...) -> tensor<8x6x256x64xf32>
    // becomes (with block-q=128, the rest derived)
    %o, %lse = sd.flash_attention %q, %k, %v scale = 1.250000e-01
        blocks = #sd.flash_blocks<block_q = 128, block_kv_compute = 256, ...>
        : (...) -> (tensor<8x6x256x64xf32>, tensor<8x6x256xf32>)
    ```

    Block sizes: the options set them one by one under MaxDiffusion's names;
    a backward size left at 0 follows its forward size (`block_q_dkv` and
    `block_q_dq` follow `block_q`, `block_kv_dkv` and `block_kv_dq` follow
    `block_kv`, `block_kv_dkv_compute` follows `block_kv_compute`). A
    forward size left at 0 is derived per op from its head_dims and the
    per-core L2 cache (`cache-bytes`, default this machine's, read from
    `sysconf(_SC_LEVEL2_CACHE_SIZE)` or sysfs, else 1 MiB), so that a work
    item's tiles stay in cache: `block_q` = `block_kv_compute` = the largest
    power of two from 16 to 512 whose query block, output accumulator,
    score tile and K/V tile, `4·(bq·D + bq·Dv + bq·bkv + bkv·(D + Dv))`
    bytes, fit in half the cache; `block_kv` = the largest multiple of
    `block_kv_compute` (at most 4,096) whose K and V block,
    `4·bkv·(D + Dv)` bytes, fits in half the cache. With every size
    derived, the fused dQ (`use_fused_bwd_kernel`: one pass over the tiles
    instead of two, which would recompute the scores and dP) is chosen, and
    `block_kv_dkv` grows to ⌈Skv / 2⌉ (in whole `block_kv_dkv_compute`
    blocks) where the keys would otherwise span more than two dK/dV
    blocks, so that the partials, one dQ per key block, are at most twice
    dQ; the option can only turn it on. Sizes need not divide
    the lengths: the last block of a length is partial, as if padded with
    masked keys or rows. The mask and the scale carry over unchanged.

    Context parallelism (`attention`): `flash` leaves a sharded sequence's
    keys and values to be all-gathered (the tiled op needs whole keys);
    `ring` and `ulysses` mark self-attention without a mask (query and key
    of one length) with `context_parallel`, so that the sequence stays
    sharded and `sd-partition` passes key and value blocks around the ring,
    or moves the sequence to the heads by all-to-alls; `ulysses_ring` marks
    them likewise with `ulysses_shards` (the option of that name, which it
    needs and which only it takes): Ulysses within groups of that many
    devices, the ring across the groups. Cross-attention and masked
    attention keep all-gathered keys and values.

    `min-seq-length` is MaxDiffusion's `flash_min_seq_length`: an attention
    whose query (static length) is shorter keeps the untiled `sd.attention`
    (dot_product), whatever `attention` says, as MaxDiffusion falls back to
    dot-product attention for short sequences. 0, the default, tiles every
    attention.
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", "0",
           "Query rows per forward work item (0: derived)">,
    Option<"blockKvCompute", "block-kv-compute", "int64_t", "0",
           "Keys per forward score tile (0: derived)">,
    Option<"blockKv", "block-kv", "int64_t", "0",
           "Keys per forward pass over K/V (0: derived)">,
    Option<"blockQDkv", "block-q-dkv", "int64_t", "0",
           "Query rows per dK/dV tile (0: block-q)">,
    Option<"blockKvDkv", "block-kv-dkv", "int64_t", "0",
           "Keys per dK/dV work item (0: block-kv)">,
    Option<"blockKvDkvCompute", "block-kv-dkv-compute", "int64_t", "0",
           "Keys per dK/dV score tile (0: block-kv-compute)">,
    Option<"blockQDq", "block-q-dq", "int64_t", "0",
           "Query rows per dQ work item (0: block-q)">,
    Option<"blockKvDq", "block-kv-dq", "int64_t", "0",
           "Keys per dQ tile (0: block-kv)">,
    Option<"useFusedBwdKernel", "use-fused-bwd-kernel", "bool", "false",
           "Accumulate dQ by the dK/dV pass's key blocks">,
    Option<"cacheBytes", "cache-bytes", "int64_t", "0",
           "Per-core L2 cache the derived sizes fit (0: this machine's)">,
    Option<"attention", "attention", "::sd::AttentionKind",
           "::sd::AttentionKind::Flash",
           "How a sharded sequence is attended (MaxDiffusion's names)",
           [{::llvm::cl::values(
               clEnumValN(::sd::AttentionKind::Flash, "flash",
                          "all-gather the keys and values"),
               clEnumValN(::sd::AttentionKind::Ring, "ring",
                          "ring attention over the sequence's axes"),
               clEnumValN(::sd::AttentionKind::Ulysses, "ulysses",
                          "all-to-all between sequence and heads"),
               clEnumValN(::sd::AttentionKind::UlyssesRing, "ulysses_ring",
                          "Ulysses in groups of ulysses-shards, ring "
                          "across them"))}]>,
    Option<"ulyssesShards", "ulysses-shards", "int64_t", "0",
           "Devices per Ulysses group of attention=ulysses_ring">,
    Option<"minSeqLength", "min-seq-length", "int64_t", "0",
           "MaxDiffusion's flash_min_seq_length: attention whose query is "
           "shorter keeps the untiled form">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def MinSnrWeighting : Pass<"sd-min-snr-weighting", "::mlir::ModuleOp"> {
  let summary = "Weight @loss per sample by min-SNR (snr_gamma)";
  let description = [{
    Min-SNR-γ loss weighting (Hang et al. 2023, diffusers'
    `--snr_gamma`, MaxDiffusion's `snr_gamma`) for an `epsilon` or
    `v_prediction` model. The `sd.mse_loss` that `@loss` returns becomes the
    mean over the batch of each sample's mean squared error times its
    weight, computed from the sample's `#sd.input<timestep>` t in f32 with
    the cosine schedule of `#sd.prediction` (SNR = cot²(πt/2)):
    `min(SNR, γ) / SNR` for epsilon, `min(SNR, γ) / (SNR + 1)` for v:

    ```mlir
    %l = sd.mse_loss %pred, %target : tensor<?x8x8x4xf32>
    // becomes, per sample b:
    //   mean_b(w(t_b) · mean((pred_b − target_b)²)),
    //   w = min(1, γ·tan²(πt/2))           (epsilon)
    //   w = min(cos²(πt/2), γ·sin²(πt/2))  (v_prediction)
    ```

    Every op it adds has its own VJP and sharding rule, so the gradient and
    the partitioned step follow. A flow model, a `@loss` without a
    timestep input or whose result is not an `sd.mse_loss` of batch-major
    values, and γ ≤ 0 are errors.
  }];
  let options = [
    Option<"gamma", "gamma", "double", "5.0",
           "γ: the signal-to-noise ratio above which a sample's weight "
           "falls">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def FreezeParameters : Pass<"sd-freeze-parameters", "::mlir::ModuleOp"> {
  let summary = "Freeze the parameters a fine-tune does not train";
  let description = [{
    Marks parameters `sd.frozen` by name: those matching a `freeze` glob
    pattern, and, with `trainable` patterns, every parameter matching none
    of them (MaxDiffusion-style `trainable_parameters`). A frozen parameter
    gets no gradient (`sd-differentiate`), no optimizer state and no update
    (`sd-build-train-step`): the step reads it, FSDP still gathers it for
    the forward pass, and no gradient of it is reduced. Applies to every
    function with `#sd.param` arguments.

    ```mlir
    // sd-freeze-parameters{freeze=blocks.0.*}
    func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"blocks.0.w", zeros>}, ...)
    // becomes
    func.func @loss(%w: tensor<4x3xf32> {sd.frozen, sd.role = #sd.param<"blocks.0.w", zeros>}, ...)
    ```

    A pattern that is not a glob, or that matches no parameter, and a
    module whose parameters are all frozen, are errors.
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "Glob patterns of the parameter names to freeze">,
    ListOption<"trainable", "trainable", "std::string",
               "Glob patterns of the parameter names to train (the others "
               "are frozen)">,
  ];
  let statistics = [
    Statistic<"numFrozen", "num-frozen", "Parameters frozen">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def AddLora : Pass<"sd-add-lora", "::mlir::ModuleOp"> {
  let summary = "Add LoRA adapters beside the targeted projections";
  let description = [{
    LoRA as PEFT builds it. A target module `X` (PEFT's `target_modules`: a
    module is targeted when its name equals one of `targets` or ends with
    "." and one, or when `target-regex` matches it whole) is a parameter
    `X.weight` of a Linear layer: its products contract its last dimension
    (the input features) alone, and its stored shape, if any, is
    [out, in]. It gets two parameters after it, as PEFT names them:

    * `X.lora_A.weight` [r, in], uniform in ±1/sqrt(in) (PEFT's default
      Kaiming initialisation), logical axes `[_, <W's input axis>]`;
    * `X.lora_B.weight` [out..., r], zeros (stored [out, r] for a fused
      weight such as DiT's qkv [3, out, in]), logical axes `[<W's output
      axes>, _]`,

    so they shard like their base weight, and step 0 computes the base
    model. Each product y = x·Wᵀ becomes y + (x·(s·A)ᵀ)·Bᵀ, s = alpha / r
    (`alpha` 0 means alpha = r), through the calls of block functions that
    pass W on (a callee is cloned as `<name>_lora` with the adapters as two
    more arguments per targeted weight). Every other parameter, the base
    weights included, is frozen (`sd.frozen`): the step trains the adapters
    alone.

    ```mlir
    // sd-add-lora{rank=2 targets=proj}
    func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"proj.weight", zeros>}, %x: ...) -> tensor<f32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [1] : ...
    // becomes
    func.func @loss(%w: tensor<4x3xf32> {sd.frozen, sd.role = #sd.param<"proj.weight", zeros>},
                    %a: tensor<2x3xf32> {sd.role = #sd.param<"proj.lora_A.weight", uniform(0.57735)>},
                    %b: tensor<4x2xf32> {sd.role = #sd.param<"proj.lora_B.weight", zeros>}, %x: ...) -> tensor<f32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [1] : ...
      %s = sd.constant dense<1.0> : tensor<2x3xf32>
      %sa = sd.mul %a, %s : ...
      %h = sd.dot_general %x, %sa batch = [] x [] contract = [1] x [1] : ...
      %d = sd.dot_general %h, %b batch = [] x [] contract = [1] x [1] : ...
      %y2 = sd.add %y, %d : ...
    ```

    A rank below 1, no targets, a target name that matches no parameter, a
    regex that does not compile or matches nothing, a target that is not a
    Linear weight or that an op other than a product or a call uses, and a
    module that already has adapters are errors.
  }];
  let options = [
    Option<"rank", "rank", "int64_t", "0", "The adapters' rank r">,
    Option<"alpha", "alpha", "double", "0.0",
           "lora_alpha: the update is scaled by alpha / r (0: alpha = r)">,
    ListOption<"targets", "targets", "std::string",
               "Target module names (PEFT's target_modules list)">,
    Option<"targetRegex", "target-regex", "std::string", "\"\"",
           "Target modules as one regular expression matched whole">,
  ];
  let statistics = [
    Statistic<"numAdapted", "num-adapted",
              "Projections given adapters (per function)">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect",
                           "::mlir::func::FuncDialect"];
}

def Differentiate : Pass<"sd-differentiate", "::mlir::ModuleOp"> {
  let summary = "Build the gradient function of @loss by reverse-mode AD";
  let description = [{
    Replaces `@loss(params..., inputs...) -> loss` by

    ```mlir
    func.func @loss_grad(params..., inputs...) -> (loss, grads...)
    ```

    The forward program is `@loss` with its block calls inlined; the
    backward program asks each op for its VJP (VjpOpInterface), in reverse
    order, and sums cotangents. Parameters are the `#sd.param` arguments;
    inputs (latents, noise, timestep, labels, context), frozen parameters
    (`sd.frozen`, which the gradient function takes after the trained ones,
    as inputs) and random numbers get no gradient, and a parameter the loss
    does not use gets a zero gradient. Every forward value the backward program needs is used
    directly (kept): `sd-remat` then decides what is recomputed or
    offloaded, and `sd-build-train-step` builds the optimizer step around
    the gradient.

    The gradient function records its structure for those two passes, on
    discardable attributes:
    * `sd.backward` on the ops of the backward program. It starts with the
      seed, the loss's cotangent `sd.constant {sd.backward} dense<1.0>`,
      and ends with the zero gradients of parameters that get none.
    * `sd.vjp_group = N : i64` on the N-th forward op and on the backward
      ops built for its VJP and the accumulation of its operands'
      cotangents: backward groups appear in decreasing N, so a parameter's
      gradient is complete after the group of its first forward user.
    * `sd.layer = L : i64` on forward ops that came from the L-th inlined
      call, and `sd.layers` on the function: the callee of each call (the
      layers a remat policy applies to).

    The backward ops of a forward op (its VJP and the sums of its operands'
    cotangents) take its location. A call marked `sd.sample_block` (the
    planner's sample program) marks the location of each op it inlines,
    those of calls inside it too (sd/Analysis/SampleBlocks.h).

    ```mlir
    func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                    %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : ...
      %l = sd.mse_loss %y, %x ...
      return %l : tensor<f32>
    }
    // becomes
    func.func @loss_grad(%w: ..., %x: ...) -> (tensor<f32>, tensor<4x3xf32>) {
      %y = sd.dot_general %x, %w ... {sd.vjp_group = 0 : i64} : ...
      %l = sd.mse_loss %y, %x {sd.vjp_group = 1 : i64} : ...
      %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
      %dy = ... {sd.backward, sd.vjp_group = 1 : i64}     // mse_loss's VJP
      %dw = ... {sd.backward, sd.vjp_group = 0 : i64}     // dot_general's VJP
      return %l, %dw : tensor<f32>, tensor<4x3xf32>
    }
    ```

    A module without `@loss`, a loss that is not one `tensor<f32>`, a loss
    without `#sd.param` argument, a call of a function without body, or an
    op on the gradient's path without VJP is an error.
  }];
  let dependentDialects = ["::mlir::sd::SDDialect",
                           "::mlir::func::FuncDialect"];
}

def Remat : Pass<"sd-remat", "::mlir::func::FuncOp"> {
  let summary = "Keep, offload or recompute what the backward program uses";
  let description = [{
    Applies a remat policy to a gradient function made by `sd-differentiate`
    (a function with `sd.vjp_group` ops; others are left alone). For each
    forward value a backward VJP group uses, the policy decides whether it
    is kept on device, offloaded (`sd.offload` right after it is computed,
    `sd.reload` before the group) or recomputed (clones marked
    `sd.recompute` before the group, recomputing what they need in turn).
    What a group needs is made available just before its first op: first
    the operands of its forward op, then the op's own results (recomputed
    by one clone of the op). Inserted backward ops join the group they
    serve (`sd.vjp_group`), so `sd-build-train-step` still finds where
    each gradient is complete. The pass consumes `sd.layer` and
    `sd.layers`.

    The policy applies inside the layers (`sd.layer`); values outside
    layers and each layer's inputs and outputs are kept, as under JAX's
    `jax.checkpoint` of each layer:
    * `NONE`: keep everything.
    * `FULL`: keep nothing inside layers (recompute each layer).
    * `MATMUL_WITHOUT_BATCH`: keep the results of matmuls without batch
      dimensions (RematOpInterface: projections, not attention's batched
      products).
    * `OFFLOAD_MATMUL_WITHOUT_BATCH`: offload those instead.
    * `HIDDEN_STATE_WITH_OFFLOAD`: offload values named `hidden_states`,
      `self_attn`, `cross_attn` (a layer's output included).
    * `CUSTOM`: keep `names-saved`, offload `names-offloaded`.
    * `FLUX_OPTIMIZED`: in layers whose function name contains `double`
      keep all but `img_qkv_proj` / `txt_qkv_proj`; in `single` layers keep
      only `attn_output` and `lin1_norm_hidden_states`; elsewhere as
      `MATMUL_WITHOUT_BATCH`.

    ```mlir
    // sd-remat{remat=FULL}, %a inside a layer
    %a = sd.tanh %x {sd.layer = 1 : i64, sd.vjp_group = 3 : i64} : ...
    %d = sd.mul %ct, %a {sd.backward, sd.vjp_group = 5 : i64} : ...
    // becomes
    %a = sd.tanh %x {sd.vjp_group = 3 : i64} : ...
    %r = sd.tanh %x {sd.backward, sd.recompute, sd.vjp_group = 5 : i64} : ...
    %d = sd.mul %ct, %r {sd.backward, sd.vjp_group = 5 : i64} : ...
    ```

    Names are `sd.name`s. A CUSTOM name no value carries, a name both
    saved and offloaded, or names given to a policy other than CUSTOM is
    an error.
  }];
  let options = [
    Option<"policy", "remat", "::sd::RematPolicyKind",
           "::sd::RematPolicyKind::None", "Remat policy (MaxDiffusion's names)",
           [{::llvm::cl::values(
               clEnumValN(::sd::RematPolicyKind::None, "NONE",
                          "keep everything"),
               clEnumValN(::sd::RematPolicyKind::Full, "FULL",
                          "recompute each layer"),
               clEnumValN(::sd::RematPolicyKind::MatmulWithoutBatch,
                          "MATMUL_WITHOUT_BATCH",
                          "keep matmuls without batch dimensions"),
               clEnumValN(::sd::RematPolicyKind::OffloadMatmulWithoutBatch,
                          "OFFLOAD_MATMUL_WITHOUT_BATCH",
                          "offload matmuls without batch dimensions"),
               clEnumValN(::sd::RematPolicyKind::HiddenStateWithOffload,
                          "HIDDEN_STATE_WITH_OFFLOAD",
                          "offload hidden_states, self_attn, cross_attn"),
               clEnumValN(::sd::RematPolicyKind::FluxOptimized,
                          "FLUX_OPTIMIZED", "Flux's double/single blocks"),
               clEnumValN(::sd::RematPolicyKind::Custom, "CUSTOM",
                          "names-saved and names-offloaded"))}]>,
    ListOption<"namesSaved", "names-saved", "std::string",
               "CUSTOM: names of values kept for the backward pass">,
    ListOption<"namesOffloaded", "names-offloaded", "std::string",
               "CUSTOM: names of values offloaded to host memory">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "num-recomputed",
              "Forward ops recomputed in the backward pass">,
    Statistic<"numOffloaded", "num-offloaded",
              "Values offloaded to host memory">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def BuildTrainStep : Pass<"sd-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Build the AdamW training step around the gradient function";
  let description = [{
    Replaces the gradient function `@loss_grad(params..., inputs...) ->
    (loss, grads...)` made by `sd-differentiate` (and `sd-remat`) by

    ```mlir
    func.func @train_step(params..., mu..., nu..., inputs..., %step) -> (loss, new_params..., new_mu..., new_nu...)
    ```

    A frozen parameter (`sd.frozen`, an input of the gradient function)
    follows the trained ones, gets no optimizer state and is not returned:
    the step reads it and never writes it.

    Optimizer state arguments carry `#sd.optimizer_state` and the
    parameter's logical axes and sharding, so propagation shards them like
    the parameter (ZeRO); new parameters and state are returned with the
    parameter's sharding and alias (are written in place of) the old ones.

    AdamW as optax/MaxDiffusion, one `sd.adamw` op per trained parameter
    (its scalars made once and shared): with t = step + 1,
    mu' = b1·mu + (1−b1)·g, nu' = b2·nu + (1−b2)·g²,
    p' = p − lr_t·(mu'/(1−b1^t) / (sqrt(nu'/(1−b2^t)) + eps) + wd·p)
    (wd = 0 for a parameter whose name matches a `no-decay` glob pattern,
    optax's weight-decay mask),
    lr_t = lr·min(1, t/warmup-steps)·d(step): after warm-up `lr-schedule`
    keeps the peak (`constant`, d = 1) or decays it to 0 over
    `lr-schedule-steps` S (optax's schedules as MaxDiffusion builds them,
    counting the update from 0): with p = clamp((step − W)/(S − W), 0, 1)
    for W = warmup-steps, `linear` d = 1 − p and `cosine`
    d = (1 + cos(π·p))/2; after S the rate is 0. With `max-grad-value` > 0
    each gradient element is first clipped to [−max-grad-value,
    max-grad-value] (optax's clip). With `max-grad-norm` > 0 the gradients
    are then scaled by min(1, max-grad-norm / global norm). With `grad-accum` = K > 1 the
    batch is split into K microbatches (sample i goes to microbatch
    i mod K, so a batch sharded over devices splits locally), the gradient
    function's body runs once per microbatch with the seed 1/K and the
    gradients (and the loss) are averaged. Without microbatches or
    clipping, each parameter is updated as soon as its gradient is
    complete (after the `sd.vjp_group` of its first forward user), so
    that gradients do not all stay alive until the end. The step's
    backward and update ops carry `sd.backward`; `sd.vjp_group` and
    `sd.layer` are dropped.

    ```mlir
    func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}, %x: ...) -> (tensor<f32>, tensor<4xf32>)
    // becomes
    func.func @train_step(%w: ..., %mu: tensor<4xf32> {sd.role = #sd.optimizer_state<"w", mu>},
                          %nu: ..., %x: ..., %step: tensor<f32> {sd.role = #sd.input<step>})
        -> (tensor<f32>, tensor<4xf32> {sd.aliases = 0 : i64}, tensor<4xf32> {sd.aliases = 1 : i64},
            tensor<4xf32> {sd.aliases = 2 : i64})
    ```

    With `ema-decay` d > 0 the step also keeps an exponential moving average
    of each parameter (DiT's EMA weights, for sampling): one more state
    argument per parameter, `#sd.optimizer_state<"w", ema>` after nu,
    updated as ema' = d_s·ema + (1−d_s)·p' and aliased like the moments,
    where d_s warms up to d as diffusers' EMAModel does it, s being the
    step's count of earlier steps: d_s = min(d, (1 + s)/(10 + s)), or with
    `ema-warmup` min(d, 1 − (1 + s/ema-inv-gamma)^−ema-power), and d_0 = 0
    (the first step's EMA is its parameters).

    With `hyperparameter-inputs`, the values of the options reach the step
    as its last argument, `tensor<15xf32> {sd.role =
    #sd.input<hyperparameters>}`, one element per `Hyperparameter`
    (sd/Passes/Passes.h: the learning rate, the warm-up and decay steps,
    b1, 1 − b1, b2, 1 − b2, eps, the weight decay, the clipping thresholds
    and the EMA's decay, inverse gamma and −power, each computed in double
    as the constants are), so that runs differing only in these values
    share one compiled program. What the options decide about the
    program's structure stays in it: the schedule's kind, whether there is
    a warm-up, weight decay, clipping or an EMA, and the microbatches.

    A module without `@loss_grad`, a gradient function that does not
    return the loss and one gradient per parameter or has no seed,
    `grad-accum` below 1, microbatches with a scalar input, a decaying
    `lr-schedule` without `lr-schedule-steps` beyond the warm-up, or a
    negative `max-grad-value` is an error.
  }];
  let options = [
    Option<"learningRate", "learning-rate", "double", "1e-4",
           "Peak learning rate">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "Steps of linear learning-rate warm-up (0: none)">,
    Option<"beta1", "adam-b1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "adam-b2", "double", "0.999", "AdamW beta2">,
    Option<"epsilon", "adam-eps", "double", "1e-8", "AdamW epsilon">,
    Option<"weightDecay", "adam-weight-decay", "double", "1e-2",
           "AdamW decoupled weight decay">,
    Option<"maxGradNorm", "max-grad-norm", "double", "0.0",
           "Clip gradients to this global norm (0: no clipping)">,
    Option<"maxGradValue", "max-grad-value", "double", "0.0",
           "Clip each gradient element to [-v, v] (0: no clipping)">,
    Option<"lrSchedule", "lr-schedule", "::sd::LrSchedule",
           "::sd::LrSchedule::Constant",
           "The learning rate after warm-up",
           [{::llvm::cl::values(
               clEnumValN(::sd::LrSchedule::Constant, "constant",
                          "stays at its peak"),
               clEnumValN(::sd::LrSchedule::Linear, "linear",
                          "decays linearly to 0 at lr-schedule-steps"),
               clEnumValN(::sd::LrSchedule::Cosine, "cosine",
                          "decays along a half cosine to 0 at "
                          "lr-schedule-steps"))}]>,
    Option<"lrScheduleSteps", "lr-schedule-steps", "int64_t", "0",
           "Steps of warm-up and decay (a decaying schedule's length)">,
    Option<"gradAccum", "grad-accum", "int64_t", "1",
           "Microbatches whose gradients are accumulated per step">,
    Option<"emaDecay", "ema-decay", "double", "0.0",
           "Keep an exponential moving average of the parameters with this "
           "decay (0: none)">,
    Option<"emaWarmup", "ema-warmup", "bool", "false",
           "Warm the EMA's decay up as 1 - (1 + s/ema-inv-gamma)^-ema-power "
           "instead of (1 + s)/(10 + s)">,
    Option<"emaInvGamma", "ema-inv-gamma", "double", "1.0",
           "The EMA warm-up's inverse gamma">,
    Option<"emaPower", "ema-power", "double", "0.6666666666666666",
           "The EMA warm-up's power">,
    ListOption<"noDecay", "no-decay", "std::string",
               "Glob patterns of parameter names the weight decay skips">,
    Option<"hyperparameterInputs", "hyperparameter-inputs", "bool", "false",
           "Take the optimizer's values as an #sd.input<hyperparameters> "
           "argument instead of constants">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect",
                           "::mlir::func::FuncDialect"];
}

def PropagateSharding
    : Pass<"sd-propagate-sharding", "::mlir::func::FuncOp"> {
  let summary = "Propagate shardings through the program with factor rules";
  let description = [{
    Gives every op result a sharding (`sd.sharding`, a
    `#sd.sharding_per_value`) from the annotations: argument shardings
    (from the logical axis rules), `sd.sharding_constraint`s, function
    result shardings and op results that carry `sd.sharding` already. Open
    dimensions may gain mesh axes; closed ones never change.

    The algorithm is Shardy's: each op's sharding rule
    (ShardingRuleOpInterface) maps its dimensions to factors; shardings are
    projected onto the factors, merged (a prefix merges with its extension;
    on a conflict the larger tensor wins, or the common prefix stays), and
    projected back, forward and backward to a fixed point. User priorities
    (`p0` first) are propagated in order, and within each, pass-through
    ops first, then the pass-through factors of all ops (broadcasts only
    backward), then everything. A mesh axis is used once per tensor,
    need_replication factors stay unsharded, and a sharded reduction factor
    makes the op's results partial sums (`unreduced`). A factor takes axes
    that do not divide it (padding, up to one device per element) only where
    it is the minor-most factor of every dimension it is part of, so that
    its padded blocks are the dimension's (`sd::blockExtent`): the heads of
    a reshape from [heads · head_dim] to [heads, head_dim] split evenly or
    not at all on the reshape's input (6 heads over 4 devices would be
    blocks of 2 heads, 128 features, not blocks of 96).

    Where an operand still disagrees with what its op's rule requires, an
    `sd.reshard` to the required sharding is inserted before the op (and
    after it for a result that its consumers want sharded otherwise).

    ```mlir
    func.func @f(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {} ]>},
                 %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"} ]>}) -> tensor<8x32xf32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : ...
    // becomes
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
          {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?} ]>]>} : ...
    ```

    With `record-provenance`, each op gets `sd.provenance`: for each sharded
    result dimension, which annotation the axes came from and through which
    op. `explain=<name>` reports (as remarks) how the value or parameter of
    that name got its sharding.

    The program must be static and free of calls (run `--inline` and
    `sd-specialize-batch` first) and the module must have the mesh.

    The propagation reads the mesh's axis sizes only by comparing the
    product of some axes' sizes with a factor's size (divides it, is at
    most it, equals it). With `record-size-queries` the function gets
    `sd.size_queries`, those comparisons: on a mesh of the same axes that
    answers each alike, the propagation makes the same shardings (the
    planner propagates once for such meshes).
  }];
  let options = [
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
    Option<"recordProvenance", "record-provenance", "bool", "false",
           "Record in sd.provenance where each sharding came from">,
    Option<"explain", "explain", "std::string", "\"\"",
           "Emit remarks on how the named value (sd.name, parameter name "
           "or input kind) got its sharding">,
    Option<"recordSizeQueries", "record-size-queries", "bool", "false",
           "Record in sd.size_queries the comparisons of mesh axis sizes "
           "the propagation made (a mesh that answers them alike "
           "propagates alike)">,
  ];
  let statistics = [
    Statistic<"numReshards", "num-reshards", "Number of sd.reshard ops inserted">,
    Statistic<"numVisits", "num-visits", "Number of op visits until the fixed point">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def TestPrintShardingRules
    : Pass<"sd-test-print-sharding-rules", "::mlir::func::FuncOp"> {
  let summary = "Test only: record each op's sharding rule on the op";
  let description = [{
    Sets `sd.sharding_rule` on every op that implements
    `ShardingRuleOpInterface` to the rule the op states, so that FileCheck
    tests can check the rules that propagation will use.

    ```mlir
    %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
        : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    // becomes
    %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
        {sd.sharding_rule = #sd.sharding_rule<([i, j], [j, k]) -> ([i, k])
                                              {i=8, j=16, k=32}, reduction={j}>}
        : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    ```

    An sd op without the interface, or one that cannot give a rule (a
    dynamic shape), is an error.
  }];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def PrintReport : Pass<"sd-print-report", "::mlir::ModuleOp"> {
  let summary = "Print the per-device cost report of a function";
  let description = [{
    A printing pass, like MLIR's `-test-print-liveness` or
    `-view-op-graph`: it leaves the IR unchanged and writes the cost model's
    report (sd/Analysis/CostModel.h) of `@loss` (or the function named by
    `function`, or the only public function) to stdout, or to the stream
    `sdopt --report` gives it (then instead of the IR). Per device: parameter
    and input bytes, the activation peak (linear-scan liveness, values
    freed after their last use; calls costed through their callees, once
    per call), FLOPs and bytes accessed (CostOpInterface), and the
    collectives by kind and mesh axes with their count and the bytes each
    device sends under the ring convention. Then the predicted time of the
    collectives per set of mesh axes, from a network model
    (sd/Sharding/Network.h): ICI links inside a process at `ici-bandwidth`
    per device, DCN links between processes at `dcn-bandwidth` per process,
    and a latency per ring step.

    ```
    sd report: @loss, mesh @mesh fsdp:2 (2 devices)
    program: partitioned; types are local, every number is per device
    memory per device
      parameters                 64 B   1 tensor, 16 elements
    ...
    ```

    `layout=auto` decides from the program: collectives mean local types
    (partitioned), otherwise shardings mean global types whose per-device
    blocks follow from the shardings, otherwise one device runs it all.
    `local` and `global` force one reading. An op without CostOpInterface,
    a dynamic shape or a recursive call is an error on that op.
  }];
  let options = [
    Option<"format", "format", "::mlir::sd::ReportFormat",
           "::mlir::sd::ReportFormat::Text", "Report format",
           [{::llvm::cl::values(
               clEnumValN(::mlir::sd::ReportFormat::Text, "text",
                          "a table with human units"),
               clEnumValN(::mlir::sd::ReportFormat::Json, "json",
                          "JSON with exact numbers"))}]>,
    Option<"function", "function", "std::string", "\"\"",
           "The function to report on (default: @loss, or the only public "
           "function)">,
    Option<"layout", "layout", "::mlir::sd::LayoutChoice",
           "::mlir::sd::LayoutChoice::Auto",
           "Whether types are per device (local) or global",
           [{::llvm::cl::values(
               clEnumValN(::mlir::sd::LayoutChoice::Auto, "auto",
                          "local with collectives, else global with "
                          "shardings"),
               clEnumValN(::mlir::sd::LayoutChoice::Local, "local",
                          "types are what one device holds"),
               clEnumValN(::mlir::sd::LayoutChoice::Global, "global",
                          "per-device blocks from the shardings"))}]>,
    Option<"iciBandwidth", "ici-bandwidth", "std::string", "\"10GB/s\"",
           "Bytes per second a device sends to devices of its process "
           "(100GB/s, 25Gb/s; a plain number is GB/s)">,
    Option<"dcnBandwidth", "dcn-bandwidth", "std::string", "\"25Gb/s\"",
           "Bytes per second a process sends to other processes (its "
           "devices share it)">,
    Option<"iciLatency", "ici-latency", "std::string", "\"1us\"",
           "Seconds per ring step inside a process (25us, 1.5ms; a plain "
           "number is microseconds)">,
    Option<"dcnLatency", "dcn-latency", "std::string", "\"25us\"",
           "Seconds per ring step between processes">,
  ];
}

def ShowSharding : Pass<"sd-show-sharding", "::mlir::ModuleOp"> {
  let summary = "Draw which device holds which block of a tensor";
  let description = [{
    A printing pass (see `sd-print-report`): writes a picture of the
    sharding of the value named `value` — a parameter name, an input kind
    or an `sd.name` — like `jax.debug.visualize_array_sharding`: a grid of
    the blocks of dimensions 0 (rows) and 1 (columns), each labelled with
    the devices that hold it (device ids as in the mesh: row-major over the
    axes, process-major with DCN parts); replicas share a cell ("0,4").
    Dimensions past the second are described, not drawn.

    ```
    x_embedder.proj.weight: tensor<16x384xf32> #sd.sharding<@mesh, [{}, {"fsdp"} ]>
    rows: dimension 0 (16): whole
    columns: dimension 1 (384): 4 blocks of 96 over fsdp
    +-----+-----+-----+-----+
    | 0,4 | 1,5 | 2,6 | 3,7 |
    +-----+-----+-----+-----+
    ```

    Arguments of the report function (`function`, default as for
    `sd-print-report`) are found by parameter name or input kind; other
    values by `sd.name` anywhere in the module (the first in program order;
    the count is given when there are more). A name that matches nothing,
    or a value without a sharding (op results get one from
    sd-propagate-sharding), is an error.
  }];
  let options = [
    Option<"value", "value", "std::string", "\"\"",
           "Parameter name, input kind or sd.name of the value to draw">,
    Option<"function", "function", "std::string", "\"\"",
           "The function whose arguments are searched (default: @loss, or "
           "the only public function)">,
  ];
}

def Partition : Pass<"sd-partition", "::mlir::func::FuncOp"> {
  let summary = "Rewrite a propagated global program into its per-device form";
  let description = [{
    Turns a function whose values carry shardings (after
    `sd-propagate-sharding`) into the SPMD program every device of the mesh
    runs on its own block of each tensor:

    * Types become local: each dimension is divided by the product of its
      mesh axes' sizes, rounded up. A dimension they do not divide is padded
      to a multiple, as GSPMD pads (10 over 4 devices: blocks of 3, the
      last holding 1 valid row). Arguments and results keep their global
      layout as `sd.local_sharding` (what a runtime needs to hand out and
      collect blocks), and their global shape as `sd.global_shape` where a
      dimension is padded; ops lose `sd.sharding`.
    * Padding holds anything. Where an op sums over a padded dimension (a
      sharded reduction factor: contractions, reduce_sum and reduce_mean,
      the loss, attention's backward), the operands' padding is set to
      zero first (`sd.select` on an `sd.axis_index`-offset `sd.iota`);
      partial means count the block's share of the global elements;
      convolutions read padded pixels as the image's zero padding, group
      norm sums without them, and context-parallel attention over a padded
      sequence attends to the gathered keys and values.
    * Each op builds its local form through `PartitionOpInterface` (cloned
      with local types by default; reduce_mean and mse_loss scale their
      partial means, iota and the rng ops offset their block with
      `sd.axis_index`, constants are cut, `sd.sharding_constraint`
      disappears). Its shardings must agree with its sharding rule.
    * Each `sd.reshard`, and each returned value whose layout differs from
      its result's, becomes the cheapest sequence of collectives from the
      reshard planner (ReshardPlanner.h): partial sums become `all_reduce`
      or, where the target shards the axis, `reduce_scatter`; axes leave a
      dimension with `all_gather`, join one with `all_slice`, and move
      between dimensions with `all_to_all`; where whole blocks only change
      devices (an axis replaced by another of the same size, a dimension's
      axes reordered, axes trading dimensions) one `collective_permute`
      sends each block once, with the pairs of `reshard::getPermutation`.

    ```mlir
    func.func @f(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"} ]>})
        -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {} ]>}) {
      %y = sd.exp %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {"tensor"} ]>]>} : tensor<8x16xf32>
      %r = sd.reshard %y sharding = <@mesh, [{"data"}, {} ]> : tensor<8x16xf32>
      return %r : tensor<8x16xf32>
    }
    // on data=2, tensor=2 becomes
    func.func @f(%x: tensor<4x8xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"} ]>})
        -> (tensor<4x16xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {} ]>}) {
      %y = sd.exp %x : tensor<4x8xf32>
      %r = sd.all_gather %y @mesh [{}, {"tensor"} ] : (tensor<4x8xf32>) -> tensor<4x16xf32>
      return %r : tensor<4x16xf32>
    }
    ```

    The function must be static and free of calls (run `--inline` and
    `sd-specialize-batch` first), use one mesh, and have no collectives yet.
    Values without a sharding are replicated. A padded dimension whose
    layout a reshard changes goes through whole: `all_gather` and `slice`
    to its size, the planner's collectives for the other dimensions, then
    `pad` and `all_slice` (the planner moves equal blocks).
  }];
  let statistics = [
    Statistic<"numCollectives", "num-collectives",
              "Number of collectives created">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def OptimizeCollectives
    : Pass<"sd-optimize-collectives", "::mlir::func::FuncOp"> {
  let summary = "Merge, cancel and fuse the collectives of a local program";
  let description = [{
    Rewrites the collectives of a partitioned program into fewer and
    cheaper ones, until nothing changes:

    * no-ops go: mesh axes of size 1 are dropped from every collective, and
      one left without axes is replaced by its operand; a
      `collective_permute` loses its pairs `[s, s]`, and one left without
      pairs is replaced by its operand;
    * chains merge: `all_gather` of an `all_gather`, `all_slice` of an
      `all_slice`, `all_reduce` of an `all_reduce` over other axes become
      one op; identical collectives of one value become one;
    * pairs cancel: `all_slice` of an `all_gather` over the same axes (or a
      prefix of them: the rest stays gathered), `all_gather` of an
      `all_slice` over the same axes (or a suffix);
    * sums reduce once: `add` of two `all_reduce`s over the same axes
      (each feeding only the add) becomes an `all_reduce` of the `add`
      (the gradients of accumulated microbatches are summed locally and
      all-reduced once);
    * an `all_reduce` whose only user slices over reduced axes becomes a
      `reduce_scatter` (after an `all_reduce` over the remaining axes); a
      slice over other axes moves before the `all_reduce`, which then sums
      less data.

    ```mlir
    %s = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<8x16xf32>
    %y = sd.all_slice %s @mesh [{"fsdp"}, {} ] : (tensor<8x16xf32>) -> tensor<4x16xf32>
    // becomes
    %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {} ] : (tensor<8x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def FoldProductTransposes
    : Pass<"sd-fold-product-transposes", "::mlir::func::FuncOp"> {
  let summary = "Write a transposed product as the product of its swapped "
                "operands";
  let description = [{
    A `transpose` that swaps the two groups of free dimensions of a
    `dot_general`'s result ([batch, lhs free, rhs free] into [batch, rhs
    free, lhs free]) becomes the `dot_general` of the swapped operands,
    which a GEMM computes with other transpose flags instead of a pass over
    memory. The product may reach the transpose through `all_reduce`s
    (which commute with it); every value on the way has the one user.
    Reverse-mode differentiation writes each weight's gradient this way
    (dy·x, transposed into the weight's layout), so a training step loses
    one transpose per weight. It runs after `sd-partition`, on local types,
    so that shardings and collectives are unchanged.

    ```mlir
    %p = sd.dot_general %dy, %x batch = [] x [] contract = [0] x [0] : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
    %s = sd.all_reduce %p @mesh axes = ["data"] : tensor<4x3xf32>
    %w = sd.transpose %s permutation = [1, 0] : (tensor<4x3xf32>) -> tensor<3x4xf32>
    // becomes
    %p = sd.dot_general %x, %dy batch = [] x [] contract = [0] x [0] : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
    %w = sd.all_reduce %p @mesh axes = ["data"] : tensor<3x4xf32>
    ```
  }];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Number of transposes folded">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def BucketCollectives : Pass<"sd-bucket-collectives", "::mlir::func::FuncOp"> {
  let summary = "Group the reductions of a partitioned program into buckets "
                "that run back to back";
  let description = [{
    Moves the `sd.all_reduce`s and `sd.reduce_scatter`s of a partitioned
    program (the gradients' reductions, in a training step) into buckets of
    consecutive collectives, as PyTorch DDP's gradient buckets
    (`bucket_cap_mb`, 25 MiB by default) and XLA's all-reduce combiner do.
    The devices of a group wait for one another at a collective; with one
    reduction per parameter, each device waits out whatever the other
    devices' work between two reductions took longer, at every parameter.
    In a bucket the devices meet once and the rest of the bucket's
    reductions follow with no work in between, so the devices' jitter over
    the bucket's span evens out instead of being waited out piecewise.

    Walking each block in order, a reduction joins the open bucket when it
    has the bucket's kind, mesh and axes and reads nothing the bucket's
    results feed; the ops that read the bucket's results (the optimizer's
    update of each parameter) wait, in their order, until the bucket
    closes. A bucket closes when its operands reach `bucket-bytes` (a
    device's local bytes), before a reduction it cannot take, and before an
    op that is not pure or holds regions (nothing moves across those) and
    the terminator. Closing moves the bucket's reductions, then the ops
    that waited, to where it closes, each in its original order. Only the
    order changes: every op computes what it computed, so results are the
    same bits. What the waiting keeps alive longer (a bucket's gradients)
    shows in the memory the cost model reports. `bucket-bytes=0` leaves the
    program as it is.

    One bucket is open at a time: a reduction of another group keeps its
    place, or waits with the updates when it reads the bucket. On a mesh
    whose backward also all-reduces activations' gradients (tensor
    parallelism), those open buckets too, which the next one's dependence
    closes at once, and the gradients' reductions met while one is open
    are not bucketed. The pipelines run the pass on training steps only
    (`--bucket-cap-mb`).

    ```mlir
    // sd-bucket-collectives{bucket-bytes=1048576}
    %g1 = sd.all_reduce %d1 @mesh axes = ["data"] : tensor<384xf32>
    %p1 = sd.sub %w1, %g1 : tensor<384xf32>
    %d2 = sd.reduce_sum %x dims = [0] : (tensor<4x384xf32>) -> tensor<384xf32>
    %g2 = sd.all_reduce %d2 @mesh axes = ["data"] : tensor<384xf32>
    %p2 = sd.sub %w2, %g2 : tensor<384xf32>
    // becomes
    %d2 = sd.reduce_sum %x dims = [0] : (tensor<4x384xf32>) -> tensor<384xf32>
    %g1 = sd.all_reduce %d1 @mesh axes = ["data"] : tensor<384xf32>
    %g2 = sd.all_reduce %d2 @mesh axes = ["data"] : tensor<384xf32>
    %p1 = sd.sub %w1, %g1 : tensor<384xf32>
    %p2 = sd.sub %w2, %g2 : tensor<384xf32>
    ```
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
           "Close a bucket once its reductions' operands hold this many "
           "bytes on a device (0: no buckets)">,
  ];
  let statistics = [
    Statistic<"numBuckets", "num-buckets",
              "Buckets of more than one reduction">,
    Statistic<"numMoved", "num-moved",
              "Ops placed where their bucket closed (reductions and "
              "the ops that waited for them)">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def AsyncCollectives : Pass<"sd-async-collectives", "::mlir::func::FuncOp"> {
  let summary = "Split collective permutes into a start and a done around "
                "the work that does not need them";
  let description = [{
    Turns each `sd.collective_permute` of a partitioned program into an
    `sd.collective_permute_start` at the permute's place and an
    `sd.collective_permute_done` just before the first op that reads the
    permuted block, so that the ops in between overlap the transfer (XLA's
    asynchronous collective-permute). Ring attention issues the shift of
    the next K/V block before the current block's tiles, so each block's
    compute hides the next block's transfer (double buffering), and a trace
    shows the start and done spans around it. A permute whose first reader
    is the next op stays synchronous: there is nothing to overlap.

    ```mlir
    %k1 = sd.collective_permute %k0 @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<1x2x4x8xf32>
    %o, %l = sd.flash_attention %q, %k0, %v0 ...
    %o2, %l2 = sd.flash_attention %q, %k1, %v1 ...
    // becomes
    %p = sd.collective_permute_start %k0 @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<1x2x4x8xf32>
    %o, %l = sd.flash_attention %q, %k0, %v0 ...
    %k1 = sd.collective_permute_done %p, %k0 : tensor<1x2x4x8xf32>
    %o2, %l2 = sd.flash_attention %q, %k1, %v1 ...
    ```
    The pair keeps the operand alive until the done, so the memory a
    permute holds spans the overlapped ops.
  }];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

#endif // SD_PASSES_TD
