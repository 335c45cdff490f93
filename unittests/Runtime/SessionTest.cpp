//===- SessionTest.cpp - Tests for training sessions ----------------------===//
//
// Sessions here run tiny hand-written device programs that, like the ones
// `sd-lower-to-openmp` emits, embed the text of ProgramABI.h. They are
// compiled once per test suite into a temporary cache directory.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Session.h"
#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sd::rt {
namespace {

//===----------------------------------------------------------------------===//
// copyBlock
//===----------------------------------------------------------------------===//

/// Every device's coordinates on a mesh of `axisSizes`, row-major.
std::vector<std::vector<int64_t>>
allCoordinates(const std::vector<int64_t> &axisSizes) {
  std::vector<std::vector<int64_t>> all;
  std::vector<int64_t> coords(axisSizes.size(), 0);
  while (true) {
    all.push_back(coords);
    size_t a = axisSizes.size();
    while (a > 0) {
      --a;
      if (++coords[a] < axisSizes[a])
        break;
      coords[a] = 0;
      if (a == 0)
        return all;
    }
    if (axisSizes.empty())
      return all;
  }
}

ArgumentSpec blockSpec(std::vector<int64_t> globalShape,
                       std::vector<int64_t> localShape,
                       std::vector<std::vector<int32_t>> dimAxes,
                       std::vector<int64_t> axisSizes) {
  ArgumentSpec spec;
  spec.name = "t";
  spec.globalShape = std::move(globalShape);
  spec.localShape = std::move(localShape);
  spec.dimAxes = std::move(dimAxes);
  spec.axisSizes = std::move(axisSizes);
  return spec;
}

/// Scatters 0, 1, 2, ... of `spec`'s global shape to every device's block,
/// gathers the blocks into a global tensor filled with NaN, and checks that
/// it comes back bitwise. Returns the blocks in device (row-major) order.
std::vector<std::vector<float>> roundTrip(const ArgumentSpec &spec) {
  std::vector<float> global(numElements(spec.globalShape));
  for (size_t i = 0; i < global.size(); ++i)
    global[i] = static_cast<float>(i);
  std::vector<float> gathered(global.size(),
                              std::numeric_limits<float>::quiet_NaN());
  std::vector<std::vector<float>> blocks;
  for (const std::vector<int64_t> &coords : allCoordinates(spec.axisSizes)) {
    std::vector<float> local(numElements(spec.localShape), -1.0f);
    copyBlock(spec, coords, global.data(), local.data(), /*toGlobal=*/false);
    copyBlock(spec, coords, gathered.data(), local.data(), /*toGlobal=*/true);
    blocks.push_back(std::move(local));
  }
  EXPECT_EQ(std::memcmp(gathered.data(), global.data(),
                        global.size() * sizeof(float)),
            0);
  return blocks;
}

TEST(CopyBlockTest, DimensionSplitOverTwoAxesInNonMeshOrder) {
  // Mesh x:2, y:3, z:2; [4, 12, 3] with dimension 0 over z, dimension 1 over
  // (y, x) (y major), dimension 2 replicated.
  ArgumentSpec spec =
      blockSpec({4, 12, 3}, {2, 2, 3}, {{2}, {1, 0}, {}}, {2, 3, 2});
  std::vector<std::vector<float>> blocks = roundTrip(spec);
  ASSERT_EQ(blocks.size(), 12u);
  // Device (x=1, y=2, z=1) is row-major index 1*6 + 2*2 + 1 = 11: rows from
  // 2 (z=1), columns from (y*2 + x) * 2 = 10.
  const std::vector<float> &block = blocks[11];
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k)
        EXPECT_EQ(block[(i * 2 + j) * 3 + k],
                  static_cast<float>(((2 + i) * 12 + 10 + j) * 3 + k))
            << i << "," << j << "," << k;
  EXPECT_EQ(block.front(), 102.0f);
  EXPECT_EQ(block.back(), 143.0f);
  // Device (x=1, y=0, z=0), index 6: rows 0-1, columns (0*2 + 1) * 2 = 2.
  EXPECT_EQ(blocks[6][0], 6.0f);
  EXPECT_EQ(blocks[6][3], 9.0f);
  // Devices that differ only in z hold different rows of the same columns:
  // (x=0, y=1, z=0) and (x=0, y=1, z=1) are indices 2 and 3.
  EXPECT_EQ(blocks[2][0], static_cast<float>((0 * 12 + 4) * 3));
  EXPECT_EQ(blocks[3][0], static_cast<float>((2 * 12 + 4) * 3));
}

TEST(CopyBlockTest, TwoAxisMeshWithAReplicatedDimension) {
  // Mesh a:2, b:3; [6, 4] with dimension 0 over (b, a), dimension 1
  // replicated: device (a, b) holds row b*2 + a.
  ArgumentSpec spec = blockSpec({6, 4}, {1, 4}, {{1, 0}, {}}, {2, 3});
  std::vector<std::vector<float>> blocks = roundTrip(spec);
  ASSERT_EQ(blocks.size(), 6u);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      EXPECT_EQ(blocks[a * 3 + b],
                (std::vector<float>{static_cast<float>((b * 2 + a) * 4),
                                    static_cast<float>((b * 2 + a) * 4 + 1),
                                    static_cast<float>((b * 2 + a) * 4 + 2),
                                    static_cast<float>((b * 2 + a) * 4 + 3)}))
          << "a=" << a << " b=" << b;
}

TEST(CopyBlockTest, FullyReplicatedAndRankZeroTensors) {
  ArgumentSpec replicated = blockSpec({2, 3}, {2, 3}, {{}, {}}, {2, 3});
  for (const std::vector<float> &block : roundTrip(replicated))
    EXPECT_EQ(block, (std::vector<float>{0, 1, 2, 3, 4, 5}));

  ArgumentSpec scalar = blockSpec({}, {}, {}, {2, 3});
  std::vector<float> global = {42.5f};
  float gathered = 0;
  for (const std::vector<int64_t> &coords : allCoordinates({2, 3})) {
    float local = 0;
    copyBlock(scalar, coords, global.data(), &local, /*toGlobal=*/false);
    EXPECT_EQ(local, 42.5f);
    copyBlock(scalar, coords, &gathered, &local, /*toGlobal=*/true);
    EXPECT_EQ(gathered, 42.5f);
  }
}

//===----------------------------------------------------------------------===//
// TrainingSession
//===----------------------------------------------------------------------===//

using ::sd::rt::testutil::compileAndLoad;
using ::sd::rt::testutil::programText;
using ::sd::rt::testutil::SuiteTempDirTest;

/// A step taking (w: `localSize` floats, step: scalar) and returning (loss,
/// w - 1 in place). The loss is the sum of the device's block of w plus
/// 1000 × step, so devices disagree. At step 13 the program asks for 1 GiB
/// first, and fails when that is refused.
std::string stepBody(int localSize) {
  return R"(
extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results) {
  float *w = (float *)args[0];
  float step = *(const float *)args[1];
  if (step == 13.0f &&
      !api->alloc(dev, (int64_t)1 << 30, SD_DEVICE_MEMORY, "%huge = test"))
    return 1;
  float *loss = (float *)api->alloc(dev, sizeof(float), SD_DEVICE_MEMORY,
                                    "%loss = test");
  if (!loss)
    return 1;
  float sum = 0.0f;
  for (int i = 0; i < )" +
         std::to_string(localSize) + R"(; ++i) {
    sum += w[i];
    w[i] -= 1.0f;
  }
  *loss = sum + 1000.0f * step;
  results[0] = loss;
  results[1] = w;
  return 0;
}
)";
}

/// Writes the device's index on mesh axis 0 into its replica of the three
/// floats of args[0] (donated), and returns a zero loss.
const char *kDivergingBody = R"(
extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results) {
  float *w = (float *)args[0];
  int32_t axis = 0;
  float index = (float)api->axis_index(dev, &axis, 1);
  for (int i = 0; i < 3; ++i)
    w[i] = index;
  float *loss = (float *)api->alloc(dev, sizeof(float), SD_DEVICE_MEMORY,
                                    "%loss = test");
  if (!loss)
    return 1;
  *loss = 0.0f;
  results[0] = loss;
  results[1] = w;
  return 0;
}
)";

/// Programs compiled once per suite, into a cache under `root`.
class SessionTest : public SuiteTempDirTest<SessionTest> {
protected:
  /// Compiles and loads the ABI header followed by `body`, a step of two f32
  /// arguments and two f32 results.
  static std::unique_ptr<LoadedProgram> load(const std::string &body) {
    return compileAndLoad(programText(body, /*numArgs=*/2, /*numResults=*/2),
                          *root + "/cache");
  }

  static MeshRuntimeOptions meshOptions(int64_t devices, int64_t budget = 0) {
    MeshRuntimeOptions options;
    options.mesh = MeshSpec({MeshAxis{"x", devices, 1}});
    options.threadsPerDevice = 1;
    options.deviceMemoryBudget = budget;
    return options;
  }

  /// (w [4] split over x on `devices` devices, step); (loss, w donated).
  static ProgramSpec stepSpec(int64_t devices, std::string name = "w") {
    ArgumentSpec w;
    w.name = std::move(name);
    w.kind = ArgumentKind::Parameter;
    w.globalShape = {4};
    w.localShape = {4 / devices};
    w.dimAxes = {{0}};
    ArgumentSpec step;
    step.name = "step";
    step.kind = ArgumentKind::Step;
    ProgramSpec spec;
    spec.arguments = {w, step};
    spec.resultAliases = {-1, 0};
    spec.lossResult = 0;
    return spec;
  }

  /// A session of the step program on `devices` devices, with w = 1, 2, 3, 4.
  static std::unique_ptr<TrainingSession> stepSession(int64_t devices,
                                                      int64_t budget = 0) {
    std::unique_ptr<LoadedProgram> program =
        load(stepBody(static_cast<int>(4 / devices)));
    if (!program)
      return nullptr;
    absl::StatusOr<std::unique_ptr<TrainingSession>> session =
        TrainingSession::create(meshOptions(devices, budget), stepSpec(devices),
                                std::move(program));
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok())
      return nullptr;
    absl::Status status = (*session)->setArguments(initialArguments());
    EXPECT_TRUE(status.ok()) << status;
    return std::move(*session);
  }

  static std::vector<HostTensor> initialArguments() {
    return {{1, 2, 3, 4}, {0}};
  }

  /// create()'s error for `spec` on x:2 (no program is needed to reject it).
  static absl::Status createError(ProgramSpec spec) {
    absl::StatusOr<std::unique_ptr<TrainingSession>> session =
        TrainingSession::create(meshOptions(2), std::move(spec), nullptr);
    EXPECT_FALSE(session.ok());
    return session.status();
  }
};

TEST_F(SessionTest, StepsUpdateDonatedArgumentsInPlace) {
  std::unique_ptr<TrainingSession> session = stepSession(2);
  ASSERT_NE(session, nullptr);
  absl::StatusOr<TrainingSession::StepResult> first = session->step(0);
  ASSERT_TRUE(first.ok()) << first.status();
  // Device 0's block is {1, 2}.
  EXPECT_EQ(first->loss, 3.0);
  EXPECT_GE(first->seconds, 0.0);
  absl::StatusOr<TrainingSession::StepResult> second = session->step(1);
  ASSERT_TRUE(second.ok()) << second.status();
  // Now {0, 1}, and step 1.
  EXPECT_EQ(second->loss, 1001.0);

  absl::StatusOr<HostTensor> w = session->gatherArgument(0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->f32(), (std::vector<float>{-1, 0, 1, 2}));
  absl::StatusOr<HostTensor> step = session->gatherArgument(1);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->f32(), (std::vector<float>{1}));

  absl::StatusOr<TrainingSession::StepResult> later = session->step(41);
  ASSERT_TRUE(later.ok()) << later.status();
  // Device 0's block {-1, 0}.
  EXPECT_EQ(later->loss, -1.0 + 0.0 + 41000.0);
  step = session->gatherArgument(1);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->f32(), (std::vector<float>{41}));

  EXPECT_GT(session->peakDeviceBytes(), 0);
  EXPECT_EQ(session->lastStepCommBytes(), 0);
  EXPECT_EQ(session->gatherArgument(2).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(SessionTest, CreateRejectsAliasOutOfRange) {
  ProgramSpec spec = stepSpec(2);
  spec.resultAliases = {-1, 2};
  absl::Status status = createError(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("result #1 is donated into argument #2"),
            std::string::npos)
      << status;
}

TEST_F(SessionTest, CreateRejectsTwoResultsDonatedIntoOneArgument) {
  ProgramSpec spec = stepSpec(2);
  spec.resultAliases = {-1, 0, 0};
  absl::Status status = createError(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("two results are donated into argument 'w'"),
            std::string::npos)
      << status;
}

TEST_F(SessionTest, CreateRejectsADonatedLoss) {
  ProgramSpec spec = stepSpec(2);
  spec.resultAliases = {0, -1};
  absl::Status status = createError(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("result #0 cannot be the loss"),
            std::string::npos)
      << status;
}

TEST_F(SessionTest, CreateRejectsAGlobalShapeThatDoesNotFitTheMesh) {
  ProgramSpec spec = stepSpec(2);
  spec.arguments[0].globalShape = {5};
  absl::Status status = createError(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("dimension 0 is 5 globally but 2 per device "
                                  "on 2 devices"),
            std::string::npos)
      << status;
}

TEST_F(SessionTest, OutOfMemoryStepLeavesNoArgumentsUntilSetAgain) {
  std::unique_ptr<TrainingSession> session =
      stepSession(2, /*budget=*/1024 * 1024);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->step(12).ok());

  absl::StatusOr<TrainingSession::StepResult> failed = session->step(13);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(failed.status().message().find("%huge = test"), std::string::npos)
      << failed.status();
  for (int64_t d = 0; d < 2; ++d)
    EXPECT_EQ(session->runtime().device(d).pool(SD_DEVICE_MEMORY).liveBytes(),
              0);

  EXPECT_EQ(session->step(14).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->gatherArgument(0).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(session->setArguments(initialArguments()).ok());
  absl::StatusOr<TrainingSession::StepResult> again = session->step(14);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->loss, 3.0 + 14000.0);
  absl::StatusOr<HostTensor> w = session->gatherArgument(0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->f32(), (std::vector<float>{0, 1, 2, 3}));
}

TEST_F(SessionTest, SetArgumentsTwiceDoesNotLeak) {
  std::unique_ptr<TrainingSession> session = stepSession(2);
  ASSERT_NE(session, nullptr);
  std::vector<int64_t> live;
  for (int64_t d = 0; d < 2; ++d)
    live.push_back(
        session->runtime().device(d).pool(SD_DEVICE_MEMORY).liveBytes());
  EXPECT_GT(live[0], 0);
  ASSERT_TRUE(session->setArguments(initialArguments()).ok());
  for (int64_t d = 0; d < 2; ++d)
    EXPECT_EQ(session->runtime().device(d).pool(SD_DEVICE_MEMORY).liveBytes(),
              live[d]);
  // A step that allocates and releases its loss leaves the same.
  ASSERT_TRUE(session->step(0).ok());
  for (int64_t d = 0; d < 2; ++d)
    EXPECT_EQ(session->runtime().device(d).pool(SD_DEVICE_MEMORY).liveBytes(),
              live[d]);
}

TEST_F(SessionTest, CreateRejectsAProgramWhoseSignatureDisagrees) {
  // The program returns (loss, w); a spec of one result does not fit it.
  std::unique_ptr<LoadedProgram> program = load(stepBody(2));
  ASSERT_NE(program, nullptr);
  ProgramSpec spec = stepSpec(2);
  spec.resultAliases = {-1};
  absl::StatusOr<std::unique_ptr<TrainingSession>> session =
      TrainingSession::create(meshOptions(2), spec, std::move(program));
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session.status().message(),
            "the device program takes 2 arguments and returns 2 results, but "
            "its spec has 2 and 1");
}

TEST_F(SessionTest, DivergingReplicasAreDataLoss) {
  std::unique_ptr<LoadedProgram> program = load(kDivergingBody);
  ASSERT_NE(program, nullptr);
  ProgramSpec spec = stepSpec(2);
  spec.arguments[0].globalShape = {3};
  spec.arguments[0].localShape = {3};
  spec.arguments[0].dimAxes = {{}};
  absl::StatusOr<std::unique_ptr<TrainingSession>> session =
      TrainingSession::create(meshOptions(2), spec, std::move(program));
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->setArguments({{5, 5, 5}, {0}}).ok());
  absl::StatusOr<HostTensor> before = (*session)->gatherArgument(0);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->f32(), (std::vector<float>{5, 5, 5}));

  ASSERT_TRUE((*session)->step(0).ok());
  absl::StatusOr<HostTensor> after = (*session)->gatherArgument(0);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kDataLoss);
  // The last device's replica is the gathered value; device 0's differs.
  EXPECT_NE(after.status().message().find("the replicas of 'w' differ "
                                          "(device 0)"),
            std::string::npos)
      << after.status();
}

TEST_F(SessionTest, CompareParametersOfTwoSessions) {
  std::unique_ptr<TrainingSession> mesh = stepSession(2);
  std::unique_ptr<TrainingSession> single = stepSession(1);
  ASSERT_NE(mesh, nullptr);
  ASSERT_NE(single, nullptr);
  for (int64_t step = 0; step < 2; ++step) {
    ASSERT_TRUE(mesh->step(step).ok());
    ASSERT_TRUE(single->step(step).ok());
  }
  absl::StatusOr<ParameterComparison> same = compareParameters(*mesh, *single);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->relativeDifference, 0.0);
  EXPECT_EQ(same->worstTensor, "");
  EXPECT_TRUE(same->finite);

  // One more step on the mesh: {-2, -1, 0, 1} against {-1, 0, 1, 2}, so
  // the largest difference 1 over the largest expected magnitude 2.
  ASSERT_TRUE(mesh->step(2).ok());
  absl::StatusOr<ParameterComparison> behind =
      compareParameters(*mesh, *single);
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(behind->relativeDifference, 0.5);
  EXPECT_EQ(behind->worstTensor, "w");
  EXPECT_TRUE(behind->finite);

  // The step counter is no parameter: it is not compared.
  ASSERT_TRUE(mesh->setArguments({{-1, 0, 1, 2}, {7}}).ok());
  absl::StatusOr<ParameterComparison> counter =
      compareParameters(*mesh, *single);
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_EQ(counter->relativeDifference, 0.0);

  ASSERT_TRUE(mesh->setArguments({{-1, std::nanf(""), 1, 2}, {0}}).ok());
  absl::StatusOr<ParameterComparison> nan = compareParameters(*mesh, *single);
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_FALSE(nan->finite);

  // A session without arguments: the gather's error.
  absl::StatusOr<std::unique_ptr<TrainingSession>> empty =
      TrainingSession::create(meshOptions(1), stepSpec(1), nullptr);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(compareParameters(*mesh, **empty).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(SessionTest, CompareParametersRejectsDifferentArguments) {
  std::unique_ptr<TrainingSession> mesh = stepSession(2);
  ASSERT_NE(mesh, nullptr);
  std::unique_ptr<LoadedProgram> program = load(stepBody(4));
  ASSERT_NE(program, nullptr);
  absl::StatusOr<std::unique_ptr<TrainingSession>> renamed =
      TrainingSession::create(meshOptions(1), stepSpec(1, "v"),
                              std::move(program));
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  ASSERT_TRUE((*renamed)->setArguments(initialArguments()).ok());
  absl::StatusOr<ParameterComparison> comparison =
      compareParameters(*mesh, **renamed);
  ASSERT_FALSE(comparison.ok());
  EXPECT_EQ(comparison.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(comparison.status().message().find("'w'"), std::string::npos)
      << comparison.status();
  EXPECT_NE(comparison.status().message().find("'v'"), std::string::npos)
      << comparison.status();

  ProgramSpec fewer = stepSpec(1);
  fewer.arguments.pop_back();
  fewer.resultAliases = {-1};
  absl::StatusOr<std::unique_ptr<TrainingSession>> fewerArguments =
      TrainingSession::create(meshOptions(1), fewer, nullptr);
  ASSERT_TRUE(fewerArguments.ok()) << fewerArguments.status();
  comparison = compareParameters(*mesh, **fewerArguments);
  ASSERT_FALSE(comparison.ok());
  EXPECT_EQ(comparison.status().code(), absl::StatusCode::kInvalidArgument);
}

} // namespace
} // namespace sd::rt
