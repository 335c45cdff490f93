//===- Runtime.h - A mesh of devices in one process -------------*- C++ -*-===//
//
// The runtime executes compiled device programs (ProgramABI.h) on a mesh of
// devices. In this process each device is a thread with its own OpenMP team;
// a device owns its memory pools (device memory and host memory), its
// counters, and the error it last recorded. Collectives go through a
// `Transport`: the shared-memory one between the threads of one process, or
// the MPI one (MpiTransport.h) for a runtime that runs one process's devices
// of a multi-process mesh, without touching devices, kernels or programs.
//
// No MLIR here: the runtime links Abseil, OpenMP, a BLAS and sd's MLIR-free
// libraries only.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_RUNTIME_H
#define SD_RUNTIME_RUNTIME_H

#include "sd/Runtime/ProgramABI.h"
#include "sd/Runtime/Trace.h"
#include "sd/Sharding/Mesh.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sd::rt {

/// Whether memory pools keep released buffers for reuse unless told
/// otherwise: yes, except in AddressSanitizer builds, where a released
/// buffer goes back to the system so that a use after release is caught.
bool cacheBuffersByDefault();

/// Sets the C allocator (glibc's malloc) up for device threads, once per
/// process: memory a thread frees stays with its arena for the next request
/// instead of going back to the system (see MemoryPool.cpp). Every pool
/// that caches its buffers calls it when made. Nothing where the user set
/// glibc's malloc variables (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
/// MALLOC_TOP_PAD_, or malloc tunables in GLIBC_TUNABLES), in
/// AddressSanitizer builds, or with another C library. Returns whether the
/// settings were made (by this call or an earlier one).
bool configureHostAllocator();

/// How a MemoryPool hands out buffers.
struct MemoryPoolOptions {
  /// Keep released buffers for reuse (see MemoryPool.cpp).
  bool cacheBuffers = cacheBuffersByDefault();
  /// Map buffers of 2 MiB and more on huge pages, populated at once (see
  /// MemoryPool.cpp); off where the cache is, so that ASan sees every buffer.
  bool mapLargeBuffers = cacheBuffersByDefault();
};

/// One memory space of one device: a budget, and the bytes live now and at
/// the peak. Buffers are 64-byte aligned.
class MemoryPool {
public:
  /// `space` names the pool in errors ("device", "host"); `budget` 0 means
  /// unlimited.
  MemoryPool(std::string space, int64_t device, int64_t budget,
             MemoryPoolOptions options = {});
  ~MemoryPool();
  MemoryPool(const MemoryPool &) = delete;
  MemoryPool &operator=(const MemoryPool &) = delete;

  /// A buffer of `bytes` (0 is allowed and yields a distinct non-null
  /// pointer). ResourceExhausted when live + bytes would exceed the budget:
  /// "device 3: out of device memory allocating 12.00 MiB for '<name>': 1.00
  /// GiB live + 12.00 MiB > budget 1.00 GiB (--device-memory)".
  absl::StatusOr<void *> allocate(int64_t bytes, const std::string &name);
  /// Returns a buffer of this pool; nullptr is ignored. Anything else is a
  /// programming error (asserted).
  void release(void *buffer);
  /// True when `buffer` came from this pool and is live.
  bool owns(const void *buffer) const;
  /// Frees every live and cached buffer (after a failed step) and keeps the
  /// peak.
  void releaseAll();

  int64_t liveBytes() const;
  int64_t peakBytes() const;
  /// What the pool holds: its live buffers' allocated sizes plus the cached
  /// buffers'.
  int64_t heldBytes() const;
  /// How many buffers the pool has taken from the system (not its cache).
  int64_t systemAllocations() const;
  void resetPeak();
  int64_t budget() const { return budgetBytes; }

private:
  std::string space;
  int64_t device;
  int64_t budgetBytes;
  MemoryPoolOptions options;
  mutable std::mutex mutex;
  /// A live buffer's requested and allocated sizes.
  struct Block {
    int64_t bytes;
    int64_t rounded;
  };
  /// Frees the cached buffers; the mutex is held.
  void freeCached();
  std::unordered_map<void *, Block> live;
  /// Released buffers by allocated size, reused (best fit) before asking
  /// the system.
  std::map<int64_t, std::vector<void *>> cached;
  /// Live bytes as requested, and as allocated.
  int64_t liveTotal = 0;
  int64_t liveHeld = 0;
  int64_t systemAllocationCount = 0;
  int64_t peakTotal = 0;
  int64_t cachedTotal = 0;
};

/// "12.00 MiB", "1.00 GiB", "512 B".
std::string formatBytes(int64_t bytes);

/// Counters a device accumulates while it runs.
struct DeviceCounters {
  /// Bytes this device sends to other devices in collectives (the cost
  /// model's per-device communication, so sdrun's figure matches sdopt's).
  int64_t commBytes = 0;
  int64_t collectives = 0;
  /// Bytes moved by sd.offload (device → host) and sd.reload (host → device).
  int64_t offloadBytes = 0;
  int64_t reloadBytes = 0;
  /// Seconds this device spent in collectives (issuing them and waiting
  /// for them, peers' lateness included), by the mesh axes of their groups
  /// (bit i: axis i; collectiveAxisMask).
  std::map<uint32_t, double> collectiveSeconds;
};

/// The mesh axes a collective's group spans, as a bit set (bit i: axis i).
uint32_t collectiveAxisMask(const SdCollective &op);

class Transport;

/// One device of the mesh. The `SdDevice*` a program receives points to one.
class Device {
public:
  Device(int64_t id, std::vector<int64_t> coordinates, int64_t deviceBudget,
         int64_t hostBudget, Transport *transport,
         const MemoryPoolOptions &pools = {});

  int64_t id() const { return deviceId; }
  /// Coordinates on each mesh axis (MeshSpec::coordinates).
  const std::vector<int64_t> &coordinates() const { return coords; }
  MemoryPool &pool(SdMemorySpace space) {
    return space == SD_HOST_MEMORY ? hostPool : devicePool;
  }
  Transport &transport() { return *transportPtr; }
  DeviceCounters &counters() { return deviceCounters; }

  /// The first error a runtime call recorded since `clearError`; programs see
  /// only a non-zero return code.
  const absl::Status &error() const { return lastError; }
  /// Records `status` unless an error is already recorded; returns 1.
  int32_t fail(absl::Status status);
  void clearError() { lastError = absl::OkStatus(); }

  /// The spans this device's programs bracket (recorded only while the
  /// runtime traces; see MeshRuntime::enableTracing).
  TraceRecorder &trace() { return recorder; }

private:
  int64_t deviceId;
  std::vector<int64_t> coords;
  MemoryPool devicePool;
  MemoryPool hostPool;
  Transport *transportPtr;
  DeviceCounters deviceCounters;
  absl::Status lastError;
  TraceRecorder recorder;
};

/// Moves data between the devices of a mesh. Every device of a collective's
/// group calls `collective` with the same op; the call returns once this
/// device's `out` is complete and its `in` is no longer read by anyone.
class Transport {
public:
  virtual ~Transport();
  /// The mesh whose devices it connects (axis sizes for sd.axis_index).
  virtual const MeshSpec &mesh() const = 0;
  /// Runs `op` for `device`; adds the bytes it sends to its counters.
  /// Reductions add the group's operands in ascending member order, so every
  /// member gets bitwise the same sum and reruns agree. `in` and `out` hold
  /// `op.element_type` elements; InvalidArgument for an element type the
  /// transport does not move. Fails (Aborted) when another device aborted
  /// the transport.
  virtual absl::Status collective(Device &device, const SdCollective &op,
                                  const void *in, void *out) = 0;
  /// Issues `op` for `device` and returns before it completes; the matching
  /// `finishCollective` (same device, op and `out`) waits for it. Every
  /// device issues and finishes its collectives in one program order, so
  /// the k-th start of one device matches the k-th start of its peers. The
  /// default defers the whole collective to `finishCollective`; transports
  /// that can move data in the meantime override both.
  virtual absl::Status startCollective(Device &device, const SdCollective &op,
                                       const void *in, void *out);
  /// Completes the collective `startCollective` issued into `out`: `out` is
  /// complete and the start's `in` is no longer read by anyone.
  virtual absl::Status finishCollective(Device &device, const SdCollective &op,
                                        void *out);
  /// Releases every device waiting in a collective with `status`, and makes
  /// later collectives fail, until `reset`.
  virtual void abort(const absl::Status &status) = 0;
  virtual void reset() = 0;

private:
  /// The default start's deferred collectives: the operand of each, by
  /// device and `out` buffer.
  std::mutex deferredMutex;
  std::map<std::pair<int64_t, const void *>, const void *> deferred;
};

/// The in-process transport: devices are threads sharing memory.
std::unique_ptr<Transport> createSharedMemoryTransport(const MeshSpec &mesh);

/// Byte messages between the processes of a multi-process mesh, for the
/// host's work outside the programs: assembling a global tensor to export or
/// compare, agreeing that every process wrote its part of a checkpoint.
/// Every process makes the same calls in the same order, from one thread.
class ProcessGroup {
public:
  virtual ~ProcessGroup();
  /// This process (its mesh process index) and how many there are.
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// Every process's `bytes`, in rank order, on every process. An error
  /// (a peer that never arrives: DeadlineExceeded naming the wait) leaves
  /// the group unusable.
  virtual absl::StatusOr<std::vector<std::string>>
  allGather(std::string_view bytes) = 0;
};

/// The CPUs this process may run on (its affinity mask, as `taskset` or a
/// container's cpuset sets it), at least 1: the most threads per device a
/// runtime runs, and the default number of parallel compiler jobs.
int availableCpus();

/// InvalidArgument, naming the flag, for more threads per device than
/// availableCpus() or fewer than 0 (0 is the default): MeshRuntime::create's
/// check, which a tool may make before it compiles anything.
absl::Status checkThreadsPerDevice(int threadsPerDevice);

/// Makes the transport of a runtime's devices; an error fails
/// MeshRuntime::create.
using TransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<Transport>>(const MeshSpec &)>;

struct MeshRuntimeOptions {
  MeshSpec mesh;
  /// OpenMP threads per device (--threads-per-device), at most
  /// availableCpus(); 0 means max(1, availableCpus() / devices this runtime
  /// runs).
  int threadsPerDevice = 0;
  /// Per-device budgets in bytes; 0 means unlimited.
  int64_t deviceMemoryBudget = 0;
  int64_t hostMemoryBudget = 0;
  /// How every device's pools hand out buffers.
  MemoryPoolOptions pools;
  /// The process whose devices this runtime runs (ids [process *
  /// devicesPerProcess(), (process + 1) * devicesPerProcess())), as one rank
  /// of a multi-process mesh does; -1 runs every device of the mesh here.
  int64_t process = -1;
  /// The transport; unset means the shared-memory one, which connects the
  /// devices of one process only (so a runtime of one process of a
  /// multi-process mesh needs another, e.g. createMpiTransport).
  TransportFactory transportFactory;
  /// How this process reaches the others' hosts (createMpiProcessGroup);
  /// needed when `process` is set for what assembles global tensors
  /// (TrainingSession::gatherArgument, checkpoints).
  std::shared_ptr<ProcessGroup> processGroup;
};

/// The devices of one mesh, or of one process of it, each running on its
/// own thread.
class MeshRuntime {
public:
  /// InvalidArgument on an empty mesh, a negative budget, more threads per
  /// device than availableCpus() or a process the mesh does not have; the
  /// transport factory's error.
  static absl::StatusOr<std::unique_ptr<MeshRuntime>>
  create(MeshRuntimeOptions options);
  ~MeshRuntime();

  const MeshSpec &mesh() const { return options.mesh; }
  /// The devices this runtime runs: the whole mesh's, or those of
  /// options.process. `device(i)` is the i-th of them in id order, so its
  /// mesh id is firstDeviceId() + i (i itself without a process).
  int64_t numDevices() const { return static_cast<int64_t>(devices.size()); }
  int threadsPerDevice() const { return threads; }
  Device &device(int64_t index) { return *devices[index]; }
  /// The process this runtime runs, -1 for all of them.
  int64_t process() const { return options.process; }
  int64_t firstDeviceId() const {
    return options.process < 0 ? 0
                               : options.process * mesh().devicesPerProcess();
  }
  /// The group of this runtime's process and the others of its mesh;
  /// nullptr when the runtime runs every device of the mesh or was given
  /// none.
  ProcessGroup *processGroup() const { return options.processGroup.get(); }

  /// Runs `fn` once per device, each on its own thread whose OpenMP team
  /// has threadsPerDevice() threads, and waits for all. The threads persist
  /// between calls (one per device for the runtime's lifetime); calls must
  /// not overlap. When a device fails,
  /// the transport is aborted so that its peers return instead of waiting;
  /// the result is the failing devices' first error in device order (an
  /// Aborted peer never hides the cause).
  absl::Status runOnDevices(const std::function<absl::Status(Device &)> &fn);

  /// The function table programs call (ProgramABI.h).
  static const SdApi *api();

  /// Starts recording a trace (Trace.h) on every device and the host track,
  /// from a common time origin set now and dropping earlier events; or
  /// stops, keeping the events for writeChromeTrace. Enabling while already
  /// tracing changes nothing. Not while runOnDevices runs. While off, a
  /// program's trace calls cost a flag test each.
  void enableTracing(bool enable);
  bool tracingEnabled() const { return tracing; }
  /// A span of the host thread on the trace's "host" track: a step, a
  /// checkpoint, a compilation. Ignored unless tracing.
  void traceHostSpan(std::string_view name, TraceClock::time_point begin,
                     TraceClock::time_point end,
                     std::string_view category = "host");
  TraceRecorder &hostTrace() { return hostRecorder; }
  /// A span of the thread that makes the training data ahead of each step,
  /// on a "data loader" track of its own. Ignored unless tracing.
  void traceLoaderSpan(std::string_view name, TraceClock::time_point begin,
                       TraceClock::time_point end);
  TraceRecorder &loaderTrace() { return loaderRecorder; }

private:
  explicit MeshRuntime(MeshRuntimeOptions options);
  struct Workers;
  /// Starts the device threads (on the first runOnDevices).
  void startWorkers();
  MeshRuntimeOptions options;
  int threads = 1;
  std::unique_ptr<Transport> transportPtr;
  std::vector<std::unique_ptr<Device>> devices;
  std::unique_ptr<Workers> workers;
  bool tracing = false;
  TraceRecorder hostRecorder, loaderRecorder;
};

} // namespace sd::rt

#endif // SD_RUNTIME_RUNTIME_H
