//===- SharedMemoryTransport.cpp - Collectives between threads ------------===//
//
// Devices are threads of one process, so a collective needs no messages:
// each member publishes its operand's and its result's addresses in slot
// tables, waits on a barrier of its group, reads its peers' operands
// directly into its own result, and waits on the group's barrier again so
// that nobody returns (and frees its operand) while a peer still reads it.
// An all_reduce splits the work instead: each member sums its 1/n of the
// elements and writes that block into every member's result, so a member
// reads and writes two tensors' worth (2n in all) where summing the whole
// tensor each would read n + 1 (n² + n in all). Groups have their own
// barriers, so the independent groups of one collective do not wait for each
// other. The semantics are those of lib/Evaluator/CollectiveOps.cpp. Copies
// move elements' bytes; sums add in ascending member order in f32, and a
// bf16 sum is rounded once, when it is stored.
//
// An abort releases the devices waiting to enter a collective. Once a
// group's first barrier has completed every member is inside the copy, which
// waits for no one, so the second barrier ignores aborts: that keeps peers'
// operands alive until the last reader is done.
//
// An asynchronous collective_permute needs no barrier: its start posts the
// operand under the device's sequence number (the k-th start of every device
// is the same op of the program), and its done waits for the source
// member's post of that number, copies it, marks it taken, and then waits
// until its own post was taken, so that the operand outlives its reader. A
// device whose peer is slower thus waits only at the done, after the work
// the program placed between the two.
//
//===----------------------------------------------------------------------===//

#include "TransportUtil.h"

#include "sd/Reference/Tensor.h"
#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <thread>
#include <cstring>
#include <map>

using namespace sd;
using namespace sd::rt;

namespace {

using detail::AxisList;
using detail::Barrier;
using detail::copyBox;
using detail::sumBoxes;

/// The in-process transport.
class SharedMemoryTransport final : public Transport {
public:
  explicit SharedMemoryTransport(const MeshSpec &mesh)
      : meshSpec(mesh), groups(mesh), inputs(mesh.numDevices(), nullptr),
        outputs(mesh.numDevices(), nullptr), barrierCache(mesh.numDevices()),
        posted(mesh.numDevices()), nextSequence(mesh.numDevices(), 0),
        sequenceOf(mesh.numDevices()),
        spinBarriers(
            mesh.numDevices() <=
            static_cast<int64_t>(std::thread::hardware_concurrency())) {}

  const MeshSpec &mesh() const override { return meshSpec; }
  absl::Status collective(Device &device, const SdCollective &op,
                          const void *in, void *out) override;
  absl::Status startCollective(Device &device, const SdCollective &op,
                               const void *in, void *out) override;
  absl::Status finishCollective(Device &device, const SdCollective &op,
                                void *out) override;
  void abort(const absl::Status &status) override;
  void reset() override;

private:
  using Plan = detail::CollectivePlan;
  absl::StatusOr<Plan> makePlan(const SdCollective &op) const {
    return groups.makePlan(op);
  }
  /// InvalidArgument unless `device` is one of the mesh.
  absl::Status checkDevice(const Device &device) const;

  int64_t groupSize(const AxisList &axes) const {
    return groups.groupSize(axes);
  }
  int64_t groupIndex(const std::vector<int64_t> &coords,
                     const AxisList &axes) const {
    return groups.groupIndex(coords, axes);
  }
  void setGroupIndex(std::vector<int64_t> &coords, const AxisList &axes,
                     int64_t index) const {
    groups.setGroupIndex(coords, axes, index);
  }
  /// The operand the device at `coords` published.
  const void *inputOf(const std::vector<int64_t> &coords) const {
    return inputs[meshSpec.deviceId(coords)];
  }
  /// The barrier of `device`'s group over `group`.
  Barrier &barrierFor(const Device &device, const AxisList &group);
  /// The bytes the cost model says one device sends for `op`.
  int64_t commBytes(const SdCollective &op, const Plan &plan) const {
    return groups.commBytes(op, plan);
  }

  void gather(const Plan &plan, const std::vector<int64_t> &coords,
              void *out) const;
  void slice(const Plan &plan, const std::vector<int64_t> &coords,
             const void *in, void *out) const;
  void reduce(const Plan &plan, const std::vector<int64_t> &coords,
              const std::vector<AxisList> &blockAxes, void *out) const;
  void allReduce(const Plan &plan, const std::vector<int64_t> &coords) const;
  void allToAll(const SdCollective &op, const Plan &plan,
                const std::vector<int64_t> &coords, void *out) const;
  void permute(const SdCollective &op, const Plan &plan,
               const std::vector<int64_t> &coords, const void *in,
               void *out) const;

  MeshSpec meshSpec;
  detail::CollectiveGroups groups;
  /// Each device's operand and result of the collective it is in; written
  /// by its own thread before the group's first barrier, read (and an
  /// all_reduce's results written) by peers between the two.
  std::vector<const void *> inputs;
  std::vector<void *> outputs;

  std::atomic<bool> aborted{false};
  /// Guards `abortStatus` and `barriers`.
  std::mutex stateMutex;
  absl::Status abortStatus;
  /// Keyed by the group's axes (mesh order) and its member with coordinate 0
  /// on them; never erased, so pointers stay valid.
  std::map<std::pair<AxisList, int64_t>, std::unique_ptr<Barrier>> barriers;
  /// Per device, the barriers it has used, so the common case takes no lock;
  /// each map is touched by its own device's thread only.
  std::vector<std::map<AxisList, Barrier *>> barrierCache;

  /// An asynchronous permute's operand, as its device posted it.
  struct Posted {
    const void *in;
    /// Set while the member it is sent to copies it, then `taken`.
    bool copying = false;
    bool taken = false;
  };
  /// The status of an abort, or OK; `asyncMutex` is held.
  absl::Status abortedStatus();
  /// Guards `posted`; `asyncCondition` signals every change of it.
  std::mutex asyncMutex;
  std::condition_variable asyncCondition;
  /// Per device, its started permutes not yet finished, by sequence number.
  std::vector<std::map<uint64_t, Posted>> posted;
  /// Per device (touched by its own thread only): the next sequence number,
  /// and the number of each started permute by its `out` buffer.
  std::vector<uint64_t> nextSequence;
  std::vector<std::map<const void *, uint64_t>> sequenceOf;
  /// Whether the barriers spin before they sleep: when every device of the
  /// process can have a core of its own.
  const bool spinBarriers;
};

} // namespace

Barrier &SharedMemoryTransport::barrierFor(const Device &device,
                                           const AxisList &group) {
  std::map<AxisList, Barrier *> &cache = barrierCache[device.id()];
  if (auto it = cache.find(group); it != cache.end())
    return *it->second;
  std::vector<int64_t> coords = device.coordinates();
  setGroupIndex(coords, group, 0);
  std::lock_guard<std::mutex> lock(stateMutex);
  std::unique_ptr<Barrier> &barrier =
      barriers[{group, meshSpec.deviceId(coords)}];
  if (!barrier)
    barrier = std::make_unique<Barrier>(groupSize(group), spinBarriers);
  cache.emplace(group, barrier.get());
  return *barrier;
}

void SharedMemoryTransport::gather(const Plan &plan,
                                   const std::vector<int64_t> &coords,
                                   void *out) const {
  size_t rank = plan.inShape.size();
  std::vector<int64_t> counts(rank), block(rank, 0), offset(rank);
  int64_t members = 1;
  for (size_t d = 0; d < rank; ++d) {
    counts[d] = groupSize(plan.dimAxes[d]);
    members *= counts[d];
  }
  std::vector<int64_t> zero(rank, 0), member = coords;
  // Block b[d] of dimension d comes from the member whose coordinates on
  // d's axes have row-major index b[d].
  for (int64_t n = 0; n < members; ++n) {
    for (size_t d = 0; d < rank; ++d) {
      setGroupIndex(member, plan.dimAxes[d], block[d]);
      offset[d] = block[d] * plan.inShape[d];
    }
    copyBox(plan.elementType, inputOf(member), plan.inShape, zero, out,
            plan.outShape, offset, plan.inShape);
    for (size_t d = rank; d-- > 0;) {
      if (++block[d] < counts[d])
        break;
      block[d] = 0;
    }
  }
}

void SharedMemoryTransport::slice(const Plan &plan,
                                  const std::vector<int64_t> &coords,
                                  const void *in, void *out) const {
  size_t rank = plan.inShape.size();
  std::vector<int64_t> offset(rank);
  for (size_t d = 0; d < rank; ++d)
    offset[d] = groupIndex(coords, plan.dimAxes[d]) * plan.outShape[d];
  copyBox(plan.elementType, in, plan.inShape, offset, out, plan.outShape,
          std::vector<int64_t>(rank, 0), plan.outShape);
}

void SharedMemoryTransport::reduce(const Plan &plan,
                                   const std::vector<int64_t> &coords,
                                   const std::vector<AxisList> &blockAxes,
                                   void *out) const {
  // This device's block of the sum (all of it for all_reduce).
  size_t rank = plan.inShape.size();
  std::vector<int64_t> offset(rank, 0), zero(rank, 0);
  for (size_t d = 0; d < blockAxes.size(); ++d)
    offset[d] = groupIndex(coords, blockAxes[d]) * plan.outShape[d];
  // Members in ascending mesh coordinates (plan.group is in mesh order),
  // added left to right in one pass: the same order on every member (in
  // f32, a bf16 sum rounded once).
  std::vector<int64_t> member = coords;
  std::vector<const void *> inputs;
  for (int64_t n = 0, e = groupSize(plan.group); n < e; ++n) {
    setGroupIndex(member, plan.group, n);
    inputs.push_back(inputOf(member));
  }
  sumBoxes(plan.elementType, inputs, plan.inShape, offset, out, plan.outShape,
           zero, plan.outShape);
}

void SharedMemoryTransport::allReduce(
    const Plan &plan, const std::vector<int64_t> &coords) const {
  // The tensor as one row of elements; this member's chunk of it.
  int64_t elements = ::sd::ref::shapeProduct(plan.inShape);
  int64_t members = groupSize(plan.group);
  detail::FlatChunk chunk = detail::allReduceChunk(
      elements, members, groupIndex(coords, plan.group));
  std::vector<const void *> sources;
  std::vector<void *> results;
  void *own = outputs[meshSpec.deviceId(coords)];
  for (int64_t n = 0; n < members; ++n) {
    int64_t id = groups.memberDevice(coords, plan.group, n);
    sources.push_back(inputs[id]);
    if (outputs[id] != own)
      results.push_back(outputs[id]);
  }
  // Piece by piece: the sum (members in ascending mesh coordinates, added
  // left to right: the same order for every element as one member summing
  // all of it) into this member's result, then copied while it is in cache.
  constexpr int64_t kPiece = 16384;
  std::vector<int64_t> shape = {elements};
  for (int64_t at = chunk.begin; at < chunk.end; at += kPiece) {
    std::vector<int64_t> offset = {at},
                         box = {std::min(kPiece, chunk.end - at)};
    sumBoxes(plan.elementType, sources, shape, offset, own, shape, offset, box);
    for (void *result : results)
      copyBox(plan.elementType, own, shape, offset, result, shape, offset, box);
  }
}

void SharedMemoryTransport::allToAll(const SdCollective &op, const Plan &plan,
                                     const std::vector<int64_t> &coords,
                                     void *out) const {
  size_t rank = plan.inShape.size();
  // Members exchange within subgroups of n consecutive group members.
  int64_t n = plan.exchange;
  int64_t index = groupIndex(coords, plan.axes);
  int64_t self = index % n, first = index - self;
  // The piece each member sends: its operand with tgt_dim split n ways.
  std::vector<int64_t> piece = plan.inShape;
  piece[op.tgt_dim] /= n;
  std::vector<int64_t> from(rank, 0), to(rank, 0), member = coords;
  from[op.tgt_dim] = self * piece[op.tgt_dim];
  // Block j of src_dim comes from subgroup member j: its block `self` of
  // tgt_dim.
  for (int64_t j = 0; j < n; ++j) {
    setGroupIndex(member, plan.axes, first + j);
    to[op.src_dim] = j * piece[op.src_dim];
    copyBox(plan.elementType, inputOf(member), plan.inShape, from, out,
            plan.outShape, to, piece);
  }
}

void SharedMemoryTransport::permute(const SdCollective &op, const Plan &plan,
                                    const std::vector<int64_t> &coords,
                                    const void *in, void *out) const {
  int64_t self = groupIndex(coords, plan.axes);
  const void *source = in;
  for (int32_t i = 0; i < op.num_pairs; ++i) {
    if (op.pairs[2 * i + 1] != self)
      continue;
    std::vector<int64_t> member = coords;
    setGroupIndex(member, plan.axes, op.pairs[2 * i]);
    source = inputOf(member);
  }
  if (source != out)
    copyBox(plan.elementType, source, plan.inShape,
            std::vector<int64_t>(plan.inShape.size()), out, plan.outShape,
            std::vector<int64_t>(plan.inShape.size()), plan.inShape);
}

absl::Status SharedMemoryTransport::collective(Device &device,
                                               const SdCollective &op,
                                               const void *in, void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  absl::StatusOr<Plan> planned = makePlan(op);
  if (!planned.ok())
    return planned.status();
  const Plan &plan = *planned;
  if (aborted.load()) {
    std::lock_guard<std::mutex> lock(stateMutex);
    return abortStatus;
  }
  const std::vector<int64_t> &coords = device.coordinates();
  // all_slice reads nothing but its own operand; neither does a collective
  // over a group of one, which every kind then turns into its local part.
  bool communicates = op.kind != SD_ALL_SLICE && groupSize(plan.group) > 1;
  Barrier *barrier = nullptr;
  // Even without communication: the local parts read the slot of self.
  inputs[device.id()] = in;
  outputs[device.id()] = out;
  if (communicates) {
    barrier = &barrierFor(device, plan.group);
    if (!barrier->wait(aborted, /*abortable=*/true)) {
      std::lock_guard<std::mutex> lock(stateMutex);
      return abortStatus;
    }
  }
  switch (op.kind) {
  case SD_ALL_GATHER:
    gather(plan, coords, out);
    break;
  case SD_ALL_SLICE:
    slice(plan, coords, in, out);
    break;
  case SD_REDUCE_SCATTER:
    reduce(plan, coords, plan.dimAxes, out);
    break;
  case SD_ALL_REDUCE:
    if (communicates)
      allReduce(plan, coords);
    else
      reduce(plan, coords, {}, out);
    break;
  case SD_ALL_TO_ALL:
    allToAll(op, plan, coords, out);
    break;
  case SD_COLLECTIVE_PERMUTE:
    permute(op, plan, coords, in, out);
    break;
  default:
    break;
  }
  if (barrier)
    barrier->wait(aborted, /*abortable=*/false);
  DeviceCounters &counters = device.counters();
  counters.commBytes += commBytes(op, plan);
  ++counters.collectives;
  return absl::OkStatus();
}

absl::Status SharedMemoryTransport::checkDevice(const Device &device) const {
  if (device.id() < 0 || device.id() >= meshSpec.numDevices())
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d is not a device of mesh %s", device.id(),
                        meshSpec.toString()));
  return absl::OkStatus();
}

absl::Status SharedMemoryTransport::startCollective(Device &device,
                                                    const SdCollective &op,
                                                    const void *in, void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  if (op.kind != SD_COLLECTIVE_PERMUTE)
    return Transport::startCollective(device, op, in, out);
  absl::StatusOr<Plan> plan = makePlan(op);
  if (!plan.ok())
    return plan.status();
  int64_t id = device.id();
  uint64_t sequence = nextSequence[id]++;
  sequenceOf[id][out] = sequence;
  {
    std::lock_guard<std::mutex> lock(asyncMutex);
    if (aborted.load())
      return abortedStatus();
    posted[id][sequence] = Posted{in};
  }
  asyncCondition.notify_all();
  DeviceCounters &counters = device.counters();
  counters.commBytes += commBytes(op, *plan);
  ++counters.collectives;
  return absl::OkStatus();
}

absl::Status SharedMemoryTransport::finishCollective(Device &device,
                                                     const SdCollective &op,
                                                     void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  if (op.kind != SD_COLLECTIVE_PERMUTE)
    return Transport::finishCollective(device, op, out);
  absl::StatusOr<Plan> plan = makePlan(op);
  if (!plan.ok())
    return plan.status();
  int64_t id = device.id();
  auto found = sequenceOf[id].find(out);
  if (found == sequenceOf[id].end())
    return absl::InternalError(absl::StrFormat(
        "device %d: '%s' finishes a permute that was not started", id,
        op.name ? op.name : "<unnamed collective>"));
  uint64_t sequence = found->second;
  sequenceOf[id].erase(found);
  // Who sends to this device, and whether it sends to another.
  const std::vector<int64_t> &coords = device.coordinates();
  int64_t self = groupIndex(coords, plan->axes), source = self;
  bool sends = false;
  for (int32_t i = 0; i < op.num_pairs; ++i) {
    if (op.pairs[2 * i + 1] == self)
      source = op.pairs[2 * i];
    if (op.pairs[2 * i] == self && op.pairs[2 * i + 1] != self)
      sends = true;
  }
  std::vector<int64_t> member = coords;
  setGroupIndex(member, plan->axes, source);
  int64_t sourceId = meshSpec.deviceId(member);

  std::unique_lock<std::mutex> lock(asyncMutex);
  asyncCondition.wait(
      lock, [&] { return aborted.load() || posted[sourceId].count(sequence); });
  auto entry = posted[sourceId].find(sequence);
  if (entry == posted[sourceId].end())
    return abortedStatus();
  const void *data = entry->second.in;
  // A member nobody sends to keeps its own operand. Reading it is no take:
  // only the member it is sent to may mark it taken, or that member would
  // wait for a post its owner has already erased.
  bool keepsOwn = sourceId == id;
  if (!keepsOwn)
    entry->second.copying = true;
  lock.unlock();
  if (data != out)
    copyBox(plan->elementType, data, plan->inShape,
            std::vector<int64_t>(plan->inShape.size()), out, plan->outShape,
            std::vector<int64_t>(plan->inShape.size()), plan->inShape);
  lock.lock();
  // The source's map may have changed, but not this entry: its owner erases
  // it only once it is taken.
  if (!keepsOwn) {
    entry->second.copying = false;
    entry->second.taken = true;
    asyncCondition.notify_all();
  }
  // The operand must outlive its reader; after an abort a reader that is not
  // copying never will.
  if (sends) {
    asyncCondition.wait(lock, [&] {
      const Posted &own = posted[id][sequence];
      return own.taken || (aborted.load() && !own.copying);
    });
    if (!posted[id][sequence].taken) {
      posted[id].erase(sequence);
      return abortedStatus();
    }
  }
  posted[id].erase(sequence);
  return absl::OkStatus();
}

absl::Status SharedMemoryTransport::abortedStatus() {
  std::lock_guard<std::mutex> lock(stateMutex);
  return abortStatus.ok() ? absl::AbortedError("the mesh was aborted")
                          : abortStatus;
}

void SharedMemoryTransport::abort(const absl::Status &status) {
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    if (!aborted.load())
      abortStatus =
          status.ok() ? absl::AbortedError("the mesh was aborted") : status;
    aborted.store(true);
    for (auto &[key, barrier] : barriers)
      barrier->wake();
  }
  std::lock_guard<std::mutex> lock(asyncMutex);
  asyncCondition.notify_all();
}

void SharedMemoryTransport::reset() {
  {
    std::lock_guard<std::mutex> lock(stateMutex);
    for (auto &[key, barrier] : barriers)
      barrier->reset();
    abortStatus = absl::OkStatus();
    aborted.store(false);
  }
  std::lock_guard<std::mutex> lock(asyncMutex);
  for (auto &device : posted)
    device.clear();
  std::fill(nextSequence.begin(), nextSequence.end(), 0);
  for (auto &device : sequenceOf)
    device.clear();
}

std::unique_ptr<Transport>
sd::rt::createSharedMemoryTransport(const MeshSpec &mesh) {
  return std::make_unique<SharedMemoryTransport>(mesh);
}
