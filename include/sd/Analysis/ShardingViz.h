//===- ShardingViz.h - which device holds which block -----------*- C++ -*-===//
//
// Draws a tensor's sharding as a grid of blocks labelled with the devices
// that hold them, like jax.debug.visualize_array_sharding (behind `sdopt
// --show-sharding`). MLIR-free: a mesh (sd/Sharding/Mesh.h), a shape and
// the mesh axes of each dimension.
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_SHARDINGVIZ_H
#define SD_ANALYSIS_SHARDINGVIZ_H

#include "sd/Sharding/Mesh.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sd {

/// The mesh axes each tensor dimension is split over, major to minor.
using DimAxes = std::vector<std::vector<std::string>>;

/// The devices holding each drawn block, ascending: `owners[row][column]`.
/// Rows are the blocks of dimension 0 and columns those of dimension 1; a
/// 1-D tensor is one row of the blocks of dimension 0, a scalar one block.
/// Along a dimension split over axes [a, b], the device with coordinates
/// (ca, cb) holds block ca·size(b) + cb; devices are numbered as
/// MeshSpec::deviceId does. Axes the mesh lacks are ignored.
std::vector<std::vector<std::vector<int64_t>>>
computeBlockOwners(const MeshSpec &mesh, const DimAxes &dimAxes);

/// Device ids as a short list: "0", "0,4", runs of three or more as
/// "0-3" ("0-3,8-11"). `ids` ascending.
std::string formatDeviceList(const std::vector<int64_t> &ids);

/// The picture: a line per drawn dimension saying how it is split, a note
/// on dimensions past the second (not drawn), then the grid of blocks,
/// each labelled with its devices. `shape` and `dimAxes` have one entry per
/// dimension.
std::string renderSharding(const MeshSpec &mesh,
                           const std::vector<int64_t> &shape,
                           const DimAxes &dimAxes);

} // namespace sd

#endif // SD_ANALYSIS_SHARDINGVIZ_H
