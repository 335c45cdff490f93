//===- CollectiveTestUtils.h - Descriptors for the collective tests -------===//
//
// What the shared-memory and MPI collective tests both build: a collective
// descriptor and the size of a group. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_RUNTIME_COLLECTIVETESTUTILS_H
#define SD_UNITTESTS_RUNTIME_COLLECTIVETESTUTILS_H

#include "sd/Runtime/ProgramABI.h"
#include "sd/Sharding/Mesh.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace sd::rt::testutil {

/// A collective descriptor named "test collective" (errors quote it); the
/// caller fills what its kind needs.
inline SdCollective makeCollective(SdCollectiveKind kind,
                                   const std::vector<int64_t> &in,
                                   const std::vector<int64_t> &out) {
  SdCollective op;
  std::memset(&op, 0, sizeof(op));
  op.kind = kind;
  op.rank = static_cast<int32_t>(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    op.in_shape[d] = in[d];
    op.out_shape[d] = out[d];
  }
  op.name = "test collective";
  return op;
}

/// The devices of a group over `axes` (mesh axis indices).
inline int64_t groupSize(const MeshSpec &mesh,
                         const std::vector<int32_t> &axes) {
  int64_t n = 1;
  for (int32_t axis : axes)
    n *= mesh.axes()[axis].size();
  return n;
}

} // namespace sd::rt::testutil

#endif // SD_UNITTESTS_RUNTIME_COLLECTIVETESTUTILS_H
