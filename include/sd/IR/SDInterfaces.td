//===- SDInterfaces.td - sd op interfaces -------------------*- tablegen -*-===//
//
// Interfaces through which ops state their own rules, so that passes stay
// generic. Later stages add sharding rules, VJPs, partitioning and cost.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDINTERFACES_TD
#define SD_IR_SDINTERFACES_TD

include "mlir/IR/OpBase.td"

def SD_RefineShapesOpInterface : OpInterface<"RefineShapesOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    Ops whose result type is written out (not inferred from the operands)
    but may still hold dynamic dimensions implement this so that
    `sd-specialize-batch` can compute static result types once the operand
    types became static. Ops with `InferTypeOpInterface` need nothing more.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the result types from the current operand types. `batch` is
        the batch size being specialized: a dynamic result dimension that no
        operand determines (a batch dimension a broadcast creates) takes it.
        Fails (after emitting an error) when a dynamic result dimension
        cannot be determined.
      }],
      "::llvm::LogicalResult", "refineResultTypes",
      (ins "int64_t":$batch, "::llvm::SmallVectorImpl<::mlir::Type> &":$types)>,
  ];
}

def SD_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    Every sd op (except `sd.mesh`) states its sharding rule — which factors
    its operand and result dimensions are made of, and which factors are
    reductions or need replication (see `#sd.sharding_rule`) — so that
    sharding propagation and partitioning are one generic algorithm.

    The default implementation is the elementwise rule: one pass-through
    factor per dimension, shared by all operands and results of rank > 0,
    which must then have one shape. Ops that are not elementwise override
    it (`DeclareOpInterfaceMethods<SD_ShardingRuleOpInterface,
    ["getShardingRule"]>`), building their rule with
    `ShardingRuleBuilder`.

    The rules (P = pass-through, R = reduction, N = need_replication):
    * elementwise ops, compare, select, convert, sharding_constraint: P per
      dimension; softmax likewise, but N on the softmax dimension.
    * reductions: R on reduced dimensions, P on kept ones; mse_loss: R on
      every dimension (scalar result).
    * dot_general: P for batch, lhs-free and rhs-free dimensions, R for
      contracting ones.
    * broadcast_in_dim: an operand dimension shares the factor of its result
      dimension when their sizes agree; a repeated size-1 operand dimension
      maps to no factor; new result dimensions get factors of their own.
    * reshape: compound factors from a gcd walk over both shapes; transpose:
      the permuted factors.
    * slice, pad: P on untouched dimensions; a sliced or padded dimension
      has an N factor on each side. concat: N on the concatenated dimension
      (one factor per input and one for the result).
    * layer_norm, rms_norm: N on the last dimension (scale and bias map to
      it), P elsewhere; group_norm: N on the channels, P on the batch and
      the pixels (split pixels sum their statistics across devices).
    * attention: b, h, sq, dv P; skv and d N (see `sd.attention`).
    * conv2d: batch and Cout P (Cout with the bias), Cin R; with groups > 1
      Cin, Cin/groups and Cout N. A spatial dimension whose output size
      times the stride is the input's is the compound [Ho, stride] in the
      input and Ho in the result, Ho P (sd-partition exchanges halo rows)
      and the stride N; other spatial dimensions, KH and KW N.
      conv2d_input_grad and conv2d_filter_grad: the same factors with dy in
      the result's place; the input gradient sums over Cout (R), the
      filter gradient over the batch and the output pixels (R).
    * upsample_nearest: batch and C P; result H is the compound
      [h, scale] of the operand's h and a factor of the scale (likewise W).
    * constant, iota, rng_normal, rng_uniform: P per result dimension
      (iota and the counter-based rng compute from global indices).
  }];
  let methods = [
    InterfaceMethod<[{
        The op's sharding rule for its current operand and result types.
        Returns null after emitting an error on the op only where no rule
        can be given (dynamic or zero-size dimensions: run
        sd-specialize-batch first); never for a valid op with static shapes.
      }],
      "::mlir::sd::OpShardingRuleAttr", "getShardingRule", (ins), [{}],
      [{ return ::mlir::sd::getPointwiseShardingRule($_op); }]>,
  ];
}

def SD_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    Every sd op that may appear in a function body (all but `sd.mesh`)
    states what it costs on the device that runs it, so that the cost model
    (`sd/Analysis/CostModel.h`, behind `sdopt --report`) is one generic
    walk that knows no op names. The implementations are external models
    that the cost model's library attaches (`registerCostModels` in
    `sd/Analysis/CostModels.h`): what an op costs is the cost model's
    business, not the dialect's. Costs are computed from the op's own
    operand and result types: per device in a partitioned program (local
    types), for the whole tensor in a global one. Shapes must be static
    (run sd-specialize-batch first); the cost model checks that before it
    asks.

    FLOPs count each arithmetic operation (add, multiply, compare, ...) and
    each elementary function (exp, log, sqrt, tanh, sin, cos, erf, pow) of
    the op's defining formula as one FLOP; a fused multiply-add is two:
    * dot_general: 2·M·N·K = 2 × result elements × contracted size.
    * attention: 2·B·H·Sq·Skv·(D + Dv) for Q·Kᵀ and P·V (4·B·H·Sq·Skv·D
      when Dv = D), plus 6 per score for the scale and the softmax, plus 1
      per score for the mask when there is one. flash_attention: the same
      (the online softmax's per-block rescaling is not counted).
    * flash_attention_dq: per score 4·D + 2·Dv + 4 (the recomputed scores
      and probabilities, dO·Vᵀ, dS, dS·K), plus 2·Dv per query row (Di);
      flash_attention_dkv: per score 4·D + 4·Dv + 4, plus 2·Dv per row;
      each + 1 per score with a mask.
    * conv2d: 2·N·Ho·Wo·Cout·KH·KW·Cin/groups, plus N·Ho·Wo·Cout for the
      bias.
    * elementwise ops: FLOPs per element × result elements,
      with FLOPs per element 1 (add, sub, mul, div, max, min, pow, neg, exp,
      log, sqrt, tanh, sin, cos, compare, select, convert), rsqrt 2,
      sigmoid 4 (1/(1+e^-x)), silu 5, gelu 9 with the tanh approximation
      and 5 exact (erf).
    * adamw: 14 per parameter element (the ops it decomposes into), 16
      with weight decay.
    * softmax 5 per element (max, subtract, exp, sum, divide); layer_norm
      and group_norm 5 per element (mean, centre, square, variance,
      normalize) + 1 with scale + 1 with bias; rms_norm 3 + 1 with scale.
      Per-row work (a reciprocal square root per row) is not counted.
    * reductions: 1 per operand element; mse_loss: 3 per operand element
      (subtract, square, sum).
    * rng_uniform 2 per element (scale, shift), rng_normal 8 (Box–Muller);
      the integer work of the counter-based generator is not counted.
    * shape and data-movement ops (broadcast_in_dim, reshape, transpose,
      slice, concat, pad, upsample_nearest), constant, iota,
      sharding_constraint, reshard: 0.
    * collectives: 0 (the additions of a reduction are not counted); what
      they send is `getCommunication`.

    Bytes accessed are the bytes of all operands plus all results (one read
    of each input, one write of each output): the memory term of a
    roofline. Element sizes: f32 4 bytes, bf16 2, i1 1.

    Views: reshape, transpose, slice and convert hold their operand's
    elements, rearranged (or in another element type); `getViewSource`
    names that operand, so that the cost model attributes an all_gather of
    a parameter's view to the parameter.
  }];
  let methods = [
    InterfaceMethod<[{
        The floating-point operations the op performs (see the table above).
      }],
      "int64_t", "getFlops", (ins)>,
    InterfaceMethod<[{
        Bytes read and written in the device's memory: all operands plus all
        results.
      }],
      "int64_t", "getBytesAccessed", (ins)>,
    InterfaceMethod<[{
        The part of `getFlops` that recomputes forward values inside the op
        itself (flash attention's backward recomputes the scores
        `scale·Q·Kᵀ` and probabilities `exp(S − lse)` of every tile: 2·D + 2
        per score); 0 for every other op (the default). The report counts
        it with the recomputations a remat policy adds.
      }],
      "int64_t", "getRecomputeFlops", (ins), [{}],
      [{ return 0; }]>,
    InterfaceMethod<[{
        Where the op's results live: device memory (the default) or host
        memory (`sd.offload`). The cost model counts host-resident values
        apart from the device peak, and the bytes that move between the two
        memories.
      }],
      "::mlir::sd::MemorySpace", "getResultMemory", (ins), [{}],
      [{ return ::mlir::sd::MemorySpace::Device; }]>,
    InterfaceMethod<[{
        What a collective sends between devices: its communication pattern,
        the mesh axes that form its groups, the group size N and the tensor
        size S in bytes that the pattern's ring formula applies to (see
        `CommunicationInfo`). `std::nullopt` for every op that does not
        communicate (the default). `symbols` caches mesh lookups.
      }],
      "std::optional<::mlir::sd::CommunicationInfo>", "getCommunication",
      (ins "::mlir::SymbolTableCollection &":$symbols), [{}],
      [{ return std::nullopt; }]>,
    InterfaceMethod<[{
        The operand whose elements the result holds, only rearranged or
        converted (reshape, transpose, slice, convert), or null for every
        other op (the default).
      }],
      "::mlir::Value", "getViewSource", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<[{
        Device memory the op's runtime kernel borrows from the device pool
        while it runs and returns after: conv2d's im2col rows, Ho·Wo ×
        KH·KW·Cin/groups elements of the input's type (none for a 1×1,
        stride-1, unpadded, ungrouped conv, which is a plain GEMM); 0 for
        every other op (the default). The cost model adds it to the live
        bytes at the op.
      }],
      "int64_t", "getWorkspaceBytes", (ins), [{}],
      [{ return 0; }]>,
    InterfaceMethod<[{
        Whether a compiler computes the op inside the loops of the ops that
        read it instead of storing its result: elementwise arithmetic,
        comparisons and selects, converts, broadcasts, views, pads and
        concatenations, constants and iota (XLA's loop fusion and sd's
        OpenMP lowering both fuse them); false for every other op (the
        default). The cost model counts the bytes such an op moves to and
        from memory only where its operands come from an op that is not
        fusible (or from arguments) and where a non-fusible op or the
        return reads its result.
      }],
      "bool", "isFusible", (ins), [{}],
      [{ return false; }]>,
  ];
}

def SD_PartitionOpInterface : OpInterface<"PartitionOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    How an op of a propagated global program becomes its per-device form in
    `sd-partition`. The pass gives the op its operands' local values (each
    device's block of the global operand, laid out as `operandShardings`
    say) and the local result types (each global dimension divided by the
    product of its axes' sizes), and the op builds what computes its
    results' local values as `resultShardings` lay them out, partial sums
    (`unreduced` axes) included. The pass has checked beforehand that the
    shardings agree with the op's sharding rule (ShardingRuleOpInterface):
    every factor has the same axes in every tensor that has it,
    need_replication factors are whole, no operand is a partial sum, and
    the results are partial sums over exactly the axes of the sharded
    reduction factors.

    The implementations are external models that sd-partition's library
    attaches (`registerPartitionModels` in `sd/Passes/PartitionModels.h`).
    Most ops clone themselves with the local operands and result types:
    right for every op whose result block is the same function of the
    operand blocks as the global result is of the global operands
    (elementwise ops, shape ops along unsharded dimensions, dot_general,
    whose sharded contraction leaves the partial sum the result's sharding
    asks for, normalizations and attention along their whole dimensions).
    Ops that need more say so in their own models (lib/Passes/
    PartitionModels.cpp):
    * slice: the sharded (untouched) dimensions take their local extent.
    * reduce_mean, mse_loss: over a sharded dimension the local mean is
      divided by the shard count, so that the partial sums add up to the
      global mean. reduce_max: a partial maximum cannot be summed, so a
      sharded reduced dimension is an error.
    * conv2d: with a sharded input-channel dimension each device adds the
      bias divided by the shard count. With a sharded height or width,
      conv2d and conv2d_filter_grad receive their neighbours' boundary rows
      (`sd.collective_permute` marked `sd.halo`, zeroed at the ends of the
      group) and convolve without padding on that dimension;
      conv2d_input_grad computes the gradient of its extended block and
      sends the rows that belong to its neighbours back to them
      (lib/Passes/PartitionSpatial.cpp).
    * group_norm with sharded pixels: local sums of each group and
      `sd.all_reduce` give the mean, then the variance.
    * iota: along a sharded `dim`, the device's offset (`sd.axis_index`
      times the local size) is added.
    * rng_normal, rng_uniform: the offsets form of the op generates the
      device's block of the global random tensor.
    * constant: a splat becomes the local splat; another sharded constant
      is kept whole and sliced with `sd.all_slice`.
    * sharding_constraint: its operand, unchanged (it ends here).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at `builder`'s insertion point, what computes the op's local
        results from `localOperands`; returns one value per result, of
        `localResultTypes`. Fails, after an error on the op, where the op
        cannot be partitioned with these shardings.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "partition",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$localOperands,
           "::mlir::TypeRange":$localResultTypes,
           "::llvm::ArrayRef<::mlir::sd::ShardingAttr>":$operandShardings,
           "::llvm::ArrayRef<::mlir::sd::ShardingAttr>":$resultShardings)>,
  ];
}

def SD_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    How an op is differentiated in reverse mode (`sd-differentiate`): given
    the cotangents of its results, the op builds the cotangents of its
    operands (its vector-Jacobian product) from sd ops. Every op with a
    float operand implements it; ops with no operands (constant, iota) need
    not.

    The VJP may use the op's own operands and results: `sd-differentiate`
    calls it on a copy of the op placed in the backward pass, whose
    operands are the values the remat policy makes available there (kept,
    reloaded from host memory, or recomputed), and whose results are
    replaced by the kept values where the policy keeps them. So a VJP that
    uses the result (exp, softmax, sigmoid) costs no recomputation when the
    result is kept, and one that does not (dot_general) never needs it.

    VJPs are written with the ops the partitioner already knows, so the
    backward pass is sharded, partitioned, evaluated and costed like the
    forward pass; none adds an op of its own.

    The implementations are external models of the autodiff library
    (`registerVjpModels` in `sd/Autodiff/VjpModels.h`).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at `builder`'s insertion point, the cotangent of each operand
        from `resultCotangents` (one per result; a null value is a zero
        cotangent, and at least one is not null). Fills `operandCotangents`
        with one value per operand, of the operand's type, or null where no
        gradient flows (a non-differentiable operand such as an i1 mask, an
        rng offset, or a zero cotangent). Fails, after an error on the op,
        where the op cannot be differentiated.
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)>,
  ];
}

def SD_RematOpInterface : OpInterface<"RematOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    What remat policies (`sd-remat`) ask an op about its results, beyond
    their `sd.name`. Attached as an external model by the remat library
    (`registerRematOpInterfaceModels`); an op without it is not a matmul
    to a policy.
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the op is a matrix product without batch dimensions (a
        projection `x·W`, not attention's batched products): JAX's
        `dots_with_no_batch_dims`, which MATMUL_WITHOUT_BATCH keeps.
      }],
      "bool", "isMatmulWithoutBatch">,
  ];
}

#endif // SD_IR_SDINTERFACES_TD
