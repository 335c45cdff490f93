//===- MeshSpec.h - sd.mesh attributes as MLIR-free mesh specs --*- C++ -*-===//
//
// The one conversion from a `#sd.mesh` attribute to the ::sd::MeshSpec that
// the MLIR-free libraries (logical rules, device numbering, the evaluator's
// collectives, the cost model) work on.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_MESHSPEC_H
#define SD_IR_MESHSPEC_H

#include "sd/IR/SDAttrs.h"
#include "sd/Sharding/Mesh.h"

namespace mlir::sd {
/// The mesh's axes, in order, with their ICI and DCN parts.
inline ::sd::MeshSpec toMeshSpec(MeshAttr mesh) {
  std::vector<::sd::MeshAxis> axes;
  for (MeshAxisAttr axis : mesh.getAxes())
    axes.push_back({axis.getName().str(), axis.getIci(), axis.getDcn()});
  return ::sd::MeshSpec(std::move(axes));
}
} // namespace mlir::sd

#endif // SD_IR_MESHSPEC_H
