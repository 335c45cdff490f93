//===- EvaluableOpInterface.h - reference evaluation of ops -----*- C++ -*-===//
//
// The op interfaces through which each sd op evaluates itself in the
// reference evaluator (per device, or across all devices for collectives),
// and the registration of their implementations.
//
//===----------------------------------------------------------------------===//

#ifndef SD_EVALUATOR_EVALUABLEOPINTERFACE_H
#define SD_EVALUATOR_EVALUABLEOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include "sd/IR/SDAttrs.h"
#include "sd/Reference/Tensor.h"
#include "sd/Sharding/Mesh.h"

#include <vector>

#include "sd/Evaluator/EvaluableOpInterface.h.inc"

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches `EvaluableOpInterface` to every sd op that computes values on
/// one device, and `CollectiveEvaluableOpInterface` to the collectives (all
/// ops but `sd.mesh` get one of them). Add to the registry before the
/// context loads the dialect.
void registerEvaluatorInterfaces(DialectRegistry &registry);

/// The collectives' part of `registerEvaluatorInterfaces`.
void registerCollectiveEvaluatorInterfaces(DialectRegistry &registry);

/// The MLIR-free form of a mesh attribute, whose device numbering the
/// evaluator uses (device i of a run is the mesh's device id i).
::sd::MeshSpec getMeshSpec(MeshAttr mesh);
} // namespace sd
} // namespace mlir

#endif // SD_EVALUATOR_EVALUABLEOPINTERFACE_H
