//===- MeshSpec.h - sd.mesh attributes as MLIR-free mesh specs --*- C++ -*-===//
//
// The one conversion from a `#sd.mesh` attribute to the ::sd::MeshSpec that
// the MLIR-free libraries (logical rules, device numbering, the evaluator's
// collectives, the cost model) work on. MLIRSD links SDSharding, the
// library below it that defines MeshSpec.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_MESHSPEC_H
#define SD_IR_MESHSPEC_H

#include "sd/IR/SDAttrs.h"
#include "sd/Sharding/Mesh.h"

namespace mlir::sd {
/// The mesh's axes, in order, with their ICI and DCN parts.
::sd::MeshSpec toMeshSpec(MeshAttr mesh);
} // namespace mlir::sd

#endif // SD_IR_MESHSPEC_H
