//===- PartitionModels.h - how each sd op partitions ------------*- C++ -*-===//
//
// PartitionOpInterface's implementations belong to sd-partition, not to the
// dialect: its library attaches them as external models.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_PARTITIONMODELS_H
#define SD_PASSES_PARTITIONMODELS_H

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches PartitionOpInterface to every sd op of a global program (all but
/// the mesh, reshards, collectives and axis_index). sd-partition adds it to
/// its dependent registry; tools add it up front (registerAllSDExtensions).
void registerPartitionModels(DialectRegistry &registry);
} // namespace sd
} // namespace mlir

#endif // SD_PASSES_PARTITIONMODELS_H
