//===- MeshRuntime.cpp - Running a mesh of devices on threads -------------===//
//
// Each device runs on its own std::thread with its own OpenMP team (libgomp
// keeps the team size per thread), so a device's kernels and its GEMMs
// (OpenBLAS's OpenMP build) run on threadsPerDevice() threads and devices do
// not contend for one global pool. A device that fails aborts the transport
// at once, so that peers blocked in a collective return instead of waiting
// for an operand that never comes.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <omp.h>

#include <algorithm>
#include <thread>

using namespace sd;
using namespace sd::rt;

/// Cores this process may use: OpenMP's view (which honours the affinity
/// mask), else the hardware's.
static int availableCores() {
  int cores = omp_get_num_procs();
  if (cores < 1)
    cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(cores, 1);
}

MeshRuntime::MeshRuntime(MeshRuntimeOptions options)
    : options(std::move(options)) {}

MeshRuntime::~MeshRuntime() = default;

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
  if (options.threadsPerDevice < 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("threads per device must not be negative, got %d",
                        options.threadsPerDevice));
  std::unique_ptr<MeshRuntime> runtime(new MeshRuntime(std::move(options)));
  int64_t numDevices = runtime->options.mesh.numDevices();
  runtime->threads = runtime->options.threadsPerDevice > 0
                         ? runtime->options.threadsPerDevice
                         : static_cast<int>(std::max<int64_t>(
                               1, availableCores() / numDevices));
  runtime->transportPtr = createSharedMemoryTransport(runtime->options.mesh);
  for (int64_t id = 0; id < numDevices; ++id)
    runtime->devices.push_back(std::make_unique<Device>(
        id, runtime->options.mesh.coordinates(id),
        runtime->options.deviceMemoryBudget, runtime->options.hostMemoryBudget,
        runtime->transportPtr.get()));
  return runtime;
}

absl::Status
MeshRuntime::runOnDevices(const std::function<absl::Status(Device &)> &fn) {
  std::vector<absl::Status> statuses(devices.size());
  std::vector<std::thread> workers;
  workers.reserve(devices.size());
  for (size_t id = 0; id < devices.size(); ++id) {
    devices[id]->clearError();
    workers.emplace_back([&, id] {
      // This thread's OpenMP ICV: its parallel regions (and OpenBLAS's)
      // get a team of this size.
      omp_set_num_threads(threads);
      absl::Status status = fn(*devices[id]);
      if (!status.ok())
        transportPtr->abort(absl::AbortedError(
            absl::StrFormat("device %d failed: %s", id, status.ToString())));
      statuses[id] = std::move(status);
    });
  }
  for (std::thread &worker : workers)
    worker.join();

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
