//===- InitAll.h - every external model sd attaches -------------*- C++ -*-===//
//
// The dialect (MLIRSD) declares the interfaces through which later layers
// ask an op about itself; those layers attach the implementations as
// external models. Tools and tests call registerAllSDExtensions once on
// their registry, so that every op has every interface before any pass or
// analysis asks (passes also register what they need themselves). Link
// SDPasses, which brings SDAutodiff and SDAnalysis. The reference
// evaluator's interfaces stay with the evaluator
// (registerEvaluatorInterfaces).
//
//===----------------------------------------------------------------------===//

#ifndef SD_INITALL_H
#define SD_INITALL_H

#include "sd/Analysis/CostModels.h"
#include "sd/Autodiff/VjpModels.h"
#include "sd/Passes/PartitionModels.h"
#include "sd/Passes/RematPolicy.h"

namespace mlir::sd {
/// Attaches the VJPs (SDAutodiff), the partitioning and the remat policy's
/// view of matmuls (SDPasses) and the costs (SDAnalysis) of every sd op.
inline void registerAllSDExtensions(DialectRegistry &registry) {
  registerVjpModels(registry);
  registerPartitionModels(registry);
  registerRematOpInterfaceModels(registry);
  registerCostModels(registry);
}
} // namespace mlir::sd

#endif // SD_INITALL_H
