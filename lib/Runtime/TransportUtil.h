//===- TransportUtil.h - Pieces shared by sd's transports -------*- C++ -*-===//
//
// What the shared-memory and the MPI transports have in common, so that both
// check an SdCollective the same way, count the same bytes and copy or add
// boxes with the same per-element operations (which keeps their results
// bitwise equal): the group index math over a mesh, the checked plan of a
// collective, box transfers, and a barrier that an abort releases.
//
// Private to lib/Runtime: neither programs nor sd's other libraries see it.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_TRANSPORTUTIL_H
#define SD_LIB_RUNTIME_TRANSPORTUTIL_H

#include "sd/Runtime/ElementType.h"
#include "sd/Runtime/ProgramABI.h"
#include "sd/Sharding/Mesh.h"

#include "absl/status/statusor.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sd::rt::detail {

/// Mesh-axis indices, major to minor as an op lists them.
using AxisList = std::vector<int32_t>;

/// A reusable barrier for a fixed number of threads that `wake` releases
/// when the transport is aborted.
class Barrier {
public:
  explicit Barrier(int64_t parties) : parties(parties) {}

  /// Waits until all parties have arrived. An abortable wait returns false,
  /// without completing the barrier, once `aborted` is set; the others
  /// always complete.
  bool wait(const std::atomic<bool> &aborted, bool abortable) {
    std::unique_lock<std::mutex> lock(mutex);
    if (abortable && aborted.load())
      return false;
    uint64_t generation = currentGeneration;
    if (++arrived == parties) {
      arrived = 0;
      ++currentGeneration;
      condition.notify_all();
      return true;
    }
    condition.wait(lock, [&] {
      return currentGeneration != generation || (abortable && aborted.load());
    });
    return currentGeneration != generation;
  }

  /// Wakes the waiters so they see the abort flag.
  void wake() {
    std::lock_guard<std::mutex> lock(mutex);
    condition.notify_all();
  }

  /// Forgets the arrivals of an aborted round (no thread is waiting).
  void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    arrived = 0;
  }

private:
  std::mutex mutex;
  std::condition_variable condition;
  const int64_t parties;
  int64_t arrived = 0;
  uint64_t currentGeneration = 0;
};

/// Copies (or, with `add`, adds) the box of shape `box` at `srcOffset` of
/// `src` (shape `srcShape`) to `dstOffset` of `dst` (shape `dstShape`).
/// Rows of the innermost dimension are contiguous; they are split statically
/// over the device's OpenMP team, and each element gets exactly one
/// operation, so the result does not depend on the team size.
void transferBox(const float *src, const std::vector<int64_t> &srcShape,
                 const std::vector<int64_t> &srcOffset, float *dst,
                 const std::vector<int64_t> &dstShape,
                 const std::vector<int64_t> &dstOffset,
                 const std::vector<int64_t> &box, bool add);

/// dst's box = the sum of the same box of every source, added left to right
/// (((s0 + s1) + s2) + ..., as transferBox copying s0 and adding the others
/// one by one would give, bit for bit) in one pass over dst. The sources
/// share `srcShape` and `srcOffset`; one source is a copy.
void sumBoxes(const std::vector<const float *> &srcs,
              const std::vector<int64_t> &srcShape,
              const std::vector<int64_t> &srcOffset, float *dst,
              const std::vector<int64_t> &dstShape,
              const std::vector<int64_t> &dstOffset,
              const std::vector<int64_t> &box);

/// Whether the transports move and add elements of `type` (makePlan refuses
/// the others).
bool transportsMove(ElementType type);

/// A buffer of a planned collective as the f32 array it is: the transports
/// move and add f32 elements, and makePlan refuses every other element type
/// before a buffer is read or written.
inline const float *f32Buffer(const void *buffer) {
  return static_cast<const float *>(buffer);
}
inline float *f32Buffer(void *buffer) { return static_cast<float *>(buffer); }

/// An op's shape, element type and axis structure, checked against the
/// mesh.
struct CollectivePlan {
  ElementType elementType = ElementType::F32;
  std::vector<int64_t> inShape, outShape;
  /// Per dimension (all_gather, all_slice, reduce_scatter) its axes.
  std::vector<AxisList> dimAxes;
  /// The other collectives' axes, as listed.
  AxisList axes;
  /// The group's axes in mesh order, each once.
  AxisList group;
  /// all_to_all: how many consecutive group members exchange blocks.
  int64_t exchange = 1;
};

/// Group index math over one mesh: which devices form a collective's
/// groups, and in which member order.
class CollectiveGroups {
public:
  explicit CollectiveGroups(const MeshSpec &mesh);

  const MeshSpec &mesh() const { return meshSpec; }
  int64_t groupSize(const AxisList &axes) const {
    int64_t size = 1;
    for (int32_t axis : axes)
      size *= sizes[axis];
    return size;
  }
  /// The row-major index of `coords` on `axes`.
  int64_t groupIndex(const std::vector<int64_t> &coords,
                     const AxisList &axes) const {
    int64_t index = 0;
    for (int32_t axis : axes)
      index = index * sizes[axis] + coords[axis];
    return index;
  }
  /// Sets `coords` on `axes` to the decomposition of `index`.
  void setGroupIndex(std::vector<int64_t> &coords, const AxisList &axes,
                     int64_t index) const {
    for (size_t i = axes.size(); i-- > 0;) {
      coords[axes[i]] = index % sizes[axes[i]];
      index /= sizes[axes[i]];
    }
  }
  /// The device of the member `index` on `axes` of the group of the device
  /// at `coords`.
  int64_t memberDevice(const std::vector<int64_t> &coords, const AxisList &axes,
                       int64_t index) const {
    std::vector<int64_t> member = coords;
    setGroupIndex(member, axes, index);
    return meshSpec.deviceId(member);
  }

  /// InvalidArgument naming the op when it does not fit the mesh or its
  /// shapes do not follow from each other.
  absl::StatusOr<CollectivePlan> makePlan(const SdCollective &op) const;
  /// The bytes the cost model says one device sends for `op`.
  int64_t commBytes(const SdCollective &op, const CollectivePlan &plan) const;

private:
  MeshSpec meshSpec;
  std::vector<int64_t> sizes;
};

} // namespace sd::rt::detail

#endif // SD_LIB_RUNTIME_TRANSPORTUTIL_H
