//===- PartitionHelpers.h - what partition models share ---------*- C++ -*-===//
//
// The helpers of PartitionOpInterface's models, shared by the files that
// define them (PartitionModels.cpp, PartitionSpatial.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_PASSES_PARTITIONHELPERS_H
#define SD_LIB_PASSES_PARTITIONHELPERS_H

#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"

namespace mlir {
class DialectRegistry;
class MLIRContext;

namespace sd::partition_detail {

/// The product of the sizes of `axes` in the mesh `sharding` names; failure
/// after an error on `op` when there is no such mesh.
FailureOr<int64_t> axesSize(Operation *op, ShardingAttr sharding,
                            ArrayRef<StringAttr> axes);
/// The product of the sizes of the axes of `dims` of `sharding`.
FailureOr<int64_t> dimsSize(Operation *op, ShardingAttr sharding,
                            ArrayRef<int64_t> dims);
/// `op` cloned with local operands and types: a clone keeps attributes and
/// properties; only the types change.
SmallVector<Value> cloneLocal(OpBuilder &builder, Operation *op,
                              ValueRange operands, TypeRange types);
/// A constant of `type` (f32 or bf16) with every element `value`.
Value splat(OpBuilder &builder, Location loc, RankedTensorType type,
            double value);
/// `value` times `factor`, elementwise.
Value scale(OpBuilder &builder, Location loc, Value value, double factor);

/// `value`, a device's block of a dimension `dim` of global size `size`
/// split over mesh `axes` (`shards` devices), with the block's padding (its
/// elements at global index `size` and beyond, see sd::blockExtent) set to
/// zero; `value` itself when the devices divide `size`. A select, so that
/// whatever the padding held (even NaN) is gone.
Value maskPadding(OpBuilder &builder, Location loc, Value value, int64_t dim,
                  int64_t size, FlatSymbolRefAttr mesh,
                  ArrayRef<StringAttr> axes, int64_t shards);

/// `value` (the local block of `global`, laid out as `sharding`) with the
/// padding of every dimension in `dims` masked (maskPadding).
FailureOr<Value> maskPaddedDims(Operation *op, OpBuilder &builder, Value value,
                                RankedTensorType global, ShardingAttr sharding,
                                ArrayRef<int64_t> dims);

/// A partition function of one op class: what PartitionOpInterface's
/// `partition` does, with the op already cast.
template <typename OpTy>
using PartitionFn = FailureOr<SmallVector<Value>> (*)(
    OpTy op, OpBuilder &builder, ValueRange operands, TypeRange types,
    ArrayRef<ShardingAttr> operandShardings,
    ArrayRef<ShardingAttr> resultShardings);

/// The external model of an op class whose local form `fn` builds.
template <typename OpTy, PartitionFn<OpTy> fn>
struct FunctionPartition
    : public PartitionOpInterface::ExternalModel<FunctionPartition<OpTy, fn>,
                                                 OpTy> {
  FailureOr<SmallVector<Value>>
  partition(Operation *op, OpBuilder &builder, ValueRange operands,
            TypeRange types, ArrayRef<ShardingAttr> operandShardings,
            ArrayRef<ShardingAttr> resultShardings) const {
    return fn(cast<OpTy>(op), builder, operands, types, operandShardings,
              resultShardings);
  }
};

/// Attaches the models of the ops that PartitionSpatial.cpp partitions:
/// convolutions with their halo exchange, group norm over sharded pixels.
void attachSpatialPartitionModels(MLIRContext &context);

} // namespace sd::partition_detail
} // namespace mlir

#endif // SD_LIB_PASSES_PARTITIONHELPERS_H
