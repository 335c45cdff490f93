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
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sd::rt::detail {

/// Mesh-axis indices, major to minor as an op lists them.
using AxisList = std::vector<int32_t>;

/// A reusable barrier for a fixed number of threads that `wake` releases
/// when the transport is aborted.
///
/// With `spin`, a waiter first polls for up to kSpinTime before it sleeps:
/// waking a sleeping thread costs tens of microseconds on a virtual
/// machine, which a training step's hundreds of small collectives (one
/// gradient all-reduce per parameter) would pay each time. Only for
/// barriers whose threads each have a core; others sleep at once. Between
/// polls the waiter yields, so that a thread of another process (a test
/// run beside this one) that wants the core gets it.
class Barrier {
public:
  /// How long a spinning waiter polls before it sleeps.
  static constexpr std::chrono::microseconds kSpinTime{500};

  explicit Barrier(int64_t parties, bool spin = false)
      : parties(parties), spin(spin) {}

  /// Waits until all parties have arrived. An abortable wait returns false,
  /// without completing the barrier, once `aborted` is set; the others
  /// always complete.
  bool wait(const std::atomic<bool> &aborted, bool abortable) {
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (abortable && aborted.load())
        return false;
      generation = currentGeneration.load();
      if (++arrived == parties) {
        arrived = 0;
        currentGeneration.store(generation + 1);
        condition.notify_all();
        return true;
      }
    }
    // The last arrival's store happens after every other arrival (they
    // all took the mutex first), so seeing it orders this thread after
    // all of their writes.
    if (spin) {
      auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      do {
        if (currentGeneration.load(std::memory_order_acquire) != generation)
          return true;
        std::this_thread::yield();
        if (abortable && aborted.load())
          break;
      } while (std::chrono::steady_clock::now() < deadline);
    }
    std::unique_lock<std::mutex> lock(mutex);
    condition.wait(lock, [&] {
      return currentGeneration.load() != generation ||
             (abortable && aborted.load());
    });
    return currentGeneration.load() != generation;
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
  const bool spin;
  int64_t arrived = 0;
  std::atomic<uint64_t> currentGeneration{0};
};

/// Copies (or, with `add`, adds) the box of shape `box` at `srcOffset` of
/// `src` (shape `srcShape`, elements of `srcType`) to `dstOffset` of `dst`
/// (shape `dstShape`, elements of `dstType`). Rows of the innermost
/// dimension are contiguous; they are split statically over the device's
/// OpenMP team, and each element gets exactly one operation, so the result
/// does not depend on the team size. Supported:
/// - a copy between buffers of one type: the elements' bytes;
/// - f32 added to f32;
/// - bf16 copied or added to f32 (widened exactly, then added in f32);
/// - f32 copied to bf16 (rounded to nearest, ties to even).
/// Adding to a bf16 buffer is not: a sum of bf16 elements is accumulated in
/// f32 and rounded once.
void transferBox(ElementType srcType, const void *src,
                 const std::vector<int64_t> &srcShape,
                 const std::vector<int64_t> &srcOffset, ElementType dstType,
                 void *dst, const std::vector<int64_t> &dstShape,
                 const std::vector<int64_t> &dstOffset,
                 const std::vector<int64_t> &box, bool add);

/// transferBox copying between two buffers of `type`.
inline void copyBox(ElementType type, const void *src,
                    const std::vector<int64_t> &srcShape,
                    const std::vector<int64_t> &srcOffset, void *dst,
                    const std::vector<int64_t> &dstShape,
                    const std::vector<int64_t> &dstOffset,
                    const std::vector<int64_t> &box) {
  transferBox(type, src, srcShape, srcOffset, type, dst, dstShape, dstOffset,
              box, /*add=*/false);
}

/// dst's box = the sum of the same box of every source (all of `type`),
/// added left to right in f32 (((s0 + s1) + s2) + ..., as transferBox
/// copying s0 to an f32 buffer and adding the others one by one would give,
/// bit for bit) in one pass over dst. A bf16 sum is rounded once, when it
/// is stored. The sources share `srcShape` and `srcOffset`; one source is a
/// copy.
void sumBoxes(ElementType type, const std::vector<const void *> &srcs,
              const std::vector<int64_t> &srcShape,
              const std::vector<int64_t> &srcOffset, void *dst,
              const std::vector<int64_t> &dstShape,
              const std::vector<int64_t> &dstOffset,
              const std::vector<int64_t> &box);

/// The chunk of an all_reduce's flattened tensor of `elements` that member
/// `index` of `members` sums for its whole group, [begin, end):
/// [index·E/N, (index + 1)·E/N). Both transports split the sum this way.
struct FlatChunk {
  int64_t begin, end;
};
inline FlatChunk allReduceChunk(int64_t elements, int64_t members,
                                int64_t index) {
  return {index * elements / members, (index + 1) * elements / members};
}

/// Whether the transports move and add elements of `type` (makePlan refuses
/// the others).
bool transportsMove(ElementType type);

/// An op's shape, element type and axis structure, checked against the
/// mesh.
struct CollectivePlan {
  /// Of the operand and the result: what the transports move and add.
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
