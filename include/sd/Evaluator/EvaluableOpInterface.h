//===- EvaluableOpInterface.h - reference evaluation of ops -----*- C++ -*-===//
//
// The op interface through which each sd op evaluates itself in the
// reference evaluator, and the registration of its implementations.
//
//===----------------------------------------------------------------------===//

#ifndef SD_EVALUATOR_EVALUABLEOPINTERFACE_H
#define SD_EVALUATOR_EVALUABLEOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include "sd/Reference/Tensor.h"

#include "sd/Evaluator/EvaluableOpInterface.h.inc"

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches `EvaluableOpInterface` to every sd op that computes values (all
/// but `sd.mesh`). Add to the registry before the context loads the dialect.
void registerEvaluatorInterfaces(DialectRegistry &registry);
} // namespace sd
} // namespace mlir

#endif // SD_EVALUATOR_EVALUABLEOPINTERFACE_H
