//===- MpiMessages.cpp - The MPI transport's messages and groups ----------===//
//
// See MpiMessages.h.
//
//===----------------------------------------------------------------------===//

#include "MpiMessages.h"

#include "sd/Reference/Tensor.h"

using namespace sd;
using namespace sd::rt;
using ::sd::ref::rowMajorStrides;

bool detail::isContiguous(const Shape &shape, const Shape &box) {
  size_t d = 0;
  while (d < box.size() && box[d] == 1)
    ++d;
  for (++d; d < box.size(); ++d)
    if (box[d] != shape[d])
      return false;
  return true;
}

MPI_Datatype detail::mpiType(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return MPI_FLOAT;
  case ElementType::BF16:
    return MPI_UINT16_T;
  }
  return MPI_FLOAT;
}

int64_t detail::flatOffset(const Shape &shape, const Shape &offset) {
  Shape strides = rowMajorStrides(shape);
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat += offset[d] * strides[d];
  return flat;
}

uint32_t detail::dcnAxisMask(const MeshSpec &mesh) {
  uint32_t mask = 0;
  for (size_t i = 0; i < mesh.axes().size(); ++i)
    if (mesh.axes()[i].dcn > 1)
      mask |= 1u << i;
  return mask;
}

std::map<uint32_t, detail::GroupComm>
detail::splitGroupComms(const MeshSpec &mesh, MPI_Comm world, int rank) {
  uint32_t dcnMask = dcnAxisMask(mesh);
  std::vector<int64_t> coords =
      mesh.coordinates(int64_t(rank) * mesh.devicesPerProcess());
  int size = 0;
  MPI_Comm_size(world, &size);
  MPI_Group worldGroup;
  MPI_Comm_group(world, &worldGroup);
  std::vector<int> worldRanks(size);
  for (int r = 0; r < size; ++r)
    worldRanks[r] = r;
  std::map<uint32_t, GroupComm> comms;
  // Every subset of the DCN axes, in the same order on every rank.
  for (uint32_t sub = 0;; sub = (sub - dcnMask) & dcnMask) {
    int64_t color = 0;
    for (size_t i = 0; i < mesh.axes().size(); ++i) {
      const MeshAxis &axis = mesh.axes()[i];
      if (axis.dcn > 1 && !(sub & (1u << i)))
        color = color * axis.dcn + coords[i] / axis.ici;
    }
    GroupComm group;
    MPI_Comm_split(world, static_cast<int>(color), rank, &group.comm);
    MPI_Group commGroup;
    MPI_Comm_group(group.comm, &commGroup);
    group.rankOf.assign(size, MPI_UNDEFINED);
    MPI_Group_translate_ranks(worldGroup, size, worldRanks.data(), commGroup,
                              group.rankOf.data());
    MPI_Group_free(&commGroup);
    comms[sub] = std::move(group);
    if (sub == dcnMask)
      break;
  }
  MPI_Group_free(&worldGroup);
  return comms;
}
