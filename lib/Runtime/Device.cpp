//===- Device.cpp - One device of the mesh --------------------------------===//
//
// A device is its coordinates, its two memory pools, its counters and the
// first error a runtime call recorded; the thread that runs it is
// MeshRuntime's business.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Runtime.h"

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
