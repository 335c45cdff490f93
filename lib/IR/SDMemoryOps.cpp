//===- SDMemoryOps.cpp - sd.offload and sd.reload -------------------------===//
//
// Verifiers and costs of the ops that move tensors between device and host
// memory. Their VJPs are in SDVjp.cpp with the others.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"

using namespace mlir;
using namespace mlir::sd;

LogicalResult ReloadOp::verify() {
  if (!getOperand().getDefiningOp<OffloadOp>())
    return emitOpError("reloads a value that no sd.offload produced");
  return success();
}

// A move does no arithmetic; its bytes are the transfer the cost model
// counts.
int64_t OffloadOp::getFlops() { return 0; }
int64_t ReloadOp::getFlops() { return 0; }

MemorySpace OffloadOp::getResultMemory() { return MemorySpace::Host; }
MemorySpace ReloadOp::getResultMemory() { return MemorySpace::Device; }
