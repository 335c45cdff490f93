//===- Device.cpp - One device of the mesh, and Transport's defaults ------===//
//
// A device is its coordinates, its two memory pools, its counters and the
// first error a runtime call recorded; the thread that runs it is
// MeshRuntime's business. A transport without asynchronous collectives of
// its own runs each started one when it is finished.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

using namespace sd::rt;

Device::Device(int64_t id, std::vector<int64_t> coordinates,
               int64_t deviceBudget, int64_t hostBudget, Transport *transport,
               const MemoryPoolOptions &pools)
    : deviceId(id), coords(std::move(coordinates)),
      devicePool("device", id, deviceBudget, pools),
      hostPool("host", id, hostBudget, pools), transportPtr(transport) {}

int32_t Device::fail(absl::Status status) {
  if (lastError.ok() && !status.ok())
    lastError = std::move(status);
  return 1;
}

Transport::~Transport() = default;

ProcessGroup::~ProcessGroup() = default;

uint32_t sd::rt::collectiveAxisMask(const SdCollective &op) {
  uint32_t mask = 0;
  for (int32_t i = 0; i < op.num_axes && i < SD_MAX_AXES; ++i)
    mask |= 1u << op.axes[i];
  for (int32_t d = 0; d < op.rank && d < SD_MAX_RANK; ++d)
    for (int32_t i = 0; i < op.num_dim_axes[d] && i < SD_MAX_AXES; ++i)
      mask |= 1u << op.dim_axes[d][i];
  return mask;
}

absl::Status Transport::startCollective(Device &device, const SdCollective &,
                                        const void *in, void *out) {
  std::lock_guard<std::mutex> lock(deferredMutex);
  deferred[{device.id(), out}] = in;
  return absl::OkStatus();
}

absl::Status Transport::finishCollective(Device &device, const SdCollective &op,
                                         void *out) {
  const void *in = nullptr;
  {
    std::lock_guard<std::mutex> lock(deferredMutex);
    auto it = deferred.find({device.id(), out});
    if (it == deferred.end())
      return absl::InternalError(absl::StrFormat(
          "device %d: %s finishes a collective that was not started",
          device.id(), op.name ? op.name : "a collective"));
    in = it->second;
    deferred.erase(it);
  }
  return collective(device, op, in, out);
}
