//===- SDCost.h - types and helpers of CostOpInterface ----------*- C++ -*-===//
//
// What CostOpInterface's methods return and the shared helpers its default
// implementations call. Included by SDOps.h before the interface
// declarations.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDCOST_H
#define SD_IR_SDCOST_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir::sd {

/// How a collective moves data, which decides its cost formula (the cost
/// model applies the ring convention to each pattern; see
/// sd/Analysis/CostModel.h).
enum class CommunicationPattern {
  /// Nothing is sent (all_slice; a permute that moves no block).
  None,
  /// Every device ends up with the whole S-byte tensor (all_gather).
  AllGather,
  /// The S-byte operands are summed and scattered (reduce_scatter).
  ReduceScatter,
  /// The S-byte operands are summed onto every device (all_reduce).
  AllReduce,
  /// Each device keeps 1/N of its S bytes and sends the rest (all_to_all).
  AllToAll,
  /// Each device sends its S bytes to one other device
  /// (collective_permute).
  Permute,
};

/// What one collective sends (CostOpInterface::getCommunication).
struct CommunicationInfo {
  CommunicationPattern pattern = CommunicationPattern::None;
  /// The mesh axes whose devices form a group, as the op lists them.
  llvm::SmallVector<llvm::StringRef> axes;
  /// N: the product of the axes' sizes.
  int64_t groupSize = 1;
  /// S: the tensor size the pattern's formula applies to, in bytes — the
  /// full (gathered, unscattered) local tensor for all_gather and
  /// reduce_scatter, the operand for the others.
  int64_t tensorBytes = 0;
};

/// Where an op's results live (CostOpInterface::getResultMemory).
enum class MemorySpace {
  /// The device's own memory: every op's results unless it says otherwise.
  Device,
  /// Host memory, where offloaded values wait for the backward pass
  /// (sd.offload).
  Host,
};

/// Bytes of one element of `type`'s element type: whole bytes, so i1 is 1.
int64_t getElementBytes(Type type);

/// Elements of a static-shape tensor type (1 for a scalar type).
int64_t getNumElements(Type type);

/// Bytes of a static-shape tensor type.
int64_t getTensorBytes(Type type);

/// The elementwise FLOP count: elements of all results × `flopsPerElement`.
int64_t getElementwiseFlops(Operation *op, int64_t flopsPerElement);

/// Bytes of all operands plus all results of `op`.
int64_t getOperandAndResultBytes(Operation *op);

} // namespace mlir::sd

#endif // SD_IR_SDCOST_H
