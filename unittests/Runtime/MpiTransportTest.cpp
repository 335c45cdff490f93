//===- MpiTransportTest.cpp - The MPI transport against shared memory -----===//
//
// Runs under mpirun (ctest runs it on 2 and 4 ranks). On every rank, each
// collective runs twice: through MpiTransport on this rank's devices of a
// multi-process mesh, and through the shared-memory transport on the whole
// mesh in this process (the reference). The local devices' results must be
// bitwise the reference's, and their commBytes the same. Operands are random
// floats (f32, and bf16 ones), so a different summation order would show.
//
// Every rank runs every collective whatever its own results: a rank that
// skipped one would leave its peers waiting.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiTransport.h"
#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/Runtime.h"

#include "CollectiveTestUtils.h"

#include "gtest/gtest.h"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <type_traits>

using namespace sd;
using namespace sd::rt;

namespace {

using Shape = std::vector<int64_t>;
using Axes = std::vector<int32_t>;
using Buffers = std::vector<std::vector<float>>;

using testutil::groupSize;

/// One op of a case, with the storage its descriptor points into.
struct Case {
  std::string what;
  SdCollective op;
  std::vector<int64_t> pairs;
  /// Through collective_start / collective_done.
  bool async = false;
};

Case perDimCase(SdCollectiveKind kind, const Shape &in, const Shape &out,
                const std::vector<Axes> &dimAxes, std::string what) {
  Case c{std::move(what), testutil::makeCollective(kind, in, out), {}};
  for (size_t d = 0; d < dimAxes.size(); ++d) {
    c.op.num_dim_axes[d] = static_cast<int32_t>(dimAxes[d].size());
    for (size_t i = 0; i < dimAxes[d].size(); ++i)
      c.op.dim_axes[d][i] = dimAxes[d][i];
  }
  return c;
}

Case groupCase(SdCollectiveKind kind, const Shape &in, const Shape &out,
               const Axes &axes, std::string what) {
  Case c{std::move(what), testutil::makeCollective(kind, in, out), {}};
  c.op.num_axes = static_cast<int32_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i)
    c.op.axes[i] = axes[i];
  return c;
}

std::string axesName(const MeshSpec &mesh, const Axes &axes) {
  std::string text = "[";
  for (int32_t axis : axes)
    text += (text.size() > 1 ? "," : "") + mesh.axes()[axis].name;
  return text + "]";
}

/// Every kind over `axes`: per-dimension kinds with the axes on one
/// dimension and split over two (a box that is not contiguous), all_to_all
/// both ways and in subgroups, a ring shift and a partial permute.
std::vector<Case> casesFor(const MeshSpec &mesh, const Axes &axes) {
  std::vector<Case> cases;
  std::string name = axesName(mesh, axes);
  int64_t n = groupSize(mesh, axes);
  Shape local = {2, 3, 5};
  std::vector<std::vector<Axes>> layouts = {{axes, {}, {}}};
  if (axes.size() >= 2)
    layouts.push_back({{axes[0]}, {}, Axes(axes.begin() + 1, axes.end())});
  else
    layouts.push_back({{}, {}, axes});
  for (const std::vector<Axes> &dims : layouts) {
    Shape global = local;
    for (size_t d = 0; d < dims.size(); ++d)
      global[d] *= groupSize(mesh, dims[d]);
    std::string where = name + (dims[0] == axes ? " on dim 0" : " split");
    cases.push_back(
        perDimCase(SD_ALL_GATHER, local, global, dims, "all_gather " + where));
    cases.push_back(
        perDimCase(SD_ALL_SLICE, global, local, dims, "all_slice " + where));
    cases.push_back(perDimCase(SD_REDUCE_SCATTER, global, local, dims,
                               "reduce_scatter " + where));
  }
  cases.push_back(groupCase(SD_ALL_REDUCE, {3, 5, 7}, {3, 5, 7}, axes,
                            "all_reduce " + name));
  // More elements than chunks, and fewer (some members own nothing).
  cases.push_back(groupCase(SD_ALL_REDUCE, {1000}, {1000}, axes,
                            "all_reduce 1000 " + name));
  cases.push_back(
      groupCase(SD_ALL_REDUCE, {3}, {3}, axes, "all_reduce 3 " + name));
  std::vector<int64_t> subgroups = {0};
  if (n > 2 && n % 2 == 0)
    subgroups.push_back(2);
  for (int64_t m : subgroups) {
    int64_t k = m ? m : n;
    Case forward =
        groupCase(SD_ALL_TO_ALL, {2, 3, 2 * n}, {2 * k, 3, 2 * n / k}, axes,
                  "all_to_all 0<-2 sub " + std::to_string(m) + " " + name);
    forward.op.src_dim = 0;
    forward.op.tgt_dim = 2;
    forward.op.subgroup_size = static_cast<int32_t>(m);
    cases.push_back(forward);
    Case backward =
        groupCase(SD_ALL_TO_ALL, {2 * n, 3, 2}, {2 * n / k, 3, 2 * k}, axes,
                  "all_to_all 2<-0 sub " + std::to_string(m) + " " + name);
    backward.op.src_dim = 2;
    backward.op.tgt_dim = 0;
    backward.op.subgroup_size = static_cast<int32_t>(m);
    cases.push_back(backward);
  }
  for (bool async : {false, true}) {
    std::string mode = async ? " async" : "";
    Case ring = groupCase(SD_COLLECTIVE_PERMUTE, {4, 3}, {4, 3}, axes,
                          "permute ring" + mode + " " + name);
    for (int64_t i = 0; i < n; ++i)
      ring.pairs.insert(ring.pairs.end(), {i, (i + 1) % n});
    ring.async = async;
    cases.push_back(ring);
    // Member 0 is nobody's target and keeps its operand.
    Case partial = groupCase(SD_COLLECTIVE_PERMUTE, {4, 3}, {4, 3}, axes,
                             "permute partial" + mode + " " + name);
    for (int64_t i = 0; i + 1 < n; ++i)
      partial.pairs.insert(partial.pairs.end(), {i, i + 1});
    partial.async = async;
    cases.push_back(partial);
  }
  return cases;
}

/// Cases of a few MiB over `axes`: messages far beyond Open MPI's eager
/// limit, so that its rendezvous protocol (and the packing of boxes that
/// are not contiguous) runs too.
std::vector<Case> largeCasesFor(const MeshSpec &mesh, const Axes &axes) {
  std::vector<Case> cases;
  std::string name = axesName(mesh, axes) + " large";
  int64_t n = groupSize(mesh, axes);
  cases.push_back(
      groupCase(SD_ALL_REDUCE, {300001}, {300001}, axes, "all_reduce " + name));
  std::vector<Axes> split = {Axes(axes.begin(), axes.begin() + 1),
                             {},
                             Axes(axes.begin() + 1, axes.end())};
  Shape local = {8, 3, 2000}, global = local;
  global[0] *= groupSize(mesh, split[0]);
  global[2] *= groupSize(mesh, split[2]);
  cases.push_back(
      perDimCase(SD_ALL_GATHER, local, global, split, "all_gather " + name));
  cases.push_back(perDimCase(SD_REDUCE_SCATTER, global, local, split,
                             "reduce_scatter " + name));
  Case a2a = groupCase(SD_ALL_TO_ALL, {8, 3, 1000 * n}, {8 * n, 3, 1000}, axes,
                       "all_to_all " + name);
  a2a.op.src_dim = 0;
  a2a.op.tgt_dim = 2;
  cases.push_back(a2a);
  Case ring = groupCase(SD_COLLECTIVE_PERMUTE, {200000}, {200000}, axes,
                        "permute ring async " + name);
  for (int64_t i = 0; i < n; ++i)
    ring.pairs.insert(ring.pairs.end(), {i, (i + 1) % n});
  ring.async = true;
  cases.push_back(ring);
  return cases;
}

/// Non-empty axis subsets in mesh order, and each of two or more axes
/// reversed (a listing that is not the mesh order).
std::vector<Axes> axisSubsets(const MeshSpec &mesh) {
  std::vector<Axes> subsets;
  int32_t count = static_cast<int32_t>(mesh.axes().size());
  for (int32_t mask = 1; mask < (1 << count); ++mask) {
    Axes axes;
    for (int32_t axis = 0; axis < count; ++axis)
      if (mask & (1 << axis))
        axes.push_back(axis);
    subsets.push_back(axes);
    if (axes.size() >= 2)
      subsets.push_back(Axes(axes.rbegin(), axes.rend()));
  }
  return subsets;
}

/// The test meshes of a world of `processes` ranks.
std::vector<MeshSpec> meshesFor(int processes) {
  std::vector<MeshSpec> meshes = {MeshSpec({{"x", 1, processes}})};
  if (processes == 2) {
    meshes.push_back(MeshSpec({{"data", 2, 2}, {"fsdp", 2, 1}}));
    meshes.push_back(
        MeshSpec({{"data", 1, 2}, {"fsdp", 2, 1}, {"tensor", 2, 1}}));
  }
  if (processes == 4) {
    meshes.push_back(MeshSpec({{"a", 2, 2}, {"b", 1, 2}}));
    meshes.push_back(MeshSpec({{"data", 1, 2}, {"fsdp", 2, 2}}));
  }
  return meshes;
}

/// A runtime of every device over shared memory, and one of this rank's
/// devices over MPI.
struct Runtimes {
  std::unique_ptr<MeshRuntime> reference, mpi;
};

absl::StatusOr<std::unique_ptr<MeshRuntime>> mpiRuntime(const MeshSpec &mesh) {
  MeshRuntimeOptions options;
  options.mesh = mesh;
  options.threadsPerDevice = 1;
  options.process = mpiWorldRank();
  options.transportFactory = [](const MeshSpec &m) {
    return createMpiTransport(m);
  };
  return MeshRuntime::create(options);
}

Runtimes makeRuntimes(const MeshSpec &mesh) {
  Runtimes runtimes;
  MeshRuntimeOptions options;
  options.mesh = mesh;
  options.threadsPerDevice = 1;
  absl::StatusOr<std::unique_ptr<MeshRuntime>> reference =
      MeshRuntime::create(options);
  EXPECT_TRUE(reference.ok()) << reference.status();
  if (reference.ok())
    runtimes.reference = std::move(*reference);
  absl::StatusOr<std::unique_ptr<MeshRuntime>> mpi = mpiRuntime(mesh);
  EXPECT_TRUE(mpi.ok()) << mpi.status();
  if (mpi.ok())
    runtimes.mpi = std::move(*mpi);
  return runtimes;
}

/// What one run produced, by mesh device id (only the runtime's devices), in
/// buffers of `T` (float or BFloat16, as the op's element type says).
template <typename T> struct TypedRunResult {
  absl::Status status;
  std::vector<std::vector<T>> outputs;
  std::vector<DeviceCounters> counters;
};
using RunResult = TypedRunResult<float>;

/// The f32 of an element, to name it in a failure.
float valueOf(float x) { return x; }
float valueOf(BFloat16 x) { return toFloat(x); }

/// Runs `c` on every device of `runtime` with `inputs[id]`; counters are
/// this run's only.
template <typename T>
TypedRunResult<T> run(MeshRuntime &runtime, const Case &c,
                      const std::vector<std::vector<T>> &inputs) {
  TypedRunResult<T> result;
  int64_t devices = runtime.mesh().numDevices();
  int64_t outElements = 1;
  for (int32_t d = 0; d < c.op.rank; ++d)
    outElements *= c.op.out_shape[d];
  // An element no collective writes.
  T poison;
  if constexpr (std::is_same_v<T, BFloat16>)
    poison = toBFloat16(-12345.0f);
  else
    poison = -12345.0f;
  result.outputs.assign(devices, std::vector<T>(outElements, poison));
  result.counters.assign(devices, DeviceCounters());
  std::vector<DeviceCounters> before(devices);
  for (int64_t i = 0; i < runtime.numDevices(); ++i)
    before[runtime.device(i).id()] = runtime.device(i).counters();
  SdCollective op = c.op;
  op.pairs = c.pairs.data();
  op.num_pairs = static_cast<int32_t>(c.pairs.size() / 2);
  const SdApi *api = MeshRuntime::api();
  result.status = runtime.runOnDevices([&](Device &device) {
    auto *handle = reinterpret_cast<SdDevice *>(&device);
    const T *in = inputs[device.id()].data();
    T *out = result.outputs[device.id()].data();
    int32_t failed = c.async ? api->collective_start(handle, &op, in, out) ||
                                   api->collective_done(handle, &op, out)
                             : api->collective(handle, &op, in, out);
    return failed ? device.error() : absl::OkStatus();
  });
  for (int64_t i = 0; i < runtime.numDevices(); ++i) {
    const Device &device = runtime.device(i);
    DeviceCounters &counters = result.counters[device.id()];
    counters.commBytes =
        runtime.device(i).counters().commBytes - before[device.id()].commBytes;
    counters.collectives = runtime.device(i).counters().collectives -
                           before[device.id()].collectives;
  }
  return result;
}

/// Random operands of every device of `mesh`, the same on every rank (as
/// `T`: bf16 ones are the f32 values rounded).
template <typename T = float>
std::vector<std::vector<T>>
randomInputs(const MeshSpec &mesh, const SdCollective &op, unsigned seed) {
  int64_t elements = 1;
  for (int32_t d = 0; d < op.rank; ++d)
    elements *= op.in_shape[d];
  std::vector<std::vector<T>> inputs;
  for (int64_t id = 0; id < mesh.numDevices(); ++id) {
    std::mt19937 generator(seed * 7919u + static_cast<unsigned>(id));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<T> data(elements);
    for (T &x : data) {
      float value = uniform(generator) * 1e3f;
      if constexpr (std::is_same_v<T, BFloat16>)
        x = toBFloat16(value);
      else
        x = value;
    }
    inputs.push_back(std::move(data));
  }
  return inputs;
}

/// Expects this rank's devices' results and counters bitwise those of the
/// reference.
template <typename T>
void expectMatches(const MeshRuntime &mpiRun, const TypedRunResult<T> &actual,
                   const TypedRunResult<T> &expected, const std::string &what) {
  ASSERT_TRUE(expected.status.ok()) << expected.status << " " << what;
  ASSERT_TRUE(actual.status.ok()) << actual.status << " " << what;
  int64_t first = mpiRun.firstDeviceId();
  for (int64_t id = first; id < first + mpiRun.mesh().devicesPerProcess();
       ++id) {
    const std::vector<T> &got = actual.outputs[id];
    const std::vector<T> &want = expected.outputs[id];
    if (std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) != 0) {
      size_t i = 0;
      while (i < got.size() && std::memcmp(&got[i], &want[i], sizeof(T)) == 0)
        ++i;
      ADD_FAILURE() << what << ": device " << id << " element " << i << " is "
                    << valueOf(got[i]) << ", the shared-memory transport gives "
                    << valueOf(want[i]);
    }
    EXPECT_EQ(actual.counters[id].commBytes, expected.counters[id].commBytes)
        << what << " device " << id;
    EXPECT_EQ(actual.counters[id].collectives, 1) << what << " device " << id;
  }
}

//===----------------------------------------------------------------------===//

/// Runs every kind over every axis subset of every test mesh on `T`
/// elements (`elementType`), through both transports, and expects them
/// bitwise alike; `ran` counts the cases.
template <typename T>
void expectEveryKindMatches(int32_t elementType, int &ran) {
  for (const MeshSpec &mesh : meshesFor(mpiWorldSize())) {
    Runtimes runtimes = makeRuntimes(mesh);
    ASSERT_TRUE(runtimes.reference && runtimes.mpi) << mesh.toString();
    unsigned seed = 1;
    for (const Axes &axes : axisSubsets(mesh)) {
      std::vector<Case> cases = casesFor(mesh, axes);
      // The large ones over every axis only, to keep the test quick.
      if (axes.size() == mesh.axes().size()) {
        std::vector<Case> large = largeCasesFor(mesh, axes);
        cases.insert(cases.end(), large.begin(), large.end());
      }
      for (Case c : cases) {
        c.op.element_type = elementType;
        std::vector<std::vector<T>> inputs =
            randomInputs<T>(mesh, c.op, seed++);
        if (std::getenv("SD_MPI_TEST_VERBOSE"))
          std::fprintf(stderr, "rank %d: %s %s\n", mpiWorldRank(),
                       mesh.toString().c_str(), c.what.c_str());
        TypedRunResult<T> expected = run(*runtimes.reference, c, inputs);
        TypedRunResult<T> actual = run(*runtimes.mpi, c, inputs);
        expectMatches(*runtimes.mpi, actual, expected,
                      mesh.toString() + " " + c.what);
        ++ran;
      }
    }
  }
}

TEST(MpiTransportTest, EveryKindOverEveryAxisSubsetMatchesSharedMemory) {
  int ran = 0;
  expectEveryKindMatches<float>(SD_F32, ran);
  EXPECT_GT(ran, 100);
}

TEST(MpiTransportTest, Bf16EveryKindOverEveryAxisSubsetMatchesSharedMemory) {
  // Copies move the bits; sums are added in f32 in member order and
  // rounded once, on either transport.
  int ran = 0;
  expectEveryKindMatches<BFloat16>(SD_BF16, ran);
  EXPECT_GT(ran, 100);
}

TEST(MpiTransportTest, CrossProcessReductionsReallyAddInMemberOrder) {
  // A sanity check of the test itself: with these operands another order
  // gives other bits, so the equality above is not vacuous.
  // Four or more members (two are commutative); member n is device n.
  MeshSpec mesh({{"x", 1, mpiWorldSize()}, {"y", 2, 1}});
  Case c = groupCase(SD_ALL_REDUCE, {64}, {64}, {0, 1}, "all_reduce");
  Buffers inputs = randomInputs(mesh, c.op, 99);
  std::vector<float> forward(64, 0.0f), backward(64, 0.0f);
  for (int64_t m = 0; m < mesh.numDevices(); ++m)
    for (int i = 0; i < 64; ++i) {
      forward[i] = m == 0 ? inputs[m][i] : forward[i] + inputs[m][i];
      int64_t r = mesh.numDevices() - 1 - m;
      backward[i] = m == 0 ? inputs[r][i] : backward[i] + inputs[r][i];
    }
  EXPECT_NE(std::memcmp(forward.data(), backward.data(), sizeof(float) * 64),
            0);
  Runtimes runtimes = makeRuntimes(mesh);
  ASSERT_TRUE(runtimes.mpi);
  RunResult actual = run(*runtimes.mpi, c, inputs);
  ASSERT_TRUE(actual.status.ok()) << actual.status;
  for (int64_t id : {2 * mpiWorldRank(), 2 * mpiWorldRank() + 1})
    EXPECT_EQ(std::memcmp(actual.outputs[id].data(), forward.data(),
                          sizeof(float) * 64),
              0)
        << "device " << id;
}

TEST(MpiTransportTest, Bf16CrossProcessSumsRoundOnce) {
  // Member 0 holds 1 and every other member 2^-9 (a quarter of bf16's ulp
  // at 1): rounding after each add would keep 1, but the f32 sum, rounded
  // once, is more. Member n is device n.
  MeshSpec mesh({{"x", 1, mpiWorldSize()}, {"y", 2, 1}});
  Case c = groupCase(SD_ALL_REDUCE, {2}, {2}, {0, 1}, "all_reduce");
  c.op.element_type = SD_BF16;
  int64_t n = mesh.numDevices();
  float tiny = std::ldexp(1.0f, -9);
  std::vector<std::vector<BFloat16>> inputs(
      n, {toBFloat16(tiny), toBFloat16(-tiny)});
  inputs[0] = {toBFloat16(1.0f), toBFloat16(-1.0f)};
  float sum = 1.0f;
  for (int64_t m = 1; m < n; ++m)
    sum += tiny;
  std::vector<BFloat16> expected = {toBFloat16(sum), toBFloat16(-sum)};
  EXPECT_NE(expected[0].bits, toBFloat16(1.0f).bits);
  Runtimes runtimes = makeRuntimes(mesh);
  ASSERT_TRUE(runtimes.mpi);
  TypedRunResult<BFloat16> actual = run(*runtimes.mpi, c, inputs);
  ASSERT_TRUE(actual.status.ok()) << actual.status;
  for (int64_t id : {2 * mpiWorldRank(), 2 * mpiWorldRank() + 1})
    EXPECT_EQ(std::memcmp(actual.outputs[id].data(), expected.data(),
                          sizeof(BFloat16) * 2),
              0)
        << "device " << id << ": " << toFloat(actual.outputs[id][0]);
}

TEST(MpiTransportTest, ManyCollectivesInARowKeepTheirTagsApart) {
  // Back-to-back collectives of one runtime, sync and async interleaved,
  // with no barrier between them beyond the transport's own.
  MeshSpec mesh({{"x", 1, mpiWorldSize()}, {"y", 2, 1}});
  Runtimes runtimes = makeRuntimes(mesh);
  ASSERT_TRUE(runtimes.reference && runtimes.mpi);
  std::vector<Case> cases = casesFor(mesh, {0, 1});
  std::vector<Buffers> inputs;
  for (size_t i = 0; i < cases.size(); ++i)
    inputs.push_back(randomInputs(mesh, cases[i].op, 500 + unsigned(i)));
  auto runAll = [&](MeshRuntime &runtime) {
    std::vector<RunResult> results(cases.size());
    const SdApi *api = MeshRuntime::api();
    for (size_t i = 0; i < cases.size(); ++i) {
      int64_t out = 1;
      for (int32_t d = 0; d < cases[i].op.rank; ++d)
        out *= cases[i].op.out_shape[d];
      results[i].outputs.assign(mesh.numDevices(), std::vector<float>(out));
    }
    absl::Status status = runtime.runOnDevices([&](Device &device) {
      auto *handle = reinterpret_cast<SdDevice *>(&device);
      // Start every async permute first, then run the rest, then finish
      // them: their messages overlap the other collectives'.
      std::vector<SdCollective> ops;
      for (const Case &c : cases) {
        ops.push_back(c.op);
        ops.back().pairs = c.pairs.data();
        ops.back().num_pairs = static_cast<int32_t>(c.pairs.size() / 2);
      }
      for (int pass = 0; pass < 3; ++pass)
        for (size_t i = 0; i < cases.size(); ++i) {
          const float *in = inputs[i][device.id()].data();
          float *out = results[i].outputs[device.id()].data();
          int32_t failed = 0;
          if (pass == 0 && cases[i].async)
            failed = api->collective_start(handle, &ops[i], in, out);
          else if (pass == 1 && !cases[i].async)
            failed = api->collective(handle, &ops[i], in, out);
          else if (pass == 2 && cases[i].async)
            failed = api->collective_done(handle, &ops[i], out);
          if (failed)
            return device.error();
        }
      return absl::OkStatus();
    });
    EXPECT_TRUE(status.ok()) << status;
    return results;
  };
  std::vector<RunResult> expected = runAll(*runtimes.reference);
  std::vector<RunResult> actual = runAll(*runtimes.mpi);
  int64_t first = runtimes.mpi->firstDeviceId();
  for (size_t i = 0; i < cases.size(); ++i)
    for (int64_t id = first; id < first + mesh.devicesPerProcess(); ++id)
      EXPECT_EQ(std::memcmp(actual[i].outputs[id].data(),
                            expected[i].outputs[id].data(),
                            actual[i].outputs[id].size() * sizeof(float)),
                0)
          << cases[i].what << " device " << id;
}

TEST(MpiTransportTest, AFailingDeviceReleasesItsLocalPeers) {
  // The first device of every rank fails before an all_reduce over the
  // whole mesh: its local peer, waiting for it, must return, on every rank
  // alike, and the transport must work again after the runtime's reset.
  MeshSpec mesh({{"x", 1, mpiWorldSize()}, {"y", 2, 1}});
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime = mpiRuntime(mesh);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  Case c = groupCase(SD_ALL_REDUCE, {256}, {256}, {0, 1}, "all_reduce");
  Buffers inputs = randomInputs(mesh, c.op, 7);
  std::vector<std::vector<float>> outputs(mesh.numDevices(),
                                          std::vector<float>(256));
  const SdApi *api = MeshRuntime::api();
  absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
    if (device.id() % 2 == 0)
      return absl::DataLossError("injected failure");
    if (api->collective(reinterpret_cast<SdDevice *>(&device), &c.op,
                        inputs[device.id()].data(),
                        outputs[device.id()].data()))
      return device.error();
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  MPI_Barrier(MPI_COMM_WORLD);
  Runtimes reference = makeRuntimes(mesh);
  ASSERT_TRUE(reference.reference);
  expectMatches(**runtime, run(**runtime, c, inputs),
                run(*reference.reference, c, inputs), "after the reset");
}

TEST(MpiTransportTest, AFailingDeviceReleasesALocalPeerWaitingForMessages) {
  // Every rank's odd device fails; every even device has started a permute
  // that receives from the odd device of the previous rank, and waits in MPI
  // for a message that never comes until the abort releases it.
  MeshSpec mesh({{"x", 1, mpiWorldSize()}, {"y", 2, 1}});
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime = mpiRuntime(mesh);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  int64_t n = mesh.numDevices();
  Case c = groupCase(SD_COLLECTIVE_PERMUTE, {100000}, {100000}, {0, 1},
                     "odd to even");
  // Member m is device m: odd device 2r+1 sends to even device 2r+2.
  for (int64_t odd = 1; odd < n; odd += 2)
    c.pairs.insert(c.pairs.end(), {odd, (odd + 1) % n});
  SdCollective op = c.op;
  op.pairs = c.pairs.data();
  op.num_pairs = static_cast<int32_t>(c.pairs.size() / 2);
  Buffers inputs = randomInputs(mesh, op, 11);
  std::vector<std::vector<float>> outputs(n, std::vector<float>(100000));
  const SdApi *api = MeshRuntime::api();
  absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
    auto *handle = reinterpret_cast<SdDevice *>(&device);
    if (device.id() % 2 == 1) {
      // Late enough that the even device is most likely already waiting.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return absl::DataLossError("injected failure");
    }
    float *out = outputs[device.id()].data();
    if (api->collective_start(handle, &op, inputs[device.id()].data(), out) ||
        api->collective_done(handle, &op, out))
      return device.error();
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  MPI_Barrier(MPI_COMM_WORLD);
  // The transport works again: the same permute on every device.
  c.async = true;
  Runtimes reference = makeRuntimes(mesh);
  ASSERT_TRUE(reference.reference);
  expectMatches(**runtime, run(**runtime, c, inputs),
                run(*reference.reference, c, inputs), "after the reset");
}

TEST(MpiTransportTest, WorldSizeMustMatchTheMeshsProcesses) {
  int size = mpiWorldSize();
  MeshSpec mesh({{"x", 1, size + 1}});
  absl::StatusOr<std::unique_ptr<Transport>> transport =
      createMpiTransport(mesh);
  ASSERT_FALSE(transport.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(transport.status()));
  std::string message(transport.status().message());
  EXPECT_NE(message.find("world size " + std::to_string(size)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(std::to_string(size + 1) + " processes"),
            std::string::npos)
      << message;
  // Through the runtime, the same error.
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      mpiRuntime(MeshSpec({{"x", 1, size + 1}}));
  EXPECT_TRUE(absl::IsInvalidArgument(runtime.status())) << runtime.status();
}

TEST(MpiTransportTest, ARuntimeOfOneProcessNeedsATransportThatLeavesIt) {
  MeshRuntimeOptions options;
  options.mesh = MeshSpec({{"x", 1, mpiWorldSize()}});
  options.process = mpiWorldRank();
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(runtime.status())) << runtime.status();
  options.process = mpiWorldSize();
  options.transportFactory = [](const MeshSpec &m) {
    return createMpiTransport(m);
  };
  runtime = MeshRuntime::create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(runtime.status())) << runtime.status();
}

TEST(MpiTransportTest, ARuntimeRunsOnlyItsProcesssDevices) {
  MeshSpec mesh({{"data", 2, mpiWorldSize()}, {"fsdp", 2, 1}});
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime = mpiRuntime(mesh);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_EQ((*runtime)->numDevices(), 4);
  EXPECT_EQ((*runtime)->firstDeviceId(), 4 * mpiWorldRank());
  for (int64_t i = 0; i < (*runtime)->numDevices(); ++i) {
    EXPECT_EQ((*runtime)->device(i).id(), 4 * mpiWorldRank() + i);
    EXPECT_EQ(mesh.processOf((*runtime)->device(i).id()), mpiWorldRank());
  }
}

/// Every rank's bytes in rank order from `group`, three times over: sizes
/// differ per rank, one rank sends nothing, and bytes include NUL.
void expectAllGatherInRankOrder(ProcessGroup &group) {
  int rank = mpiWorldRank();
  std::string mine(rank == 1 ? 0 : 1000 * (rank + 1), static_cast<char>(rank));
  if (!mine.empty())
    mine[0] = '\0';
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<std::vector<std::string>> all = group.allGather(mine);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), static_cast<size_t>(mpiWorldSize()));
    for (int r = 0; r < mpiWorldSize(); ++r) {
      std::string expected(r == 1 ? 0 : 1000 * (r + 1), static_cast<char>(r));
      if (!expected.empty())
        expected[0] = '\0';
      EXPECT_EQ((*all)[r], expected) << "rank " << r << ", round " << round;
    }
  }
}

TEST(MpiProcessGroupTest, AllGatherReturnsEveryRanksBytesInRankOrder) {
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group = createMpiProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  expectAllGatherInRankOrder(**group);
}

TEST(MpiProcessGroupTest, LongStringsGoInRounds) {
  // 7 bytes of each rank a round: 1000 bytes take 143 rounds, 4000 572.
  MpiTransportOptions options;
  options.maxHostRoundBytes = 7;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      createMpiProcessGroup(options);
  ASSERT_TRUE(group.ok()) << group.status();
  expectAllGatherInRankOrder(**group);
  // Nothing from anyone is no round at all.
  absl::StatusOr<std::vector<std::string>> none = (*group)->allGather("");
  ASSERT_TRUE(none.ok()) << none.status();
  for (const std::string &part : *none)
    EXPECT_TRUE(part.empty());
}

TEST(MpiProcessGroupTest, ARuntimeRefusesAGroupOfAnotherShape) {
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      createMpiProcessGroup();
  ASSERT_TRUE(group.ok()) << group.status();
  MeshRuntimeOptions options;
  options.mesh = MeshSpec({{"x", 1, mpiWorldSize()}});
  options.process = (mpiWorldRank() + 1) % mpiWorldSize();
  options.transportFactory = [](const MeshSpec &m) {
    return createMpiTransport(m);
  };
  options.processGroup = std::move(*group);
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(runtime.status())) << runtime.status();
  EXPECT_NE(std::string(runtime.status().message()).find("process group"),
            std::string::npos)
      << runtime.status();
}

} // namespace

int main(int argc, char **argv) {
  if (absl::Status status = initializeMpi(&argc, &argv); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 2;
  }
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  // Every rank exits with the same code, so mpirun reports any failure.
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  finalizeMpi();
  return anyFailed;
}
