//===- MeshRuntimeTest.cpp - Tests for device threads and the API table ---===//

#include "sd/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

using namespace sd;
using namespace sd::rt;

namespace {

std::unique_ptr<MeshRuntime> makeRuntime(MeshSpec mesh, int threads = 1,
                                         int64_t deviceBudget = 0,
                                         int64_t hostBudget = 0) {
  MeshRuntimeOptions options;
  options.mesh = std::move(mesh);
  options.threadsPerDevice = threads;
  options.deviceMemoryBudget = deviceBudget;
  options.hostMemoryBudget = hostBudget;
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(std::move(options));
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

SdDevice *toSd(Device &device) { return reinterpret_cast<SdDevice *>(&device); }

/// An all_reduce of `n` floats over `axes`.
SdCollective allReduce(int64_t n, std::vector<int32_t> axes) {
  SdCollective op;
  std::memset(&op, 0, sizeof(op));
  op.kind = SD_ALL_REDUCE;
  op.rank = 1;
  op.in_shape[0] = op.out_shape[0] = n;
  op.num_axes = static_cast<int32_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i)
    op.axes[i] = axes[i];
  op.name = "%sum = sd.all_reduce";
  return op;
}

/// Each device's all_reduce of (id + 1) over `op`'s axes; the program
/// returns the recorded error as a compiled one would.
absl::Status sumDeviceIds(Device &device, const SdCollective &op,
                          float *result) {
  float in = static_cast<float>(device.id() + 1);
  if (MeshRuntime::api()->collective(toSd(device), &op, &in, result) != 0)
    return device.error();
  return absl::OkStatus();
}

TEST(MeshRuntimeTest, CreateRejectsBadOptions) {
  MeshRuntimeOptions empty;
  EXPECT_EQ(MeshRuntime::create(empty).status().code(),
            absl::StatusCode::kInvalidArgument);
  MeshRuntimeOptions negative;
  negative.mesh = MeshSpec({{"data", 2, 1}});
  negative.hostMemoryBudget = -1;
  EXPECT_EQ(MeshRuntime::create(negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  MeshRuntimeOptions zeroAxis;
  zeroAxis.mesh = MeshSpec({{"data", 0, 1}});
  EXPECT_EQ(MeshRuntime::create(zeroAxis).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeshRuntimeTest, DevicesKnowTheirCoordinates) {
  MeshSpec mesh({{"data", 1, 2}, {"fsdp", 3, 1}});
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(mesh);
  ASSERT_TRUE(runtime);
  EXPECT_EQ(runtime->numDevices(), 6);
  for (int64_t id = 0; id < 6; ++id) {
    EXPECT_EQ(runtime->device(id).id(), id);
    EXPECT_EQ(runtime->device(id).coordinates(), mesh.coordinates(id));
  }
}

TEST(MeshRuntimeTest, EachDeviceRunsOnItsOwnThreadWithItsTeamSize) {
  // Four devices of up to 3 threads: more threads than CPUs in all, which a
  // simulated mesh needs; each device's team fits the CPUs.
  int threads = std::min(3, availableCpus());
  std::unique_ptr<MeshRuntime> runtime =
      makeRuntime(MeshSpec({{"data", 2, 1}, {"fsdp", 2, 1}}), threads);
  ASSERT_TRUE(runtime);
  EXPECT_EQ(runtime->threadsPerDevice(), threads);
  std::mutex mutex;
  std::set<std::thread::id> threadIds;
  std::vector<int> maxThreads(4, 0), teamSizes(4, 0);
  absl::Status status = runtime->runOnDevices([&](Device &device) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threadIds.insert(std::this_thread::get_id());
    }
    maxThreads[device.id()] = omp_get_max_threads();
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    teamSizes[device.id()] = team;
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(threadIds.size(), 4u);
  EXPECT_EQ(maxThreads, std::vector<int>(4, threads));
  EXPECT_EQ(teamSizes, std::vector<int>(4, threads));
}

TEST(MeshRuntimeTest, RefusesMoreThreadsPerDeviceThanCpus) {
  int cpus = availableCpus();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(cpus, CPU_COUNT(&set));
  MeshRuntimeOptions options;
  options.mesh = MeshSpec({{"data", 2, 1}});
  options.threadsPerDevice = cpus + 1;
  absl::StatusOr<std::unique_ptr<MeshRuntime>> refused =
      MeshRuntime::create(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "--threads-per-device=" + std::to_string(cpus + 1) +
                " is more than the " + std::to_string(cpus) +
                (cpus == 1 ? " cpu" : " cpus") +
                " this process may run on (its cpu affinity)");
  // The case: a team of 1024 aborted inside OpenMP.
  if (cpus < 1024) {
    options.threadsPerDevice = 1024;
    EXPECT_FALSE(MeshRuntime::create(options).ok());
  }
  // As many as there are CPUs, on each of two devices, runs.
  std::unique_ptr<MeshRuntime> runtime =
      makeRuntime(MeshSpec({{"data", 2, 1}}), cpus);
  ASSERT_TRUE(runtime);
  EXPECT_EQ(runtime->threadsPerDevice(), cpus);
}

TEST(MeshRuntimeTest, DefaultThreadsSplitTheCores) {
  std::unique_ptr<MeshRuntime> runtime =
      makeRuntime(MeshSpec({{"data", 2, 1}}), /*threads=*/0);
  ASSERT_TRUE(runtime);
  EXPECT_EQ(runtime->threadsPerDevice(), std::max(1, availableCpus() / 2));
}

TEST(MeshRuntimeTest, ReturnsTheFirstErrorInDeviceOrder) {
  std::unique_ptr<MeshRuntime> runtime =
      makeRuntime(MeshSpec({{"data", 4, 1}}));
  ASSERT_TRUE(runtime);
  absl::Status status = runtime->runOnDevices([](Device &device) {
    if (device.id() == 1)
      return absl::InternalError("device 1 broke");
    if (device.id() == 3)
      return absl::NotFoundError("device 3 broke");
    return absl::OkStatus();
  });
  EXPECT_EQ(status, absl::InternalError("device 1 broke"));
}

TEST(MeshRuntimeTest, FailingDeviceReleasesPeersBlockedInACollective) {
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(MeshSpec({{"x", 2, 1}}));
  ASSERT_TRUE(runtime);
  SdCollective op = allReduce(1, {0});
  // Device 1 fails before (immediately) or after (delay) device 0 blocks.
  for (int delayMs : {0, 0, 0, 30}) {
    std::atomic<bool> peerAborted{false};
    absl::Status status = runtime->runOnDevices([&](Device &device) {
      if (device.id() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
        return absl::InternalError("device 1: the program crashed");
      }
      float out = 0;
      absl::Status result = sumDeviceIds(device, op, &out);
      peerAborted = absl::IsAborted(result);
      return result;
    });
    // The cause, not device 0's Aborted.
    EXPECT_EQ(status, absl::InternalError("device 1: the program crashed"));
    EXPECT_TRUE(peerAborted.load());
    EXPECT_TRUE(absl::IsAborted(runtime->device(0).error()))
        << runtime->device(0).error();
    EXPECT_NE(runtime->device(0).error().message().find("device 1"),
              std::string::npos);
  }

  // The runtime works again afterwards.
  std::vector<float> sums(2, 0);
  absl::Status status = runtime->runOnDevices([&](Device &device) {
    return sumDeviceIds(device, op, &sums[device.id()]);
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(sums, std::vector<float>({3, 3}));
  EXPECT_TRUE(runtime->device(0).error().ok());
}

TEST(MeshRuntimeTest, GroupsDoNotWaitForOtherGroups) {
  // Groups over fsdp are {0, 1} and {2, 3}. Device 3 fails only once 0 and 1
  // have finished their all_reduce, which they can only do if they do not
  // wait for device 3's group; device 2, which does, is then aborted.
  std::unique_ptr<MeshRuntime> runtime =
      makeRuntime(MeshSpec({{"data", 2, 1}, {"fsdp", 2, 1}}));
  ASSERT_TRUE(runtime);
  SdCollective op = allReduce(1, {1});
  std::vector<float> sums(4, 0);
  std::atomic<int> done{0};
  absl::Status status = runtime->runOnDevices([&](Device &device) {
    if (device.id() == 3) {
      while (done.load() < 2)
        std::this_thread::yield();
      return absl::ResourceExhaustedError("device 3: out of memory");
    }
    absl::Status result = sumDeviceIds(device, op, &sums[device.id()]);
    if (device.id() < 2)
      ++done;
    return result;
  });
  EXPECT_EQ(status, absl::ResourceExhaustedError("device 3: out of memory"));
  EXPECT_EQ(sums[0], 3);
  EXPECT_EQ(sums[1], 3);
  EXPECT_TRUE(runtime->device(0).error().ok());
  EXPECT_TRUE(absl::IsAborted(runtime->device(2).error()));
}

TEST(MeshRuntimeTest, ManyCollectivesInARow) {
  // Alternating groups, so fast devices run ahead into the next collective
  // while slow ones still read: every result must still be exact.
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(
      MeshSpec({{"a", 2, 1}, {"b", 2, 1}, {"c", 2, 1}}), /*threads=*/1);
  ASSERT_TRUE(runtime);
  std::vector<SdCollective> ops = {allReduce(1, {0}), allReduce(1, {1, 2}),
                                   allReduce(1, {2}), allReduce(1, {0, 1, 2})};
  std::vector<float> finals(8, 0);
  absl::Status status = runtime->runOnDevices([&](Device &device) {
    float value = static_cast<float>(device.id());
    for (int step = 0; step < 200; ++step) {
      float out = 0;
      if (MeshRuntime::api()->collective(toSd(device), &ops[step % 4], &value,
                                         &out) != 0)
        return device.error();
      // Keep the values small and exact.
      value = static_cast<float>(static_cast<int64_t>(out) % 97);
    }
    finals[device.id()] = value;
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  // The same computation, serially.
  MeshSpec mesh = runtime->mesh();
  std::vector<float> values(8);
  for (int64_t d = 0; d < 8; ++d)
    values[d] = static_cast<float>(d);
  for (int step = 0; step < 200; ++step) {
    const SdCollective &op = ops[step % 4];
    std::vector<float> next(8, 0);
    for (int64_t d = 0; d < 8; ++d)
      for (int64_t other = 0; other < 8; ++other) {
        std::vector<int64_t> a = mesh.coordinates(d),
                             b = mesh.coordinates(other);
        for (int32_t i = 0; i < op.num_axes; ++i)
          a[op.axes[i]] = b[op.axes[i]] = 0;
        if (a == b)
          next[d] += values[other];
      }
    for (int64_t d = 0; d < 8; ++d)
      values[d] = static_cast<float>(static_cast<int64_t>(next[d]) % 97);
  }
  EXPECT_EQ(finals, values);
  EXPECT_EQ(runtime->device(5).counters().collectives, 200);
}

//===----------------------------------------------------------------------===//
// The API table
//===----------------------------------------------------------------------===//

TEST(MeshRuntimeApiTest, TableIsComplete) {
  const SdApi *api = MeshRuntime::api();
  EXPECT_EQ(api->abi_version, SD_ABI_VERSION);
  const void *entries[] = {
      reinterpret_cast<const void *>(api->alloc),
      reinterpret_cast<const void *>(api->release),
      reinterpret_cast<const void *>(api->move),
      reinterpret_cast<const void *>(api->axis_index),
      reinterpret_cast<const void *>(api->collective),
      reinterpret_cast<const void *>(api->gemm),
      reinterpret_cast<const void *>(api->transpose),
      reinterpret_cast<const void *>(api->softmax),
      reinterpret_cast<const void *>(api->layer_norm),
      reinterpret_cast<const void *>(api->rms_norm),
      reinterpret_cast<const void *>(api->group_norm),
      reinterpret_cast<const void *>(api->group_norm_bf16),
      reinterpret_cast<const void *>(api->attention),
      reinterpret_cast<const void *>(api->attention_bf16),
      reinterpret_cast<const void *>(api->flash_attention),
      reinterpret_cast<const void *>(api->flash_attention_backward),
      reinterpret_cast<const void *>(api->rng),
      reinterpret_cast<const void *>(api->conv2d),
      reinterpret_cast<const void *>(api->conv2d_bf16),
      reinterpret_cast<const void *>(api->conv2d_input_grad_bf16),
      reinterpret_cast<const void *>(api->conv2d_filter_grad_bf16),
      reinterpret_cast<const void *>(api->trace_begin),
      reinterpret_cast<const void *>(api->trace_end)};
  for (const void *entry : entries)
    EXPECT_NE(entry, nullptr);
}

TEST(MeshRuntimeApiTest, AllocOutOfMemoryReturnsNullAndNamesTheTensor) {
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(
      MeshSpec({{"data", 2, 1}}), 1, /*deviceBudget=*/4096, /*hostBudget=*/0);
  ASSERT_TRUE(runtime);
  const SdApi *api = MeshRuntime::api();
  Device &device = runtime->device(1);
  void *fits = api->alloc(toSd(device), 3000, SD_DEVICE_MEMORY, "%a");
  ASSERT_NE(fits, nullptr);
  EXPECT_TRUE(device.error().ok());
  void *tooBig =
      api->alloc(toSd(device), 2048, SD_DEVICE_MEMORY, "%big = sd.add");
  EXPECT_EQ(tooBig, nullptr);
  EXPECT_EQ(device.error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(device.error().message().find("'%big = sd.add'"), std::string::npos)
      << device.error();
  EXPECT_NE(device.error().message().find("2.00 KiB"), std::string::npos)
      << device.error();
  EXPECT_NE(device.error().message().find("device 1"), std::string::npos)
      << device.error();
  // The first error stays; host memory is a separate, unlimited pool.
  void *host = api->alloc(toSd(device), 1 << 20, SD_HOST_MEMORY, "%h");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(device.pool(SD_HOST_MEMORY).liveBytes(), 1 << 20);
  EXPECT_EQ(device.pool(SD_DEVICE_MEMORY).liveBytes(), 3000);
  api->release(toSd(device), host);
  api->release(toSd(device), fits);
  api->release(toSd(device), nullptr);
  EXPECT_EQ(device.pool(SD_HOST_MEMORY).liveBytes(), 0);
  EXPECT_EQ(device.pool(SD_DEVICE_MEMORY).liveBytes(), 0);
  EXPECT_EQ(device.error().code(), absl::StatusCode::kResourceExhausted);
  // Device 0 was not involved.
  EXPECT_TRUE(runtime->device(0).error().ok());
}

TEST(MeshRuntimeApiTest, AxisIndexIsRowMajorOverTheListedAxes) {
  MeshSpec mesh({{"data", 2, 1}, {"fsdp", 3, 1}, {"tensor", 2, 1}});
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(mesh);
  ASSERT_TRUE(runtime);
  const SdApi *api = MeshRuntime::api();
  const int32_t fsdpData[] = {1, 0}, tensorFsdp[] = {2, 1}, data[] = {0};
  for (int64_t id = 0; id < mesh.numDevices(); ++id) {
    std::vector<int64_t> c = mesh.coordinates(id);
    SdDevice *dev = toSd(runtime->device(id));
    EXPECT_EQ(api->axis_index(dev, fsdpData, 2), c[1] * 2 + c[0]);
    EXPECT_EQ(api->axis_index(dev, tensorFsdp, 2), c[2] * 3 + c[1]);
    EXPECT_EQ(api->axis_index(dev, data, 1), c[0]);
    EXPECT_EQ(api->axis_index(dev, nullptr, 0), 0);
  }
}

TEST(MeshRuntimeApiTest, MoveCopiesBetweenPoolsAndCountsBytes) {
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(
      MeshSpec({{"data", 1, 1}}), 1, /*deviceBudget=*/0, /*hostBudget=*/1000);
  ASSERT_TRUE(runtime);
  const SdApi *api = MeshRuntime::api();
  Device &device = runtime->device(0);
  SdDevice *dev = toSd(device);
  auto *activation = static_cast<float *>(
      api->alloc(dev, 100 * sizeof(float), SD_DEVICE_MEMORY, "%act"));
  ASSERT_NE(activation, nullptr);
  for (int i = 0; i < 100; ++i)
    activation[i] = static_cast<float>(i) * 1.5f;

  void *offloaded = nullptr;
  ASSERT_EQ(api->move(dev, activation, 400, SD_HOST_MEMORY, &offloaded,
                      "%act.offload"),
            0);
  EXPECT_TRUE(device.pool(SD_HOST_MEMORY).owns(offloaded));
  EXPECT_EQ(std::memcmp(offloaded, activation, 400), 0);
  EXPECT_EQ(device.counters().offloadBytes, 400);
  EXPECT_EQ(device.counters().reloadBytes, 0);
  // The source is not released.
  EXPECT_TRUE(device.pool(SD_DEVICE_MEMORY).owns(activation));
  api->release(dev, activation);

  void *reloaded = nullptr;
  ASSERT_EQ(api->move(dev, offloaded, 400, SD_DEVICE_MEMORY, &reloaded,
                      "%act.reload"),
            0);
  EXPECT_TRUE(device.pool(SD_DEVICE_MEMORY).owns(reloaded));
  EXPECT_EQ(static_cast<float *>(reloaded)[99], 148.5f);
  EXPECT_EQ(device.counters().reloadBytes, 400);

  // A second offload does not fit the 1000-byte host budget.
  void *again = nullptr;
  EXPECT_NE(api->move(dev, reloaded, 800, SD_HOST_MEMORY, &again, "%second"),
            0);
  EXPECT_EQ(device.error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(device.error().message().find("'%second'"), std::string::npos);
  EXPECT_EQ(device.counters().offloadBytes, 400);
  api->release(dev, offloaded);
  api->release(dev, reloaded);
  EXPECT_EQ(device.pool(SD_HOST_MEMORY).liveBytes(), 0);
  EXPECT_EQ(device.pool(SD_DEVICE_MEMORY).liveBytes(), 0);
}

TEST(MeshRuntimeApiTest, CollectiveFailureIsRecordedOnTheDevice) {
  std::unique_ptr<MeshRuntime> runtime = makeRuntime(MeshSpec({{"x", 1, 1}}));
  ASSERT_TRUE(runtime);
  SdCollective op = allReduce(4, {3}); // The mesh has one axis.
  float in[4] = {}, out[4] = {};
  Device &device = runtime->device(0);
  EXPECT_EQ(MeshRuntime::api()->collective(toSd(device), &op, in, out), 1);
  EXPECT_EQ(device.error().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(device.error().message().find("sd.all_reduce"), std::string::npos)
      << device.error();
}

} // namespace
