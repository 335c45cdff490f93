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
      it), P elsewhere; group_norm: P on the batch, N on all other
      dimensions.
    * attention: b, h, sq, dv P; skv and d N (see `sd.attention`).
    * conv2d: batch and Cout P (Cout with the bias), Cin R; with groups > 1
      Cin, Cin/groups and Cout N; spatial dimensions (H, W, KH, KW, Ho, Wo)
      N until halo exchange exists.
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

#endif // SD_IR_SDINTERFACES_TD
