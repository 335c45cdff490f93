//===- SDCost.h - the types CostOpInterface returns -------------*- C++ -*-===//
//
// What CostOpInterface's methods return. Included by SDOps.h before the
// interface declarations; the implementations (external models) and their
// helpers are in the cost model's library (sd/Analysis/CostModels.h).
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDCOST_H
#define SD_IR_SDCOST_H

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

} // namespace mlir::sd

#endif // SD_IR_SDCOST_H
