//===- ShardingViz.cpp - which device holds which block -------------------===//
//
// Block ownership from mesh coordinates, and an ASCII grid of it.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/ShardingViz.h"

#include <algorithm>
#include <sstream>

using namespace sd;

namespace {
/// The mesh axes of one dimension as indices into MeshSpec::axes(), with
/// the number of blocks they make.
struct DimSplit {
  std::vector<size_t> axes;
  int64_t blocks = 1;
};
} // namespace

static DimSplit splitOf(const MeshSpec &mesh,
                        const std::vector<std::string> &names) {
  DimSplit split;
  for (const std::string &name : names) {
    const MeshAxis *axis = mesh.findAxis(name);
    if (!axis)
      continue;
    split.axes.push_back(axis - mesh.axes().data());
    split.blocks *= axis->size();
  }
  return split;
}

/// The block a device with coordinates `coords` holds along `split`:
/// row-major over the split's axes.
static int64_t blockOf(const MeshSpec &mesh, const DimSplit &split,
                       const std::vector<int64_t> &coords) {
  int64_t block = 0;
  for (size_t axis : split.axes)
    block = block * mesh.axes()[axis].size() + coords[axis];
  return block;
}

/// The splits drawn as rows and as columns (see computeBlockOwners).
static std::pair<DimSplit, DimSplit> drawnSplits(const MeshSpec &mesh,
                                                 const DimAxes &dimAxes) {
  if (dimAxes.empty())
    return {};
  if (dimAxes.size() == 1)
    return {DimSplit(), splitOf(mesh, dimAxes[0])};
  return {splitOf(mesh, dimAxes[0]), splitOf(mesh, dimAxes[1])};
}

std::vector<std::vector<std::vector<int64_t>>>
sd::computeBlockOwners(const MeshSpec &mesh, const DimAxes &dimAxes) {
  auto [rows, columns] = drawnSplits(mesh, dimAxes);
  std::vector<std::vector<std::vector<int64_t>>> owners(
      rows.blocks, std::vector<std::vector<int64_t>>(columns.blocks));
  for (int64_t id = 0, e = mesh.numDevices(); id < e; ++id) {
    std::vector<int64_t> coords = mesh.coordinates(id);
    owners[blockOf(mesh, rows, coords)][blockOf(mesh, columns, coords)]
        .push_back(id);
  }
  return owners;
}

std::string sd::formatDeviceList(const std::vector<int64_t> &ids) {
  std::string text;
  for (size_t i = 0; i < ids.size();) {
    size_t run = i;
    while (run + 1 < ids.size() && ids[run + 1] == ids[run] + 1)
      ++run;
    if (!text.empty())
      text += ",";
    if (run - i >= 2) {
      text += std::to_string(ids[i]) + "-" + std::to_string(ids[run]);
      i = run + 1;
    } else {
      text += std::to_string(ids[i]);
      ++i;
    }
  }
  return text;
}

/// "dimension 0 (8): 8 blocks of 1 over data,fsdp" or "... whole".
static std::string describeDim(const MeshSpec &mesh, int64_t dim, int64_t size,
                               const std::vector<std::string> &names) {
  DimSplit split = splitOf(mesh, names);
  std::string text =
      "dimension " + std::to_string(dim) + " (" + std::to_string(size) + "): ";
  if (split.blocks == 1)
    return text + "whole";
  text += std::to_string(split.blocks) + " blocks of " +
          std::to_string(size / split.blocks) + " over ";
  for (size_t i = 0; i < split.axes.size(); ++i)
    text += (i ? "," : "") + mesh.axes()[split.axes[i]].name;
  return text;
}

std::string sd::renderSharding(const MeshSpec &mesh,
                               const std::vector<int64_t> &shape,
                               const DimAxes &dimAxes) {
  std::ostringstream os;
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0)
    os << "scalar: one block\n";
  else if (rank == 1)
    os << "columns: " << describeDim(mesh, 0, shape[0], dimAxes[0]) << "\n";
  else
    os << "rows: " << describeDim(mesh, 0, shape[0], dimAxes[0]) << "\n"
       << "columns: " << describeDim(mesh, 1, shape[1], dimAxes[1]) << "\n";
  if (rank > 2) {
    std::vector<std::string> split;
    for (int64_t dim = 2; dim < rank; ++dim)
      if (splitOf(mesh, dimAxes[dim]).blocks > 1)
        split.push_back(describeDim(mesh, dim, shape[dim], dimAxes[dim]));
    os << "not drawn: dimension"
       << (rank == 3 ? " 2" : "s 2-" + std::to_string(rank - 1));
    if (split.empty()) {
      os << " (whole)\n";
    } else {
      os << "; the devices of one cell hold different blocks of them:\n";
      for (const std::string &line : split)
        os << "  " << line << "\n";
    }
  }

  auto owners = computeBlockOwners(mesh, dimAxes);
  size_t width = 1;
  std::vector<std::vector<std::string>> labels;
  for (const auto &row : owners) {
    labels.emplace_back();
    for (const std::vector<int64_t> &ids : row) {
      labels.back().push_back(formatDeviceList(ids));
      width = std::max(width, labels.back().back().size());
    }
  }
  width += 2;
  std::string border = "+";
  for (size_t column = 0; column < labels.front().size(); ++column)
    border += std::string(width, '-') + "+";
  os << border << "\n";
  for (const auto &row : labels) {
    os << "|";
    for (const std::string &label : row) {
      size_t left = (width - label.size()) / 2;
      os << std::string(left, ' ') << label
         << std::string(width - left - label.size(), ' ') << "|";
    }
    os << "\n" << border << "\n";
  }
  return os.str();
}
