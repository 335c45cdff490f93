//===- MeshRuntime.cpp - Running a mesh of devices on threads -------------===//
//
// Each device runs on its own std::thread with its own OpenMP team (libgomp
// keeps the team size per thread), so a device's kernels and its GEMMs
// (oneDNN's and OpenBLAS's OpenMP builds) run on threadsPerDevice() threads
// and devices do not contend for one global pool. A device that fails
// aborts the transport at once, so that peers blocked in a collective
// return instead of waiting for an operand that never comes.
//
// A runtime may run the devices of one process of a multi-process mesh
// (MeshRuntimeOptions::process) over a transport that reaches the others,
// such as MpiTransport: one runtime per MPI rank.
//
// The device threads persist for the runtime's lifetime and wait for work
// between calls: each keeps its OpenMP team (and the GEMM libraries their
// buffers) from one step to the next, instead of paying for new threads
// every step.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <omp.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

using namespace sd;
using namespace sd::rt;

int sd::rt::availableCpus() {
  // The mask's size grows with the machine's CPUs: a cpu_set_t holds 1024,
  // and sched_getaffinity fails with EINVAL on a set too small for the
  // kernel's.
  for (int cpus = CPU_SETSIZE; cpus <= (1 << 20); cpus *= 2) {
    cpu_set_t *set = CPU_ALLOC(cpus);
    if (!set)
      break;
    size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    int result = sched_getaffinity(0, bytes, set);
    int count = CPU_COUNT_S(bytes, set);
    CPU_FREE(set);
    if (result == 0)
      return std::max(count, 1);
    if (errno != EINVAL)
      break;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

absl::Status sd::rt::checkThreadsPerDevice(int threadsPerDevice) {
  if (threadsPerDevice < 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--threads-per-device must not be negative, not %d", threadsPerDevice));
  // A team larger than the CPUs gains nothing, and a large one fails inside
  // OpenMP (threads it cannot create), where no error can be returned.
  int cpus = availableCpus();
  if (threadsPerDevice > cpus)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--threads-per-device=%d is more than the %d cpu%s this process may "
        "run on (its cpu affinity)",
        threadsPerDevice, cpus, cpus == 1 ? "" : "s"));
  return absl::OkStatus();
}

/// One persistent thread per device, running whatever `runOnDevices` hands
/// out.
struct MeshRuntime::Workers {
  std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable done;
  const std::function<absl::Status(Device &)> *job = nullptr;
  uint64_t generation = 0;
  size_t pending = 0;
  bool stopping = false;
  std::vector<absl::Status> statuses;
  std::vector<std::thread> threads;
};

MeshRuntime::MeshRuntime(MeshRuntimeOptions options)
    : options(std::move(options)) {}

MeshRuntime::~MeshRuntime() {
  if (!workers)
    return;
  {
    std::lock_guard<std::mutex> lock(workers->mutex);
    workers->stopping = true;
  }
  workers->wake.notify_all();
  for (std::thread &thread : workers->threads)
    thread.join();
}

void MeshRuntime::startWorkers() {
  workers = std::make_unique<Workers>();
  workers->statuses.resize(devices.size());
  for (size_t id = 0; id < devices.size(); ++id) {
    workers->threads.emplace_back([this, id] {
      // This thread's OpenMP ICV: its parallel regions (and the GEMM
      // libraries') get a team of this size.
      omp_set_num_threads(threads);
      Workers &w = *workers;
      uint64_t seen = 0;
      while (true) {
        const std::function<absl::Status(Device &)> *job;
        {
          std::unique_lock<std::mutex> lock(w.mutex);
          w.wake.wait(lock, [&] { return w.stopping || w.generation != seen; });
          if (w.stopping)
            return;
          seen = w.generation;
          job = w.job;
        }
        absl::Status status = (*job)(*devices[id]);
        if (!status.ok())
          transportPtr->abort(absl::AbortedError(absl::StrFormat(
              "device %d failed: %s", devices[id]->id(), status.ToString())));
        std::lock_guard<std::mutex> lock(w.mutex);
        w.statuses[id] = std::move(status);
        if (--w.pending == 0)
          w.done.notify_all();
      }
    });
  }
}

absl::StatusOr<std::unique_ptr<MeshRuntime>>
MeshRuntime::create(MeshRuntimeOptions options) {
  const MeshSpec &mesh = options.mesh;
  if (mesh.axes().empty())
    return absl::InvalidArgumentError("the mesh has no axes");
  for (const MeshAxis &axis : mesh.axes())
    if (axis.ici < 1 || axis.dcn < 1)
      return absl::InvalidArgumentError(
          absl::StrFormat("mesh axis \"%s\" of mesh %s has no devices",
                          axis.name, mesh.toString()));
  if (options.deviceMemoryBudget < 0 || options.hostMemoryBudget < 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "memory budgets must not be negative (device %d, host %d)",
        options.deviceMemoryBudget, options.hostMemoryBudget));
  if (absl::Status threads = checkThreadsPerDevice(options.threadsPerDevice);
      !threads.ok())
    return threads;
  if (options.process < -1 || options.process >= mesh.numProcesses())
    return absl::InvalidArgumentError(
        absl::StrFormat("process %d is not a process of mesh %s (%d processes)",
                        options.process, mesh.toString(), mesh.numProcesses()));
  // Shared memory cannot reach the devices of other processes: their
  // groups' barriers would wait forever.
  if (options.process >= 0 && mesh.numProcesses() > 1 &&
      !options.transportFactory)
    return absl::InvalidArgumentError(absl::StrFormat(
        "process %d of mesh %s (%d processes) needs a transport that reaches "
        "the other processes (MeshRuntimeOptions::transportFactory)",
        options.process, mesh.toString(), mesh.numProcesses()));
  if (const std::shared_ptr<ProcessGroup> &group = options.processGroup)
    if (group->size() != mesh.numProcesses() || group->rank() != options.process)
      return absl::InvalidArgumentError(absl::StrFormat(
          "the process group's rank %d of %d is not process %d of mesh %s "
          "(%d processes)",
          group->rank(), group->size(), options.process, mesh.toString(),
          mesh.numProcesses()));
  std::unique_ptr<MeshRuntime> runtime(new MeshRuntime(std::move(options)));
  // This runtime's devices: all, or one process's contiguous ids.
  int64_t first = runtime->firstDeviceId();
  int64_t numDevices = runtime->options.process < 0
                           ? runtime->options.mesh.numDevices()
                           : runtime->options.mesh.devicesPerProcess();
  runtime->threads = runtime->options.threadsPerDevice > 0
                         ? runtime->options.threadsPerDevice
                         : static_cast<int>(std::max<int64_t>(
                               1, availableCpus() / numDevices));
  if (runtime->options.transportFactory) {
    absl::StatusOr<std::unique_ptr<Transport>> transport =
        runtime->options.transportFactory(runtime->options.mesh);
    if (!transport.ok())
      return transport.status();
    if (!*transport)
      return absl::InternalError("the transport factory returned no transport");
    runtime->transportPtr = std::move(*transport);
  } else {
    runtime->transportPtr = createSharedMemoryTransport(runtime->options.mesh);
  }
  for (int64_t id = first; id < first + numDevices; ++id)
    runtime->devices.push_back(std::make_unique<Device>(
        id, runtime->options.mesh.coordinates(id),
        runtime->options.deviceMemoryBudget, runtime->options.hostMemoryBudget,
        runtime->transportPtr.get(), runtime->options.pools));
  return runtime;
}

absl::Status
MeshRuntime::runOnDevices(const std::function<absl::Status(Device &)> &fn) {
  if (!workers)
    startWorkers();
  for (size_t id = 0; id < devices.size(); ++id) {
    devices[id]->clearError();
    // Spans a failed program left open.
    devices[id]->trace().discardOpen();
  }
  std::vector<absl::Status> statuses;
  {
    std::unique_lock<std::mutex> lock(workers->mutex);
    workers->job = &fn;
    workers->pending = devices.size();
    ++workers->generation;
    workers->wake.notify_all();
    workers->done.wait(lock, [&] { return workers->pending == 0; });
    workers->job = nullptr;
    statuses.swap(workers->statuses);
    workers->statuses.resize(devices.size());
  }

  // The cause, not a peer that was aborted because of it.
  const absl::Status *first = nullptr;
  for (const absl::Status &status : statuses) {
    if (status.ok())
      continue;
    if (!first)
      first = &status;
    if (!absl::IsAborted(status)) {
      first = &status;
      break;
    }
  }
  if (!first)
    return absl::OkStatus();
  transportPtr->reset();
  return *first;
}
