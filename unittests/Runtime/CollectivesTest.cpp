//===- CollectivesTest.cpp - Tests for the shared-memory collectives ------===//
//
// Each collective runs through MeshRuntime::api() on real device threads;
// the expected results are built here from global tensors (a simple formula,
// sliced per device by the block rule of SDCollectiveOps.td), never by the
// code under test.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/Runtime.h"

#include "CollectiveTestUtils.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace sd;
using namespace sd::rt;

namespace {

using Shape = std::vector<int64_t>;
using Axes = std::vector<int32_t>;
using Buffers = std::vector<std::vector<float>>;

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t size : shape)
    n *= size;
  return n;
}

/// The multi-index of the row-major element `flat` of `shape`.
Shape unflatten(int64_t flat, const Shape &shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t flatten(const Shape &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

/// A dense row-major f32 tensor.
struct Tensor {
  Shape shape;
  std::vector<float> data;
};

/// A tensor whose element i is f(i).
template <typename Fn> Tensor makeTensor(Shape shape, Fn f) {
  Tensor t{shape, std::vector<float>(numElements(shape))};
  for (int64_t i = 0; i < numElements(shape); ++i)
    t.data[i] = f(i);
  return t;
}

/// Block `blocks[d]` of each dimension d of `t`, split into `counts[d]`.
Tensor block(const Tensor &t, const Shape &counts, const Shape &blocks) {
  Shape shape = t.shape;
  for (size_t d = 0; d < shape.size(); ++d)
    shape[d] /= counts[d];
  Tensor result{shape, std::vector<float>(numElements(shape))};
  for (int64_t i = 0; i < numElements(shape); ++i) {
    Shape index = unflatten(i, shape);
    for (size_t d = 0; d < shape.size(); ++d)
      index[d] += blocks[d] * shape[d];
    result.data[i] = t.data[flatten(index, t.shape)];
  }
  return result;
}

/// Sizes of a mesh's axes.
int64_t axisSize(const MeshSpec &mesh, int32_t axis) {
  return mesh.axes()[axis].size();
}

using testutil::groupSize;

/// The spec's block / member index: row-major over `axes` as listed.
int64_t memberIndex(const MeshSpec &mesh, int64_t device, const Axes &axes) {
  std::vector<int64_t> coords = mesh.coordinates(device);
  int64_t index = 0;
  for (int32_t axis : axes)
    index = index * axisSize(mesh, axis) + coords[axis];
  return index;
}

/// Names a device's group: the device with coordinate 0 on `axes`.
int64_t groupKey(const MeshSpec &mesh, int64_t device, const Axes &axes) {
  std::vector<int64_t> coords = mesh.coordinates(device);
  for (int32_t axis : axes)
    coords[axis] = 0;
  return mesh.deviceId(coords);
}

/// The devices of `device`'s group, in ascending device id.
std::vector<int64_t> groupOf(const MeshSpec &mesh, int64_t device,
                             const Axes &axes) {
  std::vector<int64_t> members;
  for (int64_t other = 0; other < mesh.numDevices(); ++other)
    if (groupKey(mesh, other, axes) == groupKey(mesh, device, axes))
      members.push_back(other);
  return members;
}

/// The sum of `inputs` over `device`'s group, from 0 in ascending device id.
std::vector<float> groupSum(const MeshSpec &mesh, const Buffers &inputs,
                            int64_t device, const Axes &axes) {
  std::vector<float> sum(inputs[device].size(), 0.0f);
  for (int64_t member : groupOf(mesh, device, axes))
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += inputs[member][i];
  return sum;
}

Axes concat(const std::vector<Axes> &perDim) {
  Axes all;
  for (const Axes &axes : perDim)
    all.insert(all.end(), axes.begin(), axes.end());
  return all;
}

SdCollective perDimOp(SdCollectiveKind kind, const Shape &in, const Shape &out,
                      const std::vector<Axes> &dimAxes) {
  SdCollective op = testutil::makeCollective(kind, in, out);
  for (size_t d = 0; d < dimAxes.size(); ++d) {
    op.num_dim_axes[d] = static_cast<int32_t>(dimAxes[d].size());
    for (size_t i = 0; i < dimAxes[d].size(); ++i)
      op.dim_axes[d][i] = dimAxes[d][i];
  }
  return op;
}

SdCollective groupOp(SdCollectiveKind kind, const Shape &in, const Shape &out,
                     const Axes &axes) {
  SdCollective op = testutil::makeCollective(kind, in, out);
  op.num_axes = static_cast<int32_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i)
    op.axes[i] = axes[i];
  return op;
}

/// What a run of one collective on every device produced, in buffers of
/// `T` (float or BFloat16, as the op's element type says).
template <typename T> struct TypedRunResult {
  absl::Status status;
  std::vector<std::vector<T>> outputs;
  std::vector<DeviceCounters> counters;
};
using RunResult = TypedRunResult<float>;

/// An element no collective writes: what an output holds before.
template <typename T> T poison();
template <> float poison<float>() { return -12345.0f; }
template <> BFloat16 poison<BFloat16>() { return toBFloat16(-12345.0f); }

/// Runs `op` on every device of `mesh` with `inputs[device]`.
template <typename T>
TypedRunResult<T> runCollective(const MeshSpec &mesh, const SdCollective &op,
                                const std::vector<std::vector<T>> &inputs,
                                int threadsPerDevice = 1) {
  TypedRunResult<T> result;
  MeshRuntimeOptions options;
  options.mesh = mesh;
  // A runtime refuses more threads than the process's CPUs.
  options.threadsPerDevice = std::min(threadsPerDevice, availableCpus());
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(options);
  if (!runtime.ok()) {
    result.status = runtime.status();
    return result;
  }
  int64_t outElements = 1;
  for (int32_t d = 0; d < op.rank; ++d)
    outElements *= op.out_shape[d];
  result.outputs.assign(mesh.numDevices(),
                        std::vector<T>(outElements, poison<T>()));
  const SdApi *api = MeshRuntime::api();
  result.status = (*runtime)->runOnDevices([&](Device &device) {
    if (api->collective(reinterpret_cast<SdDevice *>(&device), &op,
                        inputs[device.id()].data(),
                        result.outputs[device.id()].data()) != 0)
      return device.error();
    return absl::OkStatus();
  });
  for (int64_t id = 0; id < mesh.numDevices(); ++id)
    result.counters.push_back((*runtime)->device(id).counters());
  return result;
}

/// Test meshes: 2, 4 and 8 devices, a 1-sized axis, and a hybrid mesh whose
/// device ids are process-major rather than row-major.
MeshSpec mesh2() { return MeshSpec({{"x", 2, 1}}); }
MeshSpec mesh4() { return MeshSpec({{"data", 2, 1}, {"fsdp", 2, 1}}); }
MeshSpec mesh1x2() { return MeshSpec({{"data", 1, 1}, {"fsdp", 2, 1}}); }
MeshSpec mesh8() { return MeshSpec({{"a", 2, 1}, {"b", 2, 1}, {"c", 2, 1}}); }
MeshSpec meshHybrid() {
  return MeshSpec({{"data", 1, 2}, {"fsdp", 2, 1}, {"tensor", 2, 1}});
}

/// A per-dimension sharding case: mesh and each dimension's axes.
struct DimCase {
  MeshSpec mesh;
  std::vector<Axes> dimAxes;
};

std::vector<DimCase> dimCases() {
  return {
      {mesh2(), {{0}, {}, {}}},
      {mesh2(), {{}, {}, {0}}},
      {mesh4(), {{0}, {}, {1}}},
      {mesh4(), {{}, {1, 0}, {}}}, // Two axes on one dim, non-mesh order.
      {mesh1x2(), {{0}, {1}, {}}}, // A 1-sized axis.
      {mesh1x2(), {{1, 0}, {}, {}}},
      {mesh8(), {{2, 0}, {}, {1}}},
      {mesh8(), {{}, {0, 1, 2}, {}}},
      {mesh8(), {{1}, {}, {}}}, // Groups of 2 among 8 devices.
      {meshHybrid(), {{0, 2}, {1}, {}}},
      {meshHybrid(), {{}, {}, {2}}},
  };
}

std::string describe(const DimCase &c) {
  std::string text = c.mesh.toString() + " dims";
  for (const Axes &axes : c.dimAxes) {
    text += " [";
    for (int32_t axis : axes)
      text += c.mesh.axes()[axis].name + " ";
    text += "]";
  }
  return text;
}

/// The local block shape used throughout: odd sizes on purpose.
const Shape kLocal = {3, 5, 7};

Shape scaled(const Shape &shape, const Shape &counts) {
  Shape result = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    result[d] *= counts[d];
  return result;
}

Shape countsOf(const DimCase &c) {
  Shape counts;
  for (const Axes &axes : c.dimAxes)
    counts.push_back(groupSize(c.mesh, axes));
  return counts;
}

Shape blocksOf(const DimCase &c, int64_t device) {
  Shape blocks;
  for (const Axes &axes : c.dimAxes)
    blocks.push_back(memberIndex(c.mesh, device, axes));
  return blocks;
}

/// The global tensor of `device`'s group; differs between groups. Values
/// are small integers and halves, so every sum is exact.
Tensor groupGlobal(const DimCase &c, int64_t device, const Shape &shape) {
  int64_t key = groupKey(c.mesh, device, concat(c.dimAxes));
  return makeTensor(shape, [&](int64_t i) {
    return static_cast<float>(key * 10000 + i) * 0.5f;
  });
}

/// Distinct per-device operands of exact small values.
Tensor deviceOperand(int64_t device, const Shape &shape) {
  return makeTensor(shape, [&](int64_t i) {
    return static_cast<float>((device + 1) * (i % 13) - 5) * 0.25f;
  });
}

/// Operands of arbitrary float values, so that the summation order shows.
Tensor randomOperand(int64_t device, const Shape &shape, unsigned seed) {
  std::mt19937 generator(seed * 131 + static_cast<unsigned>(device));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  return makeTensor(shape, [&](int64_t) { return uniform(generator) * 1e3f; });
}

/// One buffer per device of `mesh`: the data of `operand(device)`.
template <typename Fn> Buffers perDevice(const MeshSpec &mesh, Fn operand) {
  Buffers buffers;
  for (int64_t d = 0; d < mesh.numDevices(); ++d)
    buffers.push_back(operand(d).data);
  return buffers;
}

void expectBitwiseEqual(const std::vector<float> &actual,
                        const std::vector<float> &expected,
                        const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(),
                        actual.size() * sizeof(float)),
            0)
      << what;
  for (size_t i = 0; i < actual.size(); ++i)
    if (actual[i] != expected[i]) {
      ADD_FAILURE() << what << ": element " << i << " is " << actual[i]
                    << ", expected " << expected[i];
      return;
    }
}

void expectBitwiseEqual(const std::vector<BFloat16> &actual,
                        const std::vector<BFloat16> &expected,
                        const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    if (actual[i].bits != expected[i].bits) {
      ADD_FAILURE() << what << ": bf16 element " << i << " is "
                    << toFloat(actual[i]) << " (bits " << actual[i].bits
                    << "), expected " << toFloat(expected[i]) << " (bits "
                    << expected[i].bits << ")";
      return;
    }
}

/// Expects the output of each device bitwise equal to `expected(device)`.
template <typename T, typename Fn>
void expectEachDevice(const std::vector<std::vector<T>> &outputs,
                      const std::string &what, Fn expected) {
  for (int64_t d = 0; d < static_cast<int64_t>(outputs.size()); ++d)
    expectBitwiseEqual(outputs[d], expected(d),
                       what + " device " + std::to_string(d));
}

//===----------------------------------------------------------------------===//
// One kind at a time, against global tensors
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, AllGatherAssemblesTheGroupsGlobalTensor) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Buffers inputs = perDevice(c.mesh, [&](int64_t d) {
      return block(groupGlobal(c, d, global), counts, blocksOf(c, d));
    });
    RunResult run = runCollective(
        c.mesh, perDimOp(SD_ALL_GATHER, kLocal, global, c.dimAxes), inputs);
    ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
    expectEachDevice(run.outputs, describe(c),
                     [&](int64_t d) { return groupGlobal(c, d, global).data; });
  }
}

TEST(CollectivesTest, AllSliceKeepsTheDevicesBlock) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Buffers inputs =
        perDevice(c.mesh, [&](int64_t d) { return groupGlobal(c, d, global); });
    RunResult run = runCollective(
        c.mesh, perDimOp(SD_ALL_SLICE, global, kLocal, c.dimAxes), inputs);
    ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
    for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
      expectBitwiseEqual(
          run.outputs[d],
          block(groupGlobal(c, d, global), counts, blocksOf(c, d)).data,
          describe(c) + " device " + std::to_string(d));
      // Local: nothing is sent, but the collective is counted.
      EXPECT_EQ(run.counters[d].commBytes, 0);
      EXPECT_EQ(run.counters[d].collectives, 1);
    }
  }
}

TEST(CollectivesTest, SliceThenGatherRoundTrips) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Buffers replicated = perDevice(c.mesh, [&](int64_t d) {
      return randomOperand(groupKey(c.mesh, d, concat(c.dimAxes)), global, 7);
    });
    RunResult sliced = runCollective(
        c.mesh, perDimOp(SD_ALL_SLICE, global, kLocal, c.dimAxes), replicated);
    ASSERT_TRUE(sliced.status.ok()) << sliced.status;
    RunResult gathered = runCollective(
        c.mesh, perDimOp(SD_ALL_GATHER, kLocal, global, c.dimAxes),
        sliced.outputs);
    ASSERT_TRUE(gathered.status.ok()) << gathered.status;
    expectEachDevice(gathered.outputs, describe(c),
                     [&](int64_t d) { return replicated[d]; });
  }
}

TEST(CollectivesTest, ReduceScatterKeepsTheDevicesBlockOfTheGroupSum) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Buffers inputs =
        perDevice(c.mesh, [&](int64_t d) { return deviceOperand(d, global); });
    RunResult run = runCollective(
        c.mesh, perDimOp(SD_REDUCE_SCATTER, global, kLocal, c.dimAxes), inputs);
    ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
    expectEachDevice(run.outputs, describe(c), [&](int64_t d) {
      Tensor sum{global, groupSum(c.mesh, inputs, d, concat(c.dimAxes))};
      return block(sum, counts, blocksOf(c, d)).data;
    });
  }
}

/// A group-axes case (all_reduce, all_to_all, collective_permute).
struct GroupCase {
  MeshSpec mesh;
  Axes axes;
};

std::vector<GroupCase> groupCases() {
  return {
      {mesh2(), {0}},         {mesh4(), {0}},      {mesh4(), {1}},
      {mesh4(), {1, 0}},      {mesh1x2(), {0}},    {mesh1x2(), {1}},
      {mesh1x2(), {1, 0}},    {mesh8(), {2, 0}},   {mesh8(), {0, 1, 2}},
      {meshHybrid(), {2, 0}}, {meshHybrid(), {1}},
  };
}

std::string describe(const GroupCase &c) {
  std::string text = c.mesh.toString() + " axes [";
  for (int32_t axis : c.axes)
    text += c.mesh.axes()[axis].name + " ";
  return text + "]";
}

/// all_reduce of `local`-shaped operands over `c`: every device gets its
/// group's sum, added in ascending member order (bitwise).
void expectAllReduceSums(const GroupCase &c, const Shape &local) {
  Buffers inputs =
      perDevice(c.mesh, [&](int64_t d) { return deviceOperand(d, local); });
  RunResult run = runCollective(
      c.mesh, groupOp(SD_ALL_REDUCE, local, local, c.axes), inputs);
  ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
  expectEachDevice(run.outputs, describe(c), [&](int64_t d) {
    return groupSum(c.mesh, inputs, d, c.axes);
  });
}

TEST(CollectivesTest, AllReduceSumsTheGroup) {
  for (const GroupCase &c : groupCases())
    expectAllReduceSums(c, kLocal);
}

TEST(CollectivesTest, AllReduceOfLongRowsAddsInMemberOrder) {
  // Rows longer than one summing chunk (and not a multiple of it), over 2,
  // 4 and 8 members.
  for (const GroupCase &c :
       {GroupCase{mesh2(), {0}}, GroupCase{mesh4(), {1, 0}},
        GroupCase{mesh8(), {0, 1, 2}}})
    expectAllReduceSums(c, {3, 5000});
  // Each member's block (the 1/n of the elements it sums for all) several
  // of the transport's 16384-element pieces and a part of one.
  for (const GroupCase &c :
       {GroupCase{mesh2(), {0}}, GroupCase{mesh8(), {2, 0, 1}}})
    expectAllReduceSums(c, {7, 40001});
}

TEST(CollectivesTest, AllReduceOfAScalar) {
  MeshSpec mesh = mesh4();
  Buffers inputs = {{1.5f}, {2.0f}, {4.0f}, {8.0f}};
  RunResult run =
      runCollective(mesh, groupOp(SD_ALL_REDUCE, {}, {}, {1}), inputs);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // Groups over fsdp: devices {0, 1} and {2, 3}.
  EXPECT_EQ(run.outputs[0], std::vector<float>{3.5f});
  EXPECT_EQ(run.outputs[1], std::vector<float>{3.5f});
  EXPECT_EQ(run.outputs[2], std::vector<float>{12.0f});
  EXPECT_EQ(run.outputs[3], std::vector<float>{12.0f});
}

TEST(CollectivesTest, AllToAllMovesShardingFromSrcToTgt) {
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    for (auto [src, tgt] :
         std::vector<std::pair<int32_t, int32_t>>{{0, 2}, {2, 1}}) {
      // The group's global tensor is sharded on src before, on tgt after.
      Shape global = kLocal;
      global[src] *= n;
      global[tgt] *= n;
      Shape before = global, after = global, srcCounts(3, 1), tgtCounts(3, 1);
      before[src] /= n;
      after[tgt] /= n;
      srcCounts[src] = n;
      tgtCounts[tgt] = n;
      Buffers inputs;
      std::vector<Tensor> globals;
      for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
        int64_t key = groupKey(c.mesh, d, c.axes);
        globals.push_back(makeTensor(global, [&](int64_t i) {
          return static_cast<float>(key * 100000 + i);
        }));
        Shape blocks(3, 0);
        blocks[src] = memberIndex(c.mesh, d, c.axes);
        inputs.push_back(block(globals[d], srcCounts, blocks).data);
      }
      SdCollective op = groupOp(SD_ALL_TO_ALL, before, after, c.axes);
      op.src_dim = src;
      op.tgt_dim = tgt;
      RunResult run = runCollective(c.mesh, op, inputs);
      ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
      for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
        Shape blocks(3, 0);
        blocks[tgt] = memberIndex(c.mesh, d, c.axes);
        expectBitwiseEqual(run.outputs[d],
                           block(globals[d], tgtCounts, blocks).data,
                           describe(c) + " device " + std::to_string(d));
      }
    }
  }
}

TEST(CollectivesTest, AllToAllInSubgroupsEqualsAllToAllOverMinorAxes) {
  // On a:2,b:2,c:2 over [a, b, c], subgroups of 2 consecutive members are
  // the groups of [c], of 4 those of [b, c] (Shardy's minor sub-axes).
  MeshSpec mesh = mesh8();
  for (auto [subgroup, minorAxes] :
       std::vector<std::pair<int32_t, Axes>>{{2, {2}}, {4, {1, 2}}}) {
    Shape before = {4, 6, 8}, after = before;
    after[1] *= subgroup;
    after[2] /= subgroup;
    Buffers inputs =
        perDevice(mesh, [&](int64_t d) { return randomOperand(d, before, 7); });
    SdCollective sub = groupOp(SD_ALL_TO_ALL, before, after, {0, 1, 2});
    sub.src_dim = 1;
    sub.tgt_dim = 2;
    sub.subgroup_size = subgroup;
    SdCollective minor = groupOp(SD_ALL_TO_ALL, before, after, minorAxes);
    minor.src_dim = 1;
    minor.tgt_dim = 2;
    RunResult a = runCollective(mesh, sub, inputs);
    RunResult b = runCollective(mesh, minor, inputs);
    ASSERT_TRUE(a.status.ok()) << a.status;
    ASSERT_TRUE(b.status.ok()) << b.status;
    for (int64_t d = 0; d < mesh.numDevices(); ++d) {
      expectBitwiseEqual(a.outputs[d], b.outputs[d],
                         "subgroup " + std::to_string(subgroup) + " device " +
                             std::to_string(d));
      EXPECT_EQ(a.counters[d].commBytes, b.counters[d].commBytes);
    }
  }
  // A subgroup that does not divide the group is refused.
  SdCollective bad = groupOp(SD_ALL_TO_ALL, {4, 6, 8}, {4, 18, 8}, {0, 1, 2});
  bad.src_dim = 1;
  bad.tgt_dim = 2;
  bad.subgroup_size = 3;
  RunResult refused =
      runCollective(mesh, bad, Buffers(8, std::vector<float>(4 * 6 * 8)));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status.message().find("subgroup_size 3"), std::string::npos)
      << refused.status;
}

TEST(CollectivesTest, CollectivePermuteFollowsPairs) {
  // data:2,fsdp:2 with axes [fsdp, data] (not mesh order): member index is
  // fsdp * 2 + data. Member 0 sends to 3, 3 to 1; 0 and 2 are not targeted.
  MeshSpec mesh = mesh4();
  Axes axes = {1, 0};
  std::vector<int64_t> pairs = {0, 3, 3, 1};
  SdCollective op = groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, axes);
  op.num_pairs = 2;
  op.pairs = pairs.data();
  Buffers inputs =
      perDevice(mesh, [&](int64_t d) { return randomOperand(d, kLocal, 3); });
  RunResult run = runCollective(mesh, op, inputs);
  ASSERT_TRUE(run.status.ok()) << run.status;
  auto deviceOfMember = [&](int64_t member) {
    return mesh.deviceId({member % 2, member / 2});
  };
  expectBitwiseEqual(run.outputs[deviceOfMember(3)], inputs[deviceOfMember(0)],
                     "member 3");
  expectBitwiseEqual(run.outputs[deviceOfMember(1)], inputs[deviceOfMember(3)],
                     "member 1");
  expectBitwiseEqual(run.outputs[deviceOfMember(0)], inputs[deviceOfMember(0)],
                     "member 0 keeps its operand");
  expectBitwiseEqual(run.outputs[deviceOfMember(2)], inputs[deviceOfMember(2)],
                     "member 2 keeps its operand");
}

TEST(CollectivesTest, CollectivePermuteRingShiftInEveryGroup) {
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    std::vector<int64_t> pairs;
    for (int64_t i = 0; i < n; ++i) {
      pairs.push_back(i);
      pairs.push_back((i + 1) % n);
    }
    SdCollective op = groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, c.axes);
    op.num_pairs = static_cast<int32_t>(n);
    op.pairs = pairs.data();
    Buffers inputs =
        perDevice(c.mesh, [&](int64_t d) { return deviceOperand(d, kLocal); });
    RunResult run = runCollective(c.mesh, op, inputs);
    ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
    for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
      // The source is the group member with index (self - 1) mod n.
      int64_t want = (memberIndex(c.mesh, d, c.axes) + n - 1) % n;
      int64_t source = -1;
      for (int64_t member : groupOf(c.mesh, d, c.axes))
        if (memberIndex(c.mesh, member, c.axes) == want)
          source = member;
      ASSERT_GE(source, 0);
      expectBitwiseEqual(run.outputs[d], inputs[source],
                         describe(c) + " device " + std::to_string(d));
      int64_t bytes = n > 1 ? numElements(kLocal) * 4 : 0;
      EXPECT_EQ(run.counters[d].commBytes, bytes) << describe(c);
    }
  }
}

//===----------------------------------------------------------------------===//
// Asynchronous collectives (collective_start / collective_done)
//===----------------------------------------------------------------------===//

/// A ring shift by `shift` over the group of `axes`.
struct Ring {
  SdCollective op;
  std::vector<int64_t> pairs;
};
Ring ringShift(const MeshSpec &mesh, const Axes &axes, int64_t shift) {
  Ring ring{groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, axes), {}};
  int64_t n = groupSize(mesh, axes);
  for (int64_t i = 0; i < n; ++i)
    ring.pairs.insert(ring.pairs.end(), {i, ((i + shift) % n + n) % n});
  ring.op.num_pairs = static_cast<int32_t>(n);
  return ring;
}

/// The device of `device`'s group whose member index is `member`.
int64_t groupMember(const MeshSpec &mesh, int64_t device, const Axes &axes,
                    int64_t member) {
  for (int64_t peer : groupOf(mesh, device, axes))
    if (memberIndex(mesh, peer, axes) == member)
      return peer;
  return -1;
}

TEST(CollectivesTest, AsyncPermutesOverlapWorkAndMatchTheBlockingOne) {
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    // Two permutes in flight at once, the ring both ways, finished in the
    // order they were started; odd devices are slow in between, so their
    // peers wait in the done.
    Ring forward = ringShift(c.mesh, c.axes, 1);
    Ring backward = ringShift(c.mesh, c.axes, -1);
    forward.op.pairs = forward.pairs.data();
    backward.op.pairs = backward.pairs.data();
    Buffers k = perDevice(c.mesh, [&](int64_t d) { return deviceOperand(d, kLocal); });
    Buffers v = perDevice(c.mesh, [&](int64_t d) { return randomOperand(d, kLocal, 5); });
    Buffers kOut(c.mesh.numDevices()), vOut(c.mesh.numDevices());
    MeshRuntimeOptions options;
    options.mesh = c.mesh;
    options.threadsPerDevice = 1;
    auto runtime = MeshRuntime::create(options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    const SdApi *api = MeshRuntime::api();
    absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
      auto *dev = reinterpret_cast<SdDevice *>(&device);
      int64_t id = device.id();
      kOut[id].assign(numElements(kLocal), -1.0f);
      vOut[id].assign(numElements(kLocal), -1.0f);
      if (api->collective_start(dev, &forward.op, k[id].data(),
                                kOut[id].data()) ||
          api->collective_start(dev, &backward.op, v[id].data(),
                                vOut[id].data()))
        return device.error();
      if (id % 2 == 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (api->collective_done(dev, &forward.op, kOut[id].data()) ||
          api->collective_done(dev, &backward.op, vOut[id].data()))
        return device.error();
      return absl::OkStatus();
    });
    ASSERT_TRUE(status.ok()) << status << " " << describe(c);
    for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
      int64_t self = memberIndex(c.mesh, d, c.axes);
      expectBitwiseEqual(kOut[d], k[groupMember(c.mesh, d, c.axes, (self + n - 1) % n)],
                         describe(c) + " forward, device " + std::to_string(d));
      expectBitwiseEqual(vOut[d], v[groupMember(c.mesh, d, c.axes, (self + 1) % n)],
                         describe(c) + " backward, device " + std::to_string(d));
      int64_t bytes = n > 1 ? 2 * numElements(kLocal) * 4 : 0;
      EXPECT_EQ((*runtime)->device(d).counters().commBytes, bytes);
    }
  }
}

/// Runs `op` on every device of `mesh` as a start and its done.
template <typename T>
TypedRunResult<T> runAsync(const MeshSpec &mesh, const SdCollective &op,
                           const std::vector<std::vector<T>> &inputs) {
  TypedRunResult<T> result;
  result.outputs.assign(mesh.numDevices(),
                        std::vector<T>(inputs.front().size()));
  auto runtime = MeshRuntime::create({mesh, 1});
  if (!runtime.ok()) {
    result.status = runtime.status();
    return result;
  }
  const SdApi *api = MeshRuntime::api();
  result.status = (*runtime)->runOnDevices([&](Device &device) {
    auto *dev = reinterpret_cast<SdDevice *>(&device);
    T *out = result.outputs[device.id()].data();
    if (api->collective_start(dev, &op, inputs[device.id()].data(), out) ||
        api->collective_done(dev, &op, out))
      return device.error();
    return absl::OkStatus();
  });
  return result;
}

/// Expects `op` as a start and its done bitwise equal to the blocking `op`.
template <typename T>
void expectAsyncEqualsBlocking(const MeshSpec &mesh, const SdCollective &op,
                               const std::vector<std::vector<T>> &inputs) {
  TypedRunResult<T> blocking = runCollective(mesh, op, inputs);
  ASSERT_TRUE(blocking.status.ok()) << blocking.status;
  TypedRunResult<T> async = runAsync(mesh, op, inputs);
  ASSERT_TRUE(async.status.ok()) << async.status;
  for (int64_t d = 0; d < mesh.numDevices(); ++d)
    expectBitwiseEqual(async.outputs[d], blocking.outputs[d],
                       "device " + std::to_string(d));
}

TEST(CollectivesTest, AsyncPermuteWhoseSenderKeepsItsOwnBlock) {
  // Pairs [0, 1] alone: member 0 sends but receives nothing (it keeps its
  // operand), so its done must not count its own read as the take of its
  // block, or member 1 would wait for a post already gone.
  MeshSpec mesh = mesh4();
  std::vector<int64_t> pairs = {0, 1};
  SdCollective op = groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, {1});
  op.num_pairs = 1;
  op.pairs = pairs.data();
  Buffers inputs =
      perDevice(mesh, [&](int64_t d) { return randomOperand(d, kLocal, 4); });
  expectAsyncEqualsBlocking(mesh, op, inputs);
}

TEST(CollectivesTest, AsyncOfOtherKindsRunsAtTheDone) {
  // The transport's default: an all_reduce started and finished equals the
  // blocking one, bitwise.
  MeshSpec mesh = mesh4();
  SdCollective op = groupOp(SD_ALL_REDUCE, kLocal, kLocal, {1, 0});
  Buffers inputs =
      perDevice(mesh, [&](int64_t d) { return randomOperand(d, kLocal, 9); });
  expectAsyncEqualsBlocking(mesh, op, inputs);
}

TEST(CollectivesTest, AsyncPermuteOfAFailedPeerAbortsInsteadOfHanging) {
  // Device 0 starts the ring shift and fails before its done; the peer
  // waiting for it to take its block returns Aborted instead of hanging, and
  // the run reports device 0's error.
  MeshSpec mesh = mesh4();
  Ring ring = ringShift(mesh, {1, 0}, 1);
  ring.op.pairs = ring.pairs.data();
  Buffers inputs =
      perDevice(mesh, [&](int64_t d) { return deviceOperand(d, kLocal); });
  Buffers outputs(mesh.numDevices(), std::vector<float>(numElements(kLocal)));
  auto runtime = MeshRuntime::create({mesh, 1});
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const SdApi *api = MeshRuntime::api();
  std::vector<absl::StatusCode> codes(mesh.numDevices());
  absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
    auto *dev = reinterpret_cast<SdDevice *>(&device);
    int64_t id = device.id();
    // A peer that starts after device 0 failed is refused at the start.
    if (api->collective_start(dev, &ring.op, inputs[id].data(),
                              outputs[id].data()) == 0) {
      if (id == 0)
        return absl::InternalError("device 0 failed mid-step");
      api->collective_done(dev, &ring.op, outputs[id].data());
    }
    codes[id] = device.error().code();
    return device.error();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("device 0 failed"), std::string::npos);
  // Member 3 (device 3) sends to device 0, which never takes its block; the
  // others may finish first if their peers were quicker than the abort.
  EXPECT_EQ(codes[3], absl::StatusCode::kAborted);
  for (int64_t d = 1; d < 3; ++d)
    EXPECT_TRUE(codes[d] == absl::StatusCode::kOk ||
                codes[d] == absl::StatusCode::kAborted)
        << "device " << d << ": " << codes[d];
}

TEST(CollectivesTest, AsyncDoneWithoutStartIsAnError) {
  MeshSpec mesh = mesh2();
  Ring ring = ringShift(mesh, {0}, 1);
  ring.op.pairs = ring.pairs.data();
  std::vector<float> out(numElements(kLocal));
  auto runtime = MeshRuntime::create({mesh, 1});
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  absl::Status status = (*runtime)->runOnDevices([&](Device &device) {
    if (MeshRuntime::api()->collective_done(
            reinterpret_cast<SdDevice *>(&device), &ring.op, out.data()))
      return device.error();
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_NE(status.message().find("was not started"), std::string::npos)
      << status;
}

//===----------------------------------------------------------------------===//
// Equivalences and determinism
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, ReduceScatterEqualsAllReduceThenAllSliceBitwise) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Axes all = concat(c.dimAxes);
    Buffers inputs = perDevice(
        c.mesh, [&](int64_t d) { return randomOperand(d, global, 11); });
    RunResult scattered = runCollective(
        c.mesh, perDimOp(SD_REDUCE_SCATTER, global, kLocal, c.dimAxes), inputs,
        /*threadsPerDevice=*/2);
    // all_reduce lists the axes in reverse: the summation order must not
    // depend on how the axes are listed.
    Axes reversed(all.rbegin(), all.rend());
    RunResult reduced = runCollective(
        c.mesh, groupOp(SD_ALL_REDUCE, global, global, reversed), inputs);
    ASSERT_TRUE(scattered.status.ok() && reduced.status.ok());
    RunResult sliced =
        runCollective(c.mesh, perDimOp(SD_ALL_SLICE, global, kLocal, c.dimAxes),
                      reduced.outputs);
    ASSERT_TRUE(sliced.status.ok()) << sliced.status;
    expectEachDevice(scattered.outputs, describe(c),
                     [&](int64_t d) { return sliced.outputs[d]; });
  }
}

TEST(CollectivesTest, AllToAllEqualsAllGatherThenAllSlice) {
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    int32_t src = 1, tgt = 0;
    Shape before = {3 * n, 5, 7}, gathered = {3 * n, 5 * n, 7},
          after = {3, 5 * n, 7};
    Buffers inputs = perDevice(
        c.mesh, [&](int64_t d) { return randomOperand(d, before, 5); });
    SdCollective op = groupOp(SD_ALL_TO_ALL, before, after, c.axes);
    op.src_dim = src;
    op.tgt_dim = tgt;
    RunResult direct = runCollective(c.mesh, op, inputs);
    RunResult gather = runCollective(
        c.mesh, perDimOp(SD_ALL_GATHER, before, gathered, {{}, c.axes, {}}),
        inputs);
    ASSERT_TRUE(direct.status.ok() && gather.status.ok());
    RunResult slice = runCollective(
        c.mesh, perDimOp(SD_ALL_SLICE, gathered, after, {c.axes, {}, {}}),
        gather.outputs);
    ASSERT_TRUE(slice.status.ok()) << slice.status;
    expectEachDevice(direct.outputs, describe(c),
                     [&](int64_t d) { return slice.outputs[d]; });
  }
}

TEST(CollectivesTest, ReductionsAreBitwiseDeterministic) {
  // Large enough for the OpenMP path, and arbitrary values so that another
  // summation order would show.
  MeshSpec mesh = mesh8();
  Shape shape = {64, 1031};
  Buffers inputs =
      perDevice(mesh, [&](int64_t d) { return randomOperand(d, shape, 1); });
  SdCollective op = groupOp(SD_ALL_REDUCE, shape, shape, {2, 0, 1});
  RunResult first = runCollective(mesh, op, inputs, /*threadsPerDevice=*/1);
  ASSERT_TRUE(first.status.ok()) << first.status;
  // The sum in ascending device order (mesh coordinate order), left to right.
  std::vector<float> expected = inputs[0];
  for (int64_t d = 1; d < mesh.numDevices(); ++d)
    for (size_t i = 0; i < expected.size(); ++i)
      expected[i] += inputs[d][i];
  for (int run = 0; run < 3; ++run) {
    RunResult again = runCollective(mesh, op, inputs, /*threadsPerDevice=*/3);
    ASSERT_TRUE(again.status.ok()) << again.status;
    for (int64_t d = 0; d < mesh.numDevices(); ++d) {
      expectBitwiseEqual(again.outputs[d], first.outputs[0],
                         "run " + std::to_string(run) + " device " +
                             std::to_string(d));
      expectBitwiseEqual(again.outputs[d], expected, "ascending order");
    }
  }
}

//===----------------------------------------------------------------------===//
// bf16 elements: copied bitwise, summed in f32 and rounded once
//===----------------------------------------------------------------------===//

using Bf16Buffers = std::vector<std::vector<BFloat16>>;

/// `op` on bf16 operands and results.
SdCollective bf16(SdCollective op) {
  op.element_type = SD_BF16;
  return op;
}

/// `values` rounded to bf16 (exact for values that are bf16 numbers).
std::vector<BFloat16> toBf16(const std::vector<float> &values) {
  std::vector<BFloat16> result;
  for (float value : values)
    result.push_back(toBFloat16(value));
  return result;
}
Bf16Buffers toBf16(const Buffers &buffers) {
  Bf16Buffers result;
  for (const std::vector<float> &buffer : buffers)
    result.push_back(toBf16(buffer));
  return result;
}

/// Arbitrary bf16 numbers (held as f32, exactly): randomOperand's values
/// rounded to bf16.
Tensor bf16Operand(int64_t device, const Shape &shape, unsigned seed) {
  Tensor t = randomOperand(device, shape, seed);
  for (float &x : t.data)
    x = toFloat(toBFloat16(x));
  return t;
}

/// The members of `device`'s group over `axes` in the order the transports
/// sum them: ascending mesh coordinates on the group's axes in mesh order,
/// however `axes` lists them.
std::vector<int64_t> membersInMeshOrder(const MeshSpec &mesh, int64_t device,
                                        Axes axes) {
  std::sort(axes.begin(), axes.end());
  std::vector<int64_t> members;
  for (int64_t n = 0; n < groupSize(mesh, axes); ++n) {
    std::vector<int64_t> coords = mesh.coordinates(device);
    int64_t rest = n;
    for (size_t i = axes.size(); i-- > 0;) {
      coords[axes[i]] = rest % axisSize(mesh, axes[i]);
      rest /= axisSize(mesh, axes[i]);
    }
    members.push_back(mesh.deviceId(coords));
  }
  return members;
}

/// The f32 sum of `inputs` over `device`'s group: the first member's
/// operand, the others added one by one in the transports' member order.
std::vector<float> f32SumInMemberOrder(const MeshSpec &mesh,
                                       const Buffers &inputs, int64_t device,
                                       const Axes &axes) {
  std::vector<int64_t> members = membersInMeshOrder(mesh, device, axes);
  std::vector<float> sum = inputs[members[0]];
  for (size_t k = 1; k < members.size(); ++k)
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += inputs[members[k]][i];
  return sum;
}

TEST(CollectivesTest, Bf16AllGatherAndAllSliceMoveTheBits) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    auto groupGlobalOf = [&](int64_t d) {
      return bf16Operand(groupKey(c.mesh, d, concat(c.dimAxes)), global, 21);
    };
    Buffers blocks = perDevice(c.mesh, [&](int64_t d) {
      return block(groupGlobalOf(d), counts, blocksOf(c, d));
    });
    TypedRunResult<BFloat16> gathered = runCollective(
        c.mesh, bf16(perDimOp(SD_ALL_GATHER, kLocal, global, c.dimAxes)),
        toBf16(blocks));
    ASSERT_TRUE(gathered.status.ok()) << gathered.status << " " << describe(c);
    expectEachDevice(gathered.outputs, describe(c) + " all_gather",
                     [&](int64_t d) { return toBf16(groupGlobalOf(d).data); });
    TypedRunResult<BFloat16> sliced = runCollective(
        c.mesh, bf16(perDimOp(SD_ALL_SLICE, global, kLocal, c.dimAxes)),
        gathered.outputs);
    ASSERT_TRUE(sliced.status.ok()) << sliced.status << " " << describe(c);
    expectEachDevice(sliced.outputs, describe(c) + " all_slice",
                     [&](int64_t d) { return toBf16(blocks[d]); });
  }
}

TEST(CollectivesTest, Bf16ReduceScatterSumsInF32AndRoundsOnce) {
  for (const DimCase &c : dimCases()) {
    Shape counts = countsOf(c), global = scaled(kLocal, counts);
    Buffers inputs = perDevice(
        c.mesh, [&](int64_t d) { return bf16Operand(d, global, 13); });
    TypedRunResult<BFloat16> run = runCollective(
        c.mesh, bf16(perDimOp(SD_REDUCE_SCATTER, global, kLocal, c.dimAxes)),
        toBf16(inputs), /*threadsPerDevice=*/2);
    ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
    expectEachDevice(run.outputs, describe(c), [&](int64_t d) {
      Tensor sum{global,
                 f32SumInMemberOrder(c.mesh, inputs, d, concat(c.dimAxes))};
      return toBf16(block(sum, counts, blocksOf(c, d)).data);
    });
  }
}

/// bf16 all_reduce of `local`-shaped operands over `c`: every device gets
/// its group's f32 sum in member order, rounded once.
void expectBf16AllReduceSums(const GroupCase &c, const Shape &local,
                             int threadsPerDevice) {
  Buffers inputs =
      perDevice(c.mesh, [&](int64_t d) { return bf16Operand(d, local, 17); });
  TypedRunResult<BFloat16> run =
      runCollective(c.mesh, bf16(groupOp(SD_ALL_REDUCE, local, local, c.axes)),
                    toBf16(inputs), threadsPerDevice);
  ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
  expectEachDevice(run.outputs, describe(c), [&](int64_t d) {
    return toBf16(f32SumInMemberOrder(c.mesh, inputs, d, c.axes));
  });
}

TEST(CollectivesTest, Bf16AllReduceSumsInF32AndRoundsOnce) {
  for (const GroupCase &c : groupCases())
    expectBf16AllReduceSums(c, kLocal, 1);
  // Rows of several summing chunks, and enough elements for the OpenMP
  // path; a scalar.
  for (const GroupCase &c :
       {GroupCase{mesh2(), {0}}, GroupCase{mesh4(), {1, 0}},
        GroupCase{mesh8(), {0, 1, 2}}}) {
    expectBf16AllReduceSums(c, {3, 5000}, 1);
    expectBf16AllReduceSums(c, {8, 4100}, 3);
    expectBf16AllReduceSums(c, {}, 1);
  }
}

TEST(CollectivesTest, Bf16SumsRoundOnceNotAfterEachAdd) {
  // Four members (devices 0..3 in member order). Rounding after each add
  // would keep 1 and 256; the f32 sums 1 + 3 * 2^-9 and 259 round once, to
  // 1 + 2^-7 and 260 (a tie, to even).
  MeshSpec mesh = mesh4();
  float tiny = std::ldexp(1.0f, -9);
  Buffers inputs = {{1.0f, 256.0f, -1.0f, 0.5f},
                    {tiny, 1.0f, -tiny, 0.25f},
                    {tiny, 1.0f, -tiny, 0.125f},
                    {tiny, 1.0f, -tiny, 0.0625f}};
  std::vector<float> expected = {1.0078125f, 260.0f, -1.0078125f, 0.9375f};
  // A check of the test: rounding after each add gives other bits.
  for (int i = 0; i < 2; ++i) {
    BFloat16 perAdd = toBFloat16(inputs[0][i]);
    for (int64_t d = 1; d < 4; ++d)
      perAdd = toBFloat16(toFloat(perAdd) + inputs[d][i]);
    EXPECT_NE(perAdd.bits, toBFloat16(expected[i]).bits) << "element " << i;
  }
  TypedRunResult<BFloat16> reduced = runCollective(
      mesh, bf16(groupOp(SD_ALL_REDUCE, {4}, {4}, {0, 1})), toBf16(inputs));
  ASSERT_TRUE(reduced.status.ok()) << reduced.status;
  expectEachDevice(reduced.outputs, "all_reduce",
                   [&](int64_t) { return toBf16(expected); });
  // reduce_scatter: device d keeps element d.
  TypedRunResult<BFloat16> scattered =
      runCollective(mesh, bf16(perDimOp(SD_REDUCE_SCATTER, {4}, {1}, {{0, 1}})),
                    toBf16(inputs));
  ASSERT_TRUE(scattered.status.ok()) << scattered.status;
  expectEachDevice(scattered.outputs, "reduce_scatter", [&](int64_t d) {
    return toBf16(std::vector<float>{expected[d]});
  });
}

TEST(CollectivesTest, Bf16AllToAllMovesTheBits) {
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    for (auto [src, tgt] :
         std::vector<std::pair<int32_t, int32_t>>{{0, 2}, {2, 1}}) {
      Shape global = kLocal;
      global[src] *= n;
      global[tgt] *= n;
      Shape before = global, after = global, srcCounts(3, 1), tgtCounts(3, 1);
      before[src] /= n;
      after[tgt] /= n;
      srcCounts[src] = n;
      tgtCounts[tgt] = n;
      Buffers inputs;
      std::vector<Tensor> globals;
      for (int64_t d = 0; d < c.mesh.numDevices(); ++d) {
        globals.push_back(bf16Operand(groupKey(c.mesh, d, c.axes), global, 3));
        Shape blocks(3, 0);
        blocks[src] = memberIndex(c.mesh, d, c.axes);
        inputs.push_back(block(globals[d], srcCounts, blocks).data);
      }
      SdCollective op = bf16(groupOp(SD_ALL_TO_ALL, before, after, c.axes));
      op.src_dim = src;
      op.tgt_dim = tgt;
      TypedRunResult<BFloat16> run = runCollective(c.mesh, op, toBf16(inputs));
      ASSERT_TRUE(run.status.ok()) << run.status << " " << describe(c);
      expectEachDevice(run.outputs, describe(c), [&](int64_t d) {
        Shape blocks(3, 0);
        blocks[tgt] = memberIndex(c.mesh, d, c.axes);
        return toBf16(block(globals[d], tgtCounts, blocks).data);
      });
    }
  }
}

TEST(CollectivesTest, Bf16PermutesMoveTheBits) {
  // A ring shift, and a chain in which member 0 is nobody's target (it
  // keeps its operand), each blocking and as a start and its done.
  for (const GroupCase &c : groupCases()) {
    int64_t n = groupSize(c.mesh, c.axes);
    Buffers inputs =
        perDevice(c.mesh, [&](int64_t d) { return bf16Operand(d, kLocal, 8); });
    for (bool ring : {true, false}) {
      std::vector<int64_t> pairs;
      for (int64_t i = 0; i < (ring ? n : n - 1); ++i)
        pairs.insert(pairs.end(), {i, (i + 1) % n});
      SdCollective op =
          bf16(groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, c.axes));
      op.num_pairs = static_cast<int32_t>(pairs.size() / 2);
      op.pairs = pairs.data();
      auto expected = [&](int64_t d) {
        int64_t self = memberIndex(c.mesh, d, c.axes);
        int64_t source = ring || self > 0 ? (self + n - 1) % n : self;
        return toBf16(inputs[groupMember(c.mesh, d, c.axes, source)]);
      };
      std::string what = describe(c) + (ring ? " ring" : " chain");
      TypedRunResult<BFloat16> blocking =
          runCollective(c.mesh, op, toBf16(inputs));
      ASSERT_TRUE(blocking.status.ok()) << blocking.status << " " << what;
      expectEachDevice(blocking.outputs, what, expected);
      TypedRunResult<BFloat16> async = runAsync(c.mesh, op, toBf16(inputs));
      ASSERT_TRUE(async.status.ok()) << async.status << " " << what;
      expectEachDevice(async.outputs, what + " async", expected);
    }
  }
}

TEST(CollectivesTest, Bf16CommBytesAreHalfOfF32) {
  // The f32 cases of CommBytesMatchTheCostModel, with sizes whose bf16
  // bytes still divide into the group's chunks.
  MeshSpec mesh = mesh4();
  std::vector<int64_t> ring = {0, 1, 1, 2, 2, 3, 3, 0};
  SdCollective permute = groupOp(SD_COLLECTIVE_PERMUTE, kLocal, kLocal, {0, 1});
  permute.num_pairs = 4;
  permute.pairs = ring.data();
  SdCollective toAll = groupOp(SD_ALL_TO_ALL, {12, 4, 7}, {48, 1, 7}, {0, 1});
  toAll.src_dim = 0;
  toAll.tgt_dim = 1;
  struct Kind {
    std::string what;
    SdCollective op;
    int64_t f32Bytes;
  };
  std::vector<Kind> kinds = {
      {"all_gather",
       perDimOp(SD_ALL_GATHER, {3, 5, 7}, {12, 5, 7}, {{0, 1}, {}, {}}), 1260},
      {"reduce_scatter",
       perDimOp(SD_REDUCE_SCATTER, {12, 5, 7}, {3, 5, 7}, {{0, 1}, {}, {}}),
       1260},
      {"all_reduce", groupOp(SD_ALL_REDUCE, {4, 5, 7}, {4, 5, 7}, {0, 1}),
       2 * 3 * 140},
      {"all_to_all", toAll, 3 * 12 * 4 * 7},
      {"collective_permute", permute, 420},
  };
  for (const Kind &kind : kinds) {
    int64_t elements = 1;
    for (int32_t d = 0; d < kind.op.rank; ++d)
      elements *= kind.op.in_shape[d];
    Buffers inputs(4, std::vector<float>(elements, 1.0f));
    RunResult f32 = runCollective(mesh, kind.op, inputs);
    TypedRunResult<BFloat16> half =
        runCollective(mesh, bf16(kind.op), toBf16(inputs));
    ASSERT_TRUE(f32.status.ok()) << f32.status << " " << kind.what;
    ASSERT_TRUE(half.status.ok()) << half.status << " " << kind.what;
    for (int64_t d = 0; d < 4; ++d) {
      EXPECT_EQ(f32.counters[d].commBytes, kind.f32Bytes) << kind.what;
      EXPECT_EQ(half.counters[d].commBytes, kind.f32Bytes / 2) << kind.what;
      EXPECT_EQ(half.counters[d].collectives, 1) << kind.what;
    }
  }
}

//===----------------------------------------------------------------------===//
// Communication counters and bad descriptors
//===----------------------------------------------------------------------===//

TEST(CollectivesTest, CommBytesMatchTheCostModel) {
  // 4 devices in one group, local block 3x5x7 (420 bytes): ring formulas
  // of sd/Analysis/CostModel.cpp with S and N of lib/Analysis/CostModels.cpp.
  MeshSpec mesh = mesh4();
  Buffers big(4, std::vector<float>(4 * 105, 1.0f));
  Buffers small(4, std::vector<float>(105, 1.0f));
  Shape local = {3, 5, 7}, global = {12, 5, 7};
  std::vector<Axes> dims = {{0, 1}, {}, {}};

  // all_gather: S = gathered 1680 B, (N - 1) * ceil(S / N) = 3 * 420.
  RunResult gather =
      runCollective(mesh, perDimOp(SD_ALL_GATHER, local, global, dims), small);
  // reduce_scatter: S = operand 1680 B, 3 * 420.
  RunResult scatter = runCollective(
      mesh, perDimOp(SD_REDUCE_SCATTER, global, local, dims), big);
  // all_reduce: 2 * (N - 1) * ceil(420 / 4) = 6 * 105.
  RunResult reduce =
      runCollective(mesh, groupOp(SD_ALL_REDUCE, local, local, {0, 1}), small);
  // all_reduce over 2 of 4: 2 * 1 * 210.
  RunResult reduceHalf =
      runCollective(mesh, groupOp(SD_ALL_REDUCE, local, local, {1}), small);
  // all_to_all: S = operand 1680 B, 3 * 420.
  SdCollective toAll = groupOp(SD_ALL_TO_ALL, {12, 4, 7}, {48, 1, 7}, {0, 1});
  toAll.src_dim = 0;
  toAll.tgt_dim = 1;
  Buffers toAllInputs(4, std::vector<float>(12 * 4 * 7, 1.0f));
  RunResult allToAll = runCollective(mesh, toAll, toAllInputs);
  // A permute that moves nothing sends nothing.
  std::vector<int64_t> identity = {0, 0, 1, 1};
  SdCollective still = groupOp(SD_COLLECTIVE_PERMUTE, local, local, {1});
  still.num_pairs = 2;
  still.pairs = identity.data();
  RunResult stay = runCollective(mesh, still, small);

  for (const RunResult *run :
       {&gather, &scatter, &reduce, &reduceHalf, &allToAll, &stay})
    ASSERT_TRUE(run->status.ok()) << run->status;
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ(gather.counters[d].commBytes, 1260);
    EXPECT_EQ(scatter.counters[d].commBytes, 1260);
    EXPECT_EQ(reduce.counters[d].commBytes, 630);
    EXPECT_EQ(reduceHalf.counters[d].commBytes, 420);
    EXPECT_EQ(allToAll.counters[d].commBytes, 3 * 12 * 4 * 7);
    EXPECT_EQ(stay.counters[d].commBytes, 0);
    EXPECT_EQ(gather.counters[d].collectives, 1);
  }
  // A group of one sends nothing.
  RunResult alone = runCollective(
      mesh1x2(), groupOp(SD_ALL_REDUCE, local, local, {0}), small);
  ASSERT_TRUE(alone.status.ok()) << alone.status;
  EXPECT_EQ(alone.counters[0].commBytes, 0);
  // Ceiling division: 7 floats over 2 devices (28 B -> chunks of 14 B).
  RunResult odd =
      runCollective(mesh2(), perDimOp(SD_ALL_GATHER, {7}, {14}, {{0}}),
                    Buffers(2, std::vector<float>(7, 1.0f)));
  ASSERT_TRUE(odd.status.ok()) << odd.status;
  EXPECT_EQ(odd.counters[1].commBytes, 28);
  // 3 floats gathered over 4: S = 48 B, 3 * 12.
  RunResult three =
      runCollective(mesh, perDimOp(SD_ALL_GATHER, {3}, {12}, {{1, 0}}),
                    Buffers(4, std::vector<float>(3, 1.0f)));
  ASSERT_TRUE(three.status.ok()) << three.status;
  EXPECT_EQ(three.counters[2].commBytes, 36);
}

TEST(CollectivesTest, BadDescriptorsAreInvalidArguments) {
  MeshSpec mesh = mesh4();
  Buffers inputs(4, std::vector<float>(105 * 4, 0.0f));
  // The result shape does not follow from the operand's.
  RunResult wrongShape = runCollective(
      mesh, perDimOp(SD_ALL_GATHER, {3, 5, 7}, {3, 5, 7}, {{0}, {}, {}}),
      inputs);
  EXPECT_EQ(wrongShape.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrongShape.status.message().find("test collective"),
            std::string::npos)
      << wrongShape.status;
  // An axis the mesh does not have.
  RunResult badAxis =
      runCollective(mesh, groupOp(SD_ALL_REDUCE, {3}, {3}, {2}), inputs);
  EXPECT_EQ(badAxis.status.code(), absl::StatusCode::kInvalidArgument);
  // A pair naming a member outside the group.
  std::vector<int64_t> pairs = {0, 2};
  SdCollective op = groupOp(SD_COLLECTIVE_PERMUTE, {3}, {3}, {0});
  op.num_pairs = 1;
  op.pairs = pairs.data();
  RunResult badPair = runCollective(mesh, op, inputs);
  EXPECT_EQ(badPair.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(badPair.status.message().find("[0, 2]"), std::string::npos)
      << badPair.status;
  // An element type the runtime does not know.
  SdCollective unknown = groupOp(SD_ALL_REDUCE, {3}, {3}, {0});
  unknown.element_type = 7;
  RunResult unknownType = runCollective(mesh, unknown, inputs);
  EXPECT_EQ(unknownType.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknownType.status.message().find("unknown element type 7"),
            std::string::npos)
      << unknownType.status;
}

} // namespace
