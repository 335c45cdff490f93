//===- MpiTransport.cpp - Collectives between processes over MPI ----------===//
//
// Each MPI rank runs the devices of one mesh process as threads. A
// collective is a set of pieces: boxes that one group member contributes to
// another (a block for all_gather, a chunk of the operand for reductions, a
// tgt_dim block for all_to_all, the whole operand for a permute). A piece
// between two devices of this process is copied through shared memory, as
// the shared-memory transport does: members publish their buffers, meet at a
// barrier of the group's local members, copy, and meet again so that nobody
// frees a buffer a peer still reads. A piece from or to another process is
// one MPI_Isend/MPI_Irecv pair (packed into a staging buffer when the box is
// not contiguous), posted after the first barrier and waited for by polling.
//
// Bitwise equality with the shared-memory transport: a reduction over N
// members splits the result into N chunks (reduce_scatter: each member's
// block; all_reduce: N contiguous ranges of the flattened tensor). The owner
// of a chunk receives that chunk of every member's operand and folds them in
// ascending member order (copy the first, add the others), exactly the
// additions the shared-memory transport performs on every element; all_reduce
// then gathers the folded chunks. Each device sends about 2(N-1)/N of the
// tensor, like a ring, but every sum has one fixed order. MPI_Allreduce is
// not used: its order is the library's. Counters get the cost model's
// bytes, as from the shared-memory transport, so that sdrun's measured
// communication still equals sdopt's prediction.
//
// bf16 elements travel as their bits (MPI_UINT16_T; counts stay in
// elements), and copies move bytes. A bf16 fold goes into an f32
// accumulator of the chunk, in the same member order, which is rounded into
// the result once the last member is in: the shared-memory transport's f32
// sum, rounded once, bit for bit.
//
// Communicators: one per set of DCN axes, split from MPI_COMM_WORLD once
// when the transport is created (MPI_Comm_split by the process's DCN
// coordinates outside the set). A collective's messages go over the
// communicator of its group's DCN axes, so the collectives of different
// groups never share a message stream. Groups that differ only in ICI axes
// span the same processes and share it.
//
// Tags: every device runs the same program, so the k-th collective of one
// device is the k-th of its peers. A message's tag is (k, phase, sender's
// local index, receiver's local index), the sequence number modulo what fits
// under MPI_TAG_UB; a wrapped tag cannot be mismatched because one sender
// thread posts and one receiver thread receives each (sender, receiver)
// stream in program order, and MPI does not let messages of one stream
// overtake each other.
//
// Asynchronous collective_permute: the start posts every send and receive
// (to peers in this process too, through MPI's loopback to its own rank, so
// that the start needs no barrier; that loopback is one copy, measured as
// fast as the shared-memory transport's) and the finish waits for them.
//
// Failures: an abort (a local device failed) releases local barriers and
// every wait for a message; the waiting device then cancels its receives.
// A send cannot be withdrawn and reads the operand until it completes, so
// the device still waits for its sends, up to abortGraceSeconds, and calls
// MPI_Abort if they never complete. Remote peers are not told about the
// abort: a rank whose device waits for a message from a failed device of
// another rank waits until that rank exits (mpirun then ends the job), and a
// rank that dies ends the whole job the same way. Open MPI 4.1 has no ULFM,
// so surviving the loss of a rank is left to a later design. reset() only
// restarts this rank's sequence numbers: ranks resume in lockstep after a
// failed step only if the step failed on every rank alike, so a driver
// should treat a failed multi-process step as fatal to the job.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiTransport.h"

#include "MpiMessages.h"
#include "TransportUtil.h"

#include "sd/Reference/Tensor.h"

#include "absl/strings/str_format.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

using namespace sd;
using namespace sd::rt;

namespace {

using detail::AxisList;
using detail::Backoff;
using detail::Barrier;
using detail::CollectiveGroups;
using detail::CollectivePlan;
using detail::copyBox;
using detail::dcnAxisMask;
using detail::flatOffset;
using detail::GroupComm;
using detail::isContiguous;
using detail::Messages;
using detail::mpiType;
using detail::Piece;
using detail::Shape;
using detail::splitGroupComms;
using detail::Transfer;
using detail::transferBox;
using ::sd::ref::rowMajorStrides;
using ::sd::ref::shapeProduct;

/// The transport of one rank's devices (see the file comment).
class MpiTransport final : public Transport {
public:
  MpiTransport(const MeshSpec &mesh, MPI_Comm comm, int rank, int64_t slots,
               const MpiTransportOptions &options)
      : meshSpec(mesh), groups(mesh), comm(comm),
        groupComms(splitGroupComms(mesh, comm, rank)),
        dcnMask(dcnAxisMask(mesh)), rank(rank),
        perProcess(mesh.devicesPerProcess()),
        firstId(int64_t(rank) * mesh.devicesPerProcess()), slots(slots),
        options(options), inputs(perProcess, nullptr),
        outputs(perProcess, nullptr), states(perProcess) {}
  ~MpiTransport() override;

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
  /// A started asynchronous permute of one device.
  struct AsyncPermute {
    Messages messages;
    const void *in;
    /// No member sends to this device: it keeps its own operand.
    bool keepsOwn;
    int64_t bytes;
  };
  /// What one local device keeps between its collectives; touched by its
  /// own thread only (and by reset, while no device runs).
  struct LocalState {
    /// The device's collectives so far: the tag's sequence number.
    uint64_t sequence = 0;
    /// Packing, receive and accumulation buffers (bytes; std::allocator
    /// aligns them for any element type), kept so that large collectives do
    /// not fault in fresh pages every step.
    std::vector<std::vector<std::byte>> staging;
    /// The barrier of each group this device was in (null when no other
    /// member of the group lives in this process).
    std::map<AxisList, Barrier *> barriers;
    std::map<const void *, AsyncPermute> async;
  };

  bool isLocal(int64_t id) const {
    return id >= firstId && id < firstId + perProcess;
  }
  int peerRank(int64_t id) const {
    return static_cast<int>(meshSpec.processOf(id));
  }
  /// The communicator of `op`'s group (its axes' DCN part).
  const GroupComm &commFor(const SdCollective &op) const {
    return groupComms.at(collectiveAxisMask(op) & dcnMask);
  }
  /// The tag of phase `phase` of collective `sequence` from `from` to `to`.
  int tagOf(uint64_t sequence, int phase, int64_t from, int64_t to) const {
    int64_t slot = static_cast<int64_t>((sequence * 2 + phase) %
                                        static_cast<uint64_t>(slots));
    return static_cast<int>(
        (slot * perProcess + from % perProcess) * perProcess + to % perProcess);
  }
  absl::Status checkDevice(const Device &device) const;
  absl::Status abortedStatus();
  /// The barrier of the local members of `device`'s group over `group`.
  Barrier *barrierFor(const Device &device, const AxisList &group);

  /// The pieces `device` receives (in member order) and sends for `op`
  /// (any kind but all_slice); all_reduce's are its first phase.
  void planPieces(const SdCollective &op, const CollectivePlan &plan,
                  const Device &device, std::vector<Transfer> &incoming,
                  std::vector<Transfer> &outgoing) const;
  /// Permute: who sends to each member (itself when no pair names it).
  std::vector<int64_t> permuteSources(const SdCollective &op,
                                      int64_t members) const;

  /// The next of `device`'s staging buffers, of at least `bytes`; `staged`
  /// counts those in use.
  void *stagingBuffer(const Device &device, size_t &staged, int64_t bytes);
  /// Where exchange's remote pieces go: per incoming piece, its receive
  /// request (-1 when local or empty) and the staging buffer it lands in
  /// (null when it lands in `out` directly).
  struct PostedReceives {
    std::vector<int> requestOf;
    std::vector<const void *> stagedAt;
  };
  /// Posts exchange's remote receives and sends (its first phase).
  PostedReceives postMessages(const Device &device, const GroupComm &group,
                              uint64_t sequence, int phase,
                              const std::vector<Transfer> &incoming,
                              const std::vector<Transfer> &outgoing,
                              ElementType type, const void *src,
                              const Shape &srcShape, void *out,
                              const Shape &outShape, bool reduce,
                              size_t &staged, Messages &messages);
  /// Moves `incoming` into `out` and `outgoing` out of `src` (buffers of
  /// `type`): local pieces from the buffers peers published in `published`,
  /// remote ones by MPI. With `reduce`, pieces are folded into `out` in
  /// `incoming`'s order (bf16 ones in f32, rounded once the last is in).
  /// False when an abort interrupted a wait (pending requests stay in
  /// `messages` for `drain`). `staged` counts the device's staging buffers
  /// in use by this collective (a pending send may still read one).
  bool exchange(Device &device, const GroupComm &group, uint64_t sequence,
                int phase, const std::vector<Transfer> &incoming,
                const std::vector<Transfer> &outgoing, ElementType type,
                const void *src, const Shape &srcShape, void *out,
                const Shape &outShape, bool reduce,
                const std::vector<const void *> &published, size_t &staged,
                Messages &messages);
  /// Waits for `requests` by polling; false when `abortable` and the
  /// transport is aborted first, or when they take longer than the
  /// collective timeout, which aborts the transport with DeadlineExceeded
  /// naming `peer` (the rank waited for), else the rank in `peers` (one per
  /// request) of the first request still pending.
  bool wait(MPI_Request *requests, int count, bool abortable, int peer = -1,
            const int *peers = nullptr);
  /// After an abort: cancels the receives and waits for the sends, calling
  /// MPI_Abort when they do not complete in time.
  void drain(Messages &messages);

  MeshSpec meshSpec;
  CollectiveGroups groups;
  /// A duplicate of MPI_COMM_WORLD (MPI_Abort's).
  MPI_Comm comm;
  /// By the DCN axes a group spans.
  std::map<uint32_t, GroupComm> groupComms;
  uint32_t dcnMask;
  int rank;
  int64_t perProcess;
  int64_t firstId;
  /// Sequence slots under MPI_TAG_UB (two phases per collective).
  int64_t slots;
  MpiTransportOptions options;
  /// Each local device's operand and result of the collective it is in,
  /// written by its own thread before its group's first barrier.
  std::vector<const void *> inputs, outputs;
  std::vector<LocalState> states;

  std::atomic<bool> aborted{false};
  /// Guards `abortStatus` and `barriers`.
  std::mutex stateMutex;
  absl::Status abortStatus;
  /// Keyed by the group's axes and its first local member; never erased.
  std::map<std::pair<AxisList, int64_t>, std::unique_ptr<Barrier>> barriers;
};

} // namespace

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  for (auto &[mask, group] : groupComms)
    MPI_Comm_free(&group.comm);
  MPI_Comm_free(&comm);
}

absl::Status MpiTransport::checkDevice(const Device &device) const {
  if (!isLocal(device.id()))
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d is not a device of process %d of mesh %s",
                        device.id(), rank, meshSpec.toString()));
  return absl::OkStatus();
}

absl::Status MpiTransport::abortedStatus() {
  std::lock_guard<std::mutex> lock(stateMutex);
  return abortStatus.ok() ? absl::AbortedError("the mesh was aborted")
                          : abortStatus;
}

Barrier *MpiTransport::barrierFor(const Device &device, const AxisList &group) {
  std::map<AxisList, Barrier *> &cache = states[device.id() - firstId].barriers;
  if (auto it = cache.find(group); it != cache.end())
    return it->second;
  // The group's members in this process, named by the first of them.
  int64_t parties = 0, first = -1;
  for (int64_t n = 0, e = groups.groupSize(group); n < e; ++n) {
    int64_t id = groups.memberDevice(device.coordinates(), group, n);
    if (!isLocal(id))
      continue;
    ++parties;
    if (first < 0 || id < first)
      first = id;
  }
  Barrier *barrier = nullptr;
  if (parties > 1) {
    std::lock_guard<std::mutex> lock(stateMutex);
    std::unique_ptr<Barrier> &slot = barriers[{group, first}];
    if (!slot)
      slot = std::make_unique<Barrier>(parties);
    barrier = slot.get();
  }
  cache.emplace(group, barrier);
  return barrier;
}

std::vector<int64_t> MpiTransport::permuteSources(const SdCollective &op,
                                                  int64_t members) const {
  // The last pair naming a target wins, as in the shared-memory transport.
  std::vector<int64_t> source(members);
  for (int64_t m = 0; m < members; ++m)
    source[m] = m;
  for (int32_t i = 0; i < op.num_pairs; ++i)
    source[op.pairs[2 * i + 1]] = op.pairs[2 * i];
  return source;
}

void MpiTransport::planPieces(const SdCollective &op,
                              const CollectivePlan &plan, const Device &device,
                              std::vector<Transfer> &incoming,
                              std::vector<Transfer> &outgoing) const {
  const Shape &coords = device.coordinates();
  size_t rank = plan.inShape.size();
  Shape zero(rank, 0);
  int64_t self = device.id();
  // The block a member holds (gather) or keeps (reduce_scatter).
  auto blockOf = [&](const Shape &memberCoords, const Shape &blockShape) {
    Shape offset(rank);
    for (size_t d = 0; d < rank; ++d)
      offset[d] =
          groups.groupIndex(memberCoords, plan.dimAxes[d]) * blockShape[d];
    return offset;
  };
  switch (op.kind) {
  case SD_ALL_GATHER: {
    Shape own = blockOf(coords, plan.inShape);
    for (int64_t n = 0, e = groups.groupSize(plan.group); n < e; ++n) {
      int64_t id = groups.memberDevice(coords, plan.group, n);
      incoming.push_back({id,
                          {zero, plan.inShape,
                           blockOf(meshSpec.coordinates(id), plan.inShape)}});
      if (id != self)
        outgoing.push_back({id, {zero, plan.inShape, own}});
    }
    break;
  }
  case SD_REDUCE_SCATTER: {
    Shape own = blockOf(coords, plan.outShape);
    for (int64_t n = 0, e = groups.groupSize(plan.group); n < e; ++n) {
      int64_t id = groups.memberDevice(coords, plan.group, n);
      incoming.push_back({id, {own, plan.outShape, zero}});
      if (id != self)
        outgoing.push_back({id,
                            {blockOf(meshSpec.coordinates(id), plan.outShape),
                             plan.outShape, zero}});
    }
    break;
  }
  case SD_ALL_REDUCE: {
    // Member j owns the elements [j·E/N, (j+1)·E/N) of the flat tensor.
    int64_t elements = shapeProduct(plan.inShape);
    int64_t members = groups.groupSize(plan.group);
    auto chunk = [&](int64_t j) {
      detail::FlatChunk c = detail::allReduceChunk(elements, members, j);
      return Piece{{c.begin}, {c.end - c.begin}, {c.begin}};
    };
    int64_t own = groups.groupIndex(coords, plan.group);
    for (int64_t n = 0; n < members; ++n) {
      int64_t id = groups.memberDevice(coords, plan.group, n);
      incoming.push_back({id, chunk(own)});
      if (id != self)
        outgoing.push_back({id, chunk(n)});
    }
    break;
  }
  case SD_ALL_TO_ALL: {
    int64_t n = plan.exchange;
    int64_t index = groups.groupIndex(coords, plan.axes);
    int64_t own = index % n, first = index - own;
    Shape piece = plan.inShape;
    piece[op.tgt_dim] /= n;
    for (int64_t j = 0; j < n; ++j) {
      int64_t id = groups.memberDevice(coords, plan.axes, first + j);
      // Block j of src_dim is member j's block `own` of tgt_dim.
      Piece in{zero, piece, zero};
      in.srcOffset[op.tgt_dim] = own * piece[op.tgt_dim];
      in.dstOffset[op.src_dim] = j * piece[op.src_dim];
      incoming.push_back({id, in});
      if (id == self)
        continue;
      Piece sent{zero, piece, zero};
      sent.srcOffset[op.tgt_dim] = j * piece[op.tgt_dim];
      sent.dstOffset[op.src_dim] = own * piece[op.src_dim];
      outgoing.push_back({id, sent});
    }
    break;
  }
  case SD_COLLECTIVE_PERMUTE: {
    int64_t members = groups.groupSize(plan.axes);
    std::vector<int64_t> source = permuteSources(op, members);
    int64_t own = groups.groupIndex(coords, plan.axes);
    Piece whole{zero, plan.inShape, zero};
    incoming.push_back(
        {groups.memberDevice(coords, plan.axes, source[own]), whole});
    for (int64_t t = 0; t < members; ++t)
      if (source[t] == own && t != own)
        outgoing.push_back({groups.memberDevice(coords, plan.axes, t), whole});
    break;
  }
  default:
    break;
  }
}

bool MpiTransport::wait(MPI_Request *requests, int count, bool abortable,
                        int peer, const int *peers) {
  Backoff backoff;
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration<double>(options.collectiveTimeoutSeconds);
  while (true) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done)
      return true;
    if (abortable && aborted.load())
      return false;
    if (abortable && std::chrono::steady_clock::now() > deadline) {
      // The rank of the first request still pending, when they are known.
      for (int i = 0; peers && peer < 0 && i < count; ++i) {
        int complete = 0;
        MPI_Request_get_status(requests[i], &complete, MPI_STATUS_IGNORE);
        if (!complete)
          peer = peers[i];
      }
      std::string whom = peer >= 0 ? absl::StrFormat("rank %d", peer)
                                   : std::string("its peer ranks");
      abort(absl::DeadlineExceededError(absl::StrFormat(
          "MPI rank %d: a collective waited more than %.0f s for %s "
          "(--collective-timeout); that process is stopped, hung or gone",
          rank, options.collectiveTimeoutSeconds, whom)));
      return false;
    }
    backoff.pause();
  }
}

void MpiTransport::drain(Messages &messages) {
  for (MPI_Request &request : messages.recvs)
    if (request != MPI_REQUEST_NULL)
      MPI_Cancel(&request);
  std::vector<MPI_Request> all = messages.recvs;
  all.insert(all.end(), messages.sends.begin(), messages.sends.end());
  messages.recvs.clear();
  messages.sends.clear();
  // A timed-out peer will not take what is sent to it: no grace then.
  absl::Status cause = abortedStatus();
  double grace =
      absl::IsDeadlineExceeded(cause) ? 0.0 : options.abortGraceSeconds;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  Backoff backoff;
  while (true) {
    int done = 0;
    MPI_Testall(static_cast<int>(all.size()), all.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done)
      return;
    if (std::chrono::steady_clock::now() > deadline)
      break;
    backoff.pause();
  }
  // A pending send still reads an operand its device is about to release;
  // nothing but ending the job makes that safe. The cause first, since the
  // job ends before the device can report it.
  std::string message = absl::StrFormat(
      "sd: error: %s\nsd: MPI rank %d: messages of the aborted collective did "
      "not complete within %.0f s; aborting the MPI job\n",
      cause.message(), rank, grace);
  std::fputs(message.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(comm, 1);
}

void *MpiTransport::stagingBuffer(const Device &device, size_t &staged,
                                  int64_t bytes) {
  std::vector<std::vector<std::byte>> &staging =
      states[device.id() - firstId].staging;
  if (staged == staging.size())
    staging.emplace_back();
  std::vector<std::byte> &buffer = staging[staged++];
  if (static_cast<int64_t>(buffer.size()) < bytes)
    buffer.resize(bytes);
  return static_cast<void *>(buffer.data());
}

MpiTransport::PostedReceives MpiTransport::postMessages(
    const Device &device, const GroupComm &group, uint64_t sequence, int phase,
    const std::vector<Transfer> &incoming,
    const std::vector<Transfer> &outgoing, ElementType type, const void *src,
    const Shape &srcShape, void *out, const Shape &outShape, bool reduce,
    size_t &staged, Messages &messages) {
  int64_t self = device.id();
  int64_t elementSize = elementBytes(type);
  MPI_Datatype datatype = mpiType(type);
  // Remote receives: straight into `out` when the box is one range there
  // and nothing is added, otherwise into a staging buffer.
  PostedReceives posted{std::vector<int>(incoming.size(), -1),
                        std::vector<const void *>(incoming.size(), nullptr)};
  for (size_t i = 0; i < incoming.size(); ++i) {
    const Transfer &t = incoming[i];
    int64_t elements = shapeProduct(t.piece.box);
    if (isLocal(t.peer) || elements == 0)
      continue;
    void *buffer;
    if (!reduce && isContiguous(outShape, t.piece.box)) {
      buffer = static_cast<std::byte *>(out) +
               flatOffset(outShape, t.piece.dstOffset) * elementSize;
    } else {
      buffer = stagingBuffer(device, staged, elements * elementSize);
      posted.stagedAt[i] = buffer;
    }
    posted.requestOf[i] = static_cast<int>(messages.recvs.size());
    messages.recvs.emplace_back();
    messages.recvPeers.push_back(peerRank(t.peer));
    MPI_Irecv(buffer, static_cast<int>(elements), datatype,
              group.rankOf[peerRank(t.peer)],
              tagOf(sequence, phase, t.peer, self), group.comm,
              &messages.recvs.back());
  }
  // Remote sends: straight from `src` when the box is one range there.
  for (const Transfer &t : outgoing) {
    int64_t elements = shapeProduct(t.piece.box);
    if (isLocal(t.peer) || elements == 0)
      continue;
    const void *buffer;
    if (isContiguous(srcShape, t.piece.box)) {
      buffer = static_cast<const std::byte *>(src) +
               flatOffset(srcShape, t.piece.srcOffset) * elementSize;
    } else {
      void *packed = stagingBuffer(device, staged, elements * elementSize);
      copyBox(type, src, srcShape, t.piece.srcOffset, packed, t.piece.box,
              Shape(srcShape.size(), 0), t.piece.box);
      buffer = packed;
    }
    messages.sends.emplace_back();
    messages.sendPeers.push_back(peerRank(t.peer));
    MPI_Isend(buffer, static_cast<int>(elements), datatype,
              group.rankOf[peerRank(t.peer)],
              tagOf(sequence, phase, self, t.peer), group.comm,
              &messages.sends.back());
  }
  return posted;
}

bool MpiTransport::exchange(Device &device, const GroupComm &group,
                            uint64_t sequence, int phase,
                            const std::vector<Transfer> &incoming,
                            const std::vector<Transfer> &outgoing,
                            ElementType type, const void *src,
                            const Shape &srcShape, void *out,
                            const Shape &outShape, bool reduce,
                            const std::vector<const void *> &published,
                            size_t &staged, Messages &messages) {
  Shape zero(outShape.size(), 0);
  // The trace gets a span "MPI" from the first message posted to the last
  // received (nested in the collective's span).
  TraceRecorder &trace = device.trace();
  TraceClock::time_point mpiBegin = TraceClock::now();
  auto traceMpi = [&] {
    if (trace.enabled() && (!messages.recvs.empty() || !messages.sends.empty()))
      trace.span("MPI", "mpi", mpiBegin, TraceClock::now());
    return true;
  };
  PostedReceives posted =
      postMessages(device, group, sequence, phase, incoming, outgoing, type,
                   src, srcShape, out, outShape, reduce, staged, messages);
  const std::vector<int> &requestOf = posted.requestOf;
  const std::vector<const void *> &stagedAt = posted.stagedAt;

  // A bf16 reduction folds into an f32 accumulator of the pieces' common
  // box and rounds it into `out` once the last member is folded: the sum is
  // the shared-memory transport's, rounded once. One member's piece is a
  // copy.
  bool accumulate = reduce && type == ElementType::BF16 && incoming.size() > 1;
  void *accumulator = nullptr;
  if (accumulate) {
    assert(std::all_of(incoming.begin(), incoming.end(),
                       [&](const Transfer &t) {
                         return t.piece.box == incoming[0].piece.box &&
                                t.piece.dstOffset ==
                                    incoming[0].piece.dstOffset;
                       }) &&
           "the pieces of one reduction share their destination box");
    accumulator = stagingBuffer(device, staged,
                                shapeProduct(incoming[0].piece.box) *
                                    int64_t(sizeof(float)));
  }
  // A piece whose bytes are here: copied or folded into `out` (or the
  // accumulator).
  auto place = [&](size_t i) {
    const Transfer &t = incoming[i];
    bool add = reduce && i > 0;
    const void *from;
    const Shape *fromShape;
    const Shape *fromOffset;
    if (isLocal(t.peer)) {
      from = published[t.peer - firstId];
      fromShape = &srcShape;
      fromOffset = &t.piece.srcOffset;
    } else if (stagedAt[i]) {
      from = stagedAt[i];
      fromShape = &t.piece.box;
      fromOffset = &zero;
    } else {
      // Received in place, or empty.
      return;
    }
    if (accumulate)
      transferBox(type, from, *fromShape, *fromOffset, ElementType::F32,
                  accumulator, t.piece.box, zero, t.piece.box, add);
    else
      transferBox(type, from, *fromShape, *fromOffset, type, out, outShape,
                  t.piece.dstOffset, t.piece.box, add);
  };
  if (reduce) {
    // Strictly in member order; a remote piece is waited for when its turn
    // comes, so the fold overlaps the later members' transfers.
    for (size_t i = 0; i < incoming.size(); ++i) {
      if (requestOf[i] >= 0 &&
          !wait(&messages.recvs[requestOf[i]], 1, /*abortable=*/true,
                peerRank(incoming[i].peer)))
        return false;
      place(i);
    }
    if (accumulate)
      transferBox(ElementType::F32, accumulator, incoming[0].piece.box, zero,
                  type, out, outShape, incoming[0].piece.dstOffset,
                  incoming[0].piece.box, /*add=*/false);
    return traceMpi();
  }
  // Local pieces first, while the remote ones are on their way.
  for (size_t i = 0; i < incoming.size(); ++i)
    if (isLocal(incoming[i].peer))
      place(i);
  for (size_t i = 0; i < incoming.size(); ++i) {
    if (requestOf[i] < 0)
      continue;
    if (!wait(&messages.recvs[requestOf[i]], 1, /*abortable=*/true,
              peerRank(incoming[i].peer)))
      return false;
    place(i);
  }
  return traceMpi();
}

absl::Status MpiTransport::collective(Device &device, const SdCollective &op,
                                      const void *in, void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  absl::StatusOr<CollectivePlan> planned = groups.makePlan(op);
  if (!planned.ok())
    return planned.status();
  const CollectivePlan &plan = *planned;
  if (shapeProduct(plan.inShape) > INT_MAX ||
      shapeProduct(plan.outShape) > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "'%s': tensors of more than %d elements exceed one MPI message",
        op.name ? op.name : "<unnamed collective>", INT_MAX));
  if (aborted.load())
    return abortedStatus();
  LocalState &state = states[device.id() - firstId];
  uint64_t sequence = state.sequence++;
  auto count = [&] {
    DeviceCounters &counters = device.counters();
    counters.commBytes += groups.commBytes(op, plan);
    ++counters.collectives;
    return absl::OkStatus();
  };
  if (op.kind == SD_ALL_SLICE) {
    // Reads nothing but its own operand.
    Shape offset(plan.inShape.size());
    for (size_t d = 0; d < offset.size(); ++d)
      offset[d] = groups.groupIndex(device.coordinates(), plan.dimAxes[d]) *
                  plan.outShape[d];
    copyBox(plan.elementType, in, plan.inShape, offset, out, plan.outShape,
            Shape(offset.size(), 0), plan.outShape);
    return count();
  }

  std::vector<Transfer> incoming, outgoing;
  planPieces(op, plan, device, incoming, outgoing);
  // A permute's member that nobody sends to keeps its operand; in place
  // there is nothing to copy.
  if (op.kind == SD_COLLECTIVE_PERMUTE && incoming[0].peer == device.id() &&
      in == out)
    incoming.clear();
  bool flat = op.kind == SD_ALL_REDUCE;
  Shape inShape = flat ? Shape{shapeProduct(plan.inShape)} : plan.inShape;
  Shape outShape = flat ? Shape{shapeProduct(plan.outShape)} : plan.outShape;
  bool reduce = op.kind == SD_REDUCE_SCATTER || op.kind == SD_ALL_REDUCE;

  int64_t local = device.id() - firstId;
  inputs[local] = in;
  outputs[local] = out;
  Barrier *barrier = barrierFor(device, plan.group);
  if (barrier && !barrier->wait(aborted, /*abortable=*/true))
    return abortedStatus();
  // From here every local member passes every barrier, aborted or not, so
  // that none returns while a peer still reads its buffers.
  Messages messages;
  size_t staged = 0;
  const GroupComm &group = commFor(op);
  bool ok = exchange(device, group, sequence, /*phase=*/0, incoming, outgoing,
                     plan.elementType, in, inShape, out, outShape, reduce,
                     inputs, staged, messages);
  if (op.kind == SD_ALL_REDUCE) {
    // Every local chunk is folded: gather them, and the remote ones. A
    // member that an abort stopped in the first phase has not folded its
    // chunk; the abort it saw is visible to every member past this barrier,
    // so all of them skip the gather alike.
    if (barrier)
      barrier->wait(aborted, /*abortable=*/false);
    ok = ok && !aborted.load();
    if (ok) {
      // Phase 1 sent each member m its chunk m (`outgoing`) and received
      // this device's chunk from everyone (`incoming`); phase 2 receives
      // the folded chunk m from m and sends this device's to the others.
      std::vector<Transfer> folded;
      for (const Transfer &t : incoming)
        if (t.peer != device.id())
          folded.push_back(t);
      ok = exchange(device, group, sequence, /*phase=*/1,
                    /*incoming=*/outgoing,
                    /*outgoing=*/folded, plan.elementType, out, outShape, out,
                    outShape, /*reduce=*/false, outputs, staged, messages);
    }
  }
  if (ok)
    ok = wait(messages.sends.data(), static_cast<int>(messages.sends.size()),
              /*abortable=*/true, -1, messages.sendPeers.data()) &&
         wait(messages.recvs.data(), static_cast<int>(messages.recvs.size()),
              /*abortable=*/true, -1, messages.recvPeers.data());
  if (!ok)
    drain(messages);
  if (barrier)
    barrier->wait(aborted, /*abortable=*/false);
  if (!ok)
    return abortedStatus();
  return count();
}

absl::Status MpiTransport::startCollective(Device &device,
                                           const SdCollective &op,
                                           const void *in, void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  if (op.kind != SD_COLLECTIVE_PERMUTE)
    return Transport::startCollective(device, op, in, out);
  absl::StatusOr<CollectivePlan> plan = groups.makePlan(op);
  if (!plan.ok())
    return plan.status();
  int64_t elements = shapeProduct(plan->inShape);
  if (elements > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "'%s': tensors of more than %d elements exceed one MPI message",
        op.name ? op.name : "<unnamed collective>", INT_MAX));
  if (aborted.load())
    return abortedStatus();
  int64_t self = device.id();
  LocalState &state = states[self - firstId];
  uint64_t sequence = state.sequence++;
  int64_t members = groups.groupSize(plan->axes);
  std::vector<int64_t> source = permuteSources(op, members);
  const Shape &coords = device.coordinates();
  int64_t own = groups.groupIndex(coords, plan->axes);

  AsyncPermute async{
      {}, in, source[own] == own, elements * elementBytes(plan->elementType)};
  MPI_Datatype datatype = mpiType(plan->elementType);
  const GroupComm &group = commFor(op);
  if (elements > 0) {
    if (!async.keepsOwn) {
      int64_t from = groups.memberDevice(coords, plan->axes, source[own]);
      async.messages.recvs.emplace_back();
      async.messages.recvPeers.push_back(peerRank(from));
      MPI_Irecv(out, static_cast<int>(elements), datatype,
                group.rankOf[peerRank(from)], tagOf(sequence, 0, from, self),
                group.comm, &async.messages.recvs.back());
    }
    for (int64_t t = 0; t < members; ++t) {
      if (source[t] != own || t == own)
        continue;
      int64_t to = groups.memberDevice(coords, plan->axes, t);
      async.messages.sends.emplace_back();
      async.messages.sendPeers.push_back(peerRank(to));
      MPI_Isend(in, static_cast<int>(elements), datatype,
                group.rankOf[peerRank(to)], tagOf(sequence, 0, self, to),
                group.comm, &async.messages.sends.back());
    }
  }
  state.async[out] = std::move(async);
  DeviceCounters &counters = device.counters();
  counters.commBytes += groups.commBytes(op, *plan);
  ++counters.collectives;
  return absl::OkStatus();
}

absl::Status MpiTransport::finishCollective(Device &device,
                                            const SdCollective &op, void *out) {
  if (absl::Status status = checkDevice(device); !status.ok())
    return status;
  if (op.kind != SD_COLLECTIVE_PERMUTE)
    return Transport::finishCollective(device, op, out);
  LocalState &state = states[device.id() - firstId];
  auto found = state.async.find(out);
  if (found == state.async.end())
    return absl::InternalError(absl::StrFormat(
        "device %d: '%s' finishes a permute that was not started", device.id(),
        op.name ? op.name : "<unnamed collective>"));
  AsyncPermute async = std::move(found->second);
  state.async.erase(found);
  Messages &messages = async.messages;
  bool ok = wait(messages.recvs.data(), static_cast<int>(messages.recvs.size()),
                 /*abortable=*/true, -1, messages.recvPeers.data()) &&
            wait(messages.sends.data(), static_cast<int>(messages.sends.size()),
                 /*abortable=*/true, -1, messages.sendPeers.data());
  if (!ok) {
    drain(messages);
    return abortedStatus();
  }
  if (async.keepsOwn && async.in != out && async.bytes > 0)
    std::memcpy(out, async.in, static_cast<size_t>(async.bytes));
  return absl::OkStatus();
}

void MpiTransport::abort(const absl::Status &status) {
  std::lock_guard<std::mutex> lock(stateMutex);
  if (!aborted.load())
    abortStatus =
        status.ok() ? absl::AbortedError("the mesh was aborted") : status;
  aborted.store(true);
  for (auto &[key, barrier] : barriers)
    barrier->wake();
}

void MpiTransport::reset() {
  // No device runs: permutes started but never finished still own
  // messages, which must be settled before their buffers are reused.
  for (LocalState &state : states) {
    for (auto &[out, async] : state.async)
      drain(async.messages);
    state.async.clear();
    state.sequence = 0;
  }
  std::lock_guard<std::mutex> lock(stateMutex);
  for (auto &[key, barrier] : barriers)
    barrier->reset();
  abortStatus = absl::OkStatus();
  aborted.store(false);
}

absl::StatusOr<std::unique_ptr<Transport>>
sd::rt::createMpiTransport(const MeshSpec &mesh,
                           const MpiTransportOptions &options) {
  int initialized = 0, finalized = 0, provided = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return absl::FailedPreconditionError(
        "MPI is not initialized (sd::rt::initializeMpi)");
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return absl::FailedPreconditionError(absl::StrFormat(
        "MPI was initialized with thread level %d; sd's device threads need "
        "MPI_THREAD_MULTIPLE (%d)",
        provided, MPI_THREAD_MULTIPLE));
  if (absl::Status status = verifyMeshAxes(mesh.axes()); !status.ok())
    return status;
  int size = mpiWorldSize(), rank = mpiWorldRank();
  if (size != mesh.numProcesses())
    return absl::InvalidArgumentError(absl::StrFormat(
        "MPI world size %d does not match the %d processes of mesh %s (one "
        "rank per process)",
        size, mesh.numProcesses(), mesh.toString()));
  int *tagUb = nullptr, found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &found);
  int64_t tags = found && tagUb ? int64_t(*tagUb) + 1 : 32768;
  int64_t perProcess = mesh.devicesPerProcess();
  // Two phases of one collective between every pair of local indices.
  int64_t slots = tags / (perProcess * perProcess);
  if (slots < 2)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d devices per process need %d MPI tags per collective, but "
        "MPI_TAG_UB is %d",
        perProcess, 2 * perProcess * perProcess, tags - 1));
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return std::unique_ptr<Transport>(
      new MpiTransport(mesh, comm, rank, slots, options));
}
