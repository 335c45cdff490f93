//===- SDOps.h - sd operations ----------------------------------*- C++ -*-===//
#ifndef SD_IR_SDOPS_H
#define SD_IR_SDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDCost.h"
#include "sd/IR/SDDialect.h"

#include <array>

namespace mlir::sd {
/// Whether `actual` is the one `inferred` type, or that shape in f32 (ops
/// that may accumulate bf16 operands into an f32 result).
bool isInferredOrF32(TypeRange inferred, TypeRange actual);

/// Shared result-type inference of the reductions: the operand shape without
/// `dims`. Reports through `loc` as `opName`.
LogicalResult inferReduceType(StringRef opName, std::optional<Location> loc,
                              Type operandType, ArrayRef<int64_t> dims,
                              SmallVectorImpl<Type> &types);

/// The elementwise sharding rule of `op` (ShardingRuleOpInterface's
/// default): one pass-through factor per dimension shared by all operands
/// and results of rank > 0. Null after an error on `op` when shapes are not
/// static and positive or differ.
OpShardingRuleAttr getPointwiseShardingRule(Operation *op);

/// The sharding rule of the reductions over `dims` of their one operand:
/// reduced dimensions are reduction factors, the others pass through.
OpShardingRuleAttr getReduceShardingRule(Operation *op, ArrayRef<int64_t> dims);

/// The mesh a symbol reference names, looked up from `from`; null (after an
/// error through `emitError`) when there is none.
MeshAttr lookupMesh(Operation *from, FlatSymbolRefAttr meshName,
                    function_ref<InFlightDiagnostic()> emitError);

/// Checks that `type`, when a ranked tensor, has a number of elements and a
/// size in bytes that int64 holds (its static dimensions); otherwise an
/// error through `emitValueError`, whose diagnostic starts by naming the
/// value ("operand #1"). Every size sd computes from a shape (memory, costs,
/// buffers) is an int64.
LogicalResult
verifyTensorSize(Type type, function_ref<InFlightDiagnostic()> emitValueError);

/// The trait of every sd op: verifyTensorSize of each operand and result.
template <typename ConcreteType>
class TensorSizesFit : public OpTrait::TraitBase<ConcreteType, TensorSizesFit> {
public:
  static LogicalResult verifyTrait(Operation *op);
};

/// TensorSizesFit's check, shared by every op.
LogicalResult verifyTensorSizesFit(Operation *op);

template <typename ConcreteType>
LogicalResult TensorSizesFit<ConcreteType>::verifyTrait(Operation *op) {
  return verifyTensorSizesFit(op);
}
} // namespace mlir::sd

// After the declarations above: the interfaces' default implementations
// call them.
#include "sd/IR/SDInterfaces.h.inc"

#define GET_OP_CLASSES
#include "sd/IR/SDOps.h.inc"

namespace mlir::sd {
/// Attaches the external model `Model<OpTy>` to each of `OpTys`: how the
/// libraries of later layers (autodiff, partitioning, costs) give sd ops
/// the interfaces they implement there.
template <template <typename> class Model, typename... OpTys>
void attachModels(MLIRContext &context) {
  (OpTys::template attachInterface<Model<OpTys>>(context), ...);
}
} // namespace mlir::sd

/// The elementwise math ops (unary, then binary), which every layer that
/// attaches models treats alike: `attachModels<Model, SD_ELEMENTWISE_MATH_OPS,
/// ...>`.
#define SD_ELEMENTWISE_MATH_OPS                                                \
  NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SinOp, CosOp, SigmoidOp,       \
      SiluOp, ErfOp, GeluOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp

#endif // SD_IR_SDOPS_H
