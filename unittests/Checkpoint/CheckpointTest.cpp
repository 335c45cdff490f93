//===- CheckpointTest.cpp - Tests for sharded checkpoints -----------------===//
//
// Checkpoints of real training sessions on several meshes: the same global
// arguments laid out on fsdp:4, data:2,fsdp:2 and one device, saved on one
// mesh and loaded onto another. One test also runs steps of a compiled
// hand-written program (as unittests/Runtime/SessionTest.cpp does) and resumes
// from a checkpoint on another mesh.
//
//===----------------------------------------------------------------------===//

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"

#include "CheckpointTestUtils.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sd::ckpt {
namespace {

using rt::ArgumentKind;
using rt::ArgumentSpec;
using rt::HostTensor;
using rt::ProgramSpec;
using rt::TrainingSession;
using testutil::compileAndLoad;
using testutil::contains;
using testutil::makeTempDir;
using testutil::programText;
using testutil::readAll;
using testutil::removeTempDir;
using testutil::writeAll;

bool exists(const std::string &path) { return access(path.c_str(), F_OK) == 0; }

bool bitwiseEqual(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
bool bitwiseEqual(const std::vector<float> &a, const HostTensor &b) {
  return bitwiseEqual(a, b.f32());
}
bool bitwiseEqual(const HostTensor &a, const HostTensor &b) {
  return a.elementType() == b.elementType() && bitwiseEqual(a.f32(), b);
}

/// "data:2,fsdp:2" → a mesh of those (ICI) axes.
MeshSpec mesh(const std::string &text) {
  absl::StatusOr<MeshSpec> parsed = parseMesh(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : MeshSpec();
}

/// An argument split, per dimension, over the named axes of `mesh` that it
/// has (others are dropped, so one description fits every mesh), in padded
/// blocks where they do not divide it.
ArgumentSpec argument(std::string name, ArgumentKind kind,
                      std::vector<int64_t> globalShape,
                      std::vector<std::vector<std::string>> axisNames,
                      const MeshSpec &mesh) {
  ArgumentSpec arg;
  arg.name = std::move(name);
  arg.kind = kind;
  arg.globalShape = globalShape;
  arg.localShape = globalShape;
  arg.dimAxes.resize(globalShape.size());
  for (size_t d = 0; d < globalShape.size(); ++d) {
    int64_t devices = 1;
    for (const std::string &axisName : axisNames[d])
      for (size_t a = 0; a < mesh.axes().size(); ++a)
        if (mesh.axes()[a].name == axisName) {
          arg.dimAxes[d].push_back(static_cast<int32_t>(a));
          devices *= mesh.axes()[a].size();
        }
    arg.localShape[d] = blockExtent(globalShape[d], devices);
  }
  return arg;
}

/// The model's arguments on `mesh`: parameters and optimizer state split
/// over fsdp, a matrix split over (data, fsdp), a replicated bias, a batch
/// split over data, and the step counter.
ProgramSpec modelSpec(const MeshSpec &mesh) {
  ProgramSpec spec;
  spec.arguments = {
      argument("w", ArgumentKind::Parameter, {8, 3}, {{"fsdp"}, {}}, mesh),
      argument("b", ArgumentKind::Parameter, {3}, {{}}, mesh),
      argument("m", ArgumentKind::Parameter, {4, 4}, {{}, {"data", "fsdp"}},
               mesh),
      argument("mu w", ArgumentKind::OptimizerState, {8, 3}, {{"fsdp"}, {}},
               mesh),
      argument("latents", ArgumentKind::Input, {4, 2}, {{"data"}, {}}, mesh),
      argument("step", ArgumentKind::Step, {}, {}, mesh),
  };
  spec.resultAliases = {-1};
  return spec;
}

/// Distinct, non-trivial values for every argument of `spec` (with a -0 and
/// a NaN payload in "w" so that bitwise comparisons mean something).
std::vector<HostTensor> globalsFor(const ProgramSpec &spec, float seed = 0) {
  std::vector<HostTensor> globals;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    std::vector<float> values(rt::numElements(spec.arguments[i].globalShape));
    for (size_t k = 0; k < values.size(); ++k)
      values[k] = std::sin(seed + 100.0f * i + k) * 3.0f;
    globals.push_back(std::move(values));
  }
  globals[0].f32()[1] = -0.0f;
  uint32_t payload = 0x7fc01234u;
  std::memcpy(&globals[0].f32()[2], &payload, sizeof(float));
  return globals;
}

/// A session of `spec` (no program: it only holds arguments) on `meshText`.
std::unique_ptr<TrainingSession> session(const std::string &meshText,
                                         const ProgramSpec *spec = nullptr) {
  rt::MeshRuntimeOptions options;
  options.mesh = mesh(meshText);
  options.threadsPerDevice = 1;
  absl::StatusOr<std::unique_ptr<TrainingSession>> created =
      TrainingSession::create(options, spec ? *spec : modelSpec(options.mesh),
                              nullptr);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

/// A session on `meshText` holding `globals`.
std::unique_ptr<TrainingSession>
sessionWith(const std::string &meshText,
            const std::vector<HostTensor> &globals) {
  std::unique_ptr<TrainingSession> result = session(meshText);
  if (!result)
    return nullptr;
  absl::Status status = result->setArguments(globals);
  EXPECT_TRUE(status.ok()) << status;
  return status.ok() ? std::move(result) : nullptr;
}

CheckpointMeta metaFor(int64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.seed = 0xdeadbeefcafef00dull;
  meta.dataSeed = 7;
  meta.dataPosition = 4096;
  meta.model = "tiny.mlir sha256:0123";
  meta.hyperparameters = {{"adam_b1", 0.9}, {"learning_rate", 1e-4}};
  return meta;
}

class CheckpointTest : public testing::Test {
protected:
  /// One root per process, passed to death-test children (which re-run the
  /// binary) through the environment.
  static void SetUpTestSuite() {
    if (const char *inherited = std::getenv("SD_CHECKPOINT_TEST_ROOT")) {
      root = new std::string(inherited);
      ownsRoot = false;
      return;
    }
    root = new std::string(makeTempDir("sd-checkpoint-test"));
    ASSERT_FALSE(root->empty());
    ownsRoot = true;
    setenv("SD_CHECKPOINT_TEST_ROOT", root->c_str(), 1);
  }
  static void TearDownTestSuite() {
    if (ownsRoot) {
      removeTempDir(*root);
      unsetenv("SD_CHECKPOINT_TEST_ROOT");
    }
    delete root;
    root = nullptr;
  }

  /// A fresh directory for the current test.
  static std::string testDir() {
    const testing::TestInfo *info =
        testing::UnitTest::GetInstance()->current_test_info();
    std::string dir = *root + "/" + info->name();
    return dir;
  }

  static std::string *root;
  static bool ownsRoot;
};

std::string *CheckpointTest::root = nullptr;
bool CheckpointTest::ownsRoot = false;

TEST_F(CheckpointTest, RoundTripOnOneMeshIsBitwise) {
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:4")));
  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:4", globals);
  ASSERT_NE(saved, nullptr);
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(10)).ok());

  absl::StatusOr<std::vector<std::string>> listed = listCheckpoints(dir);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(*listed, std::vector<std::string>{dir + "/step_00000010"});
  for (int d = 0; d < 4; ++d)
    EXPECT_TRUE(exists(dir + "/step_00000010/device_" + std::to_string(d) +
                       ".safetensors"));

  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(listed->back());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->path, dir + "/step_00000010");
  EXPECT_EQ(loaded->meta.step, 10);
  EXPECT_EQ(loaded->meta.seed, 0xdeadbeefcafef00dull);
  EXPECT_EQ(loaded->meta.dataSeed, 7u);
  EXPECT_EQ(loaded->meta.dataPosition, 4096);
  EXPECT_EQ(loaded->meta.model, "tiny.mlir sha256:0123");
  EXPECT_EQ(loaded->meta.hyperparameters, metaFor(10).hyperparameters);
  EXPECT_EQ(loaded->mesh, mesh("fsdp:4"));
  EXPECT_GT(loaded->writtenUnixMicros, 1700000000LL * 1000000);

  const ProgramSpec &spec = saved->spec();
  ASSERT_EQ(loaded->tensors.size(), spec.arguments.size());
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const LoadedTensor &tensor = loaded->tensors[i];
    EXPECT_EQ(tensor.name, spec.arguments[i].name);
    EXPECT_EQ(tensor.kind, spec.arguments[i].kind);
    EXPECT_EQ(tensor.globalShape, spec.arguments[i].globalShape);
    EXPECT_TRUE(bitwiseEqual(tensor.values, globals[i])) << tensor.name;
  }
  EXPECT_EQ(loaded->find("w")->sharding,
            (std::vector<std::vector<std::string>>{{"fsdp"}, {}}));
  EXPECT_EQ(loaded->find("step")->sharding,
            std::vector<std::vector<std::string>>{});

  // Into a fresh session on the same mesh: the same blocks, bitwise.
  absl::StatusOr<std::vector<HostTensor>> arguments =
      argumentsFromCheckpoint(*loaded, spec);
  ASSERT_TRUE(arguments.ok()) << arguments.status();
  std::unique_ptr<TrainingSession> restored = sessionWith("fsdp:4", *arguments);
  ASSERT_NE(restored, nullptr);
  for (int64_t d = 0; d < 4; ++d)
    for (size_t i = 0; i < spec.arguments.size(); ++i) {
      absl::StatusOr<rt::ConstBlock> before =
          saved->deviceBlock(d, static_cast<int64_t>(i));
      absl::StatusOr<rt::ConstBlock> after =
          restored->deviceBlock(d, static_cast<int64_t>(i));
      ASSERT_TRUE(before.ok() && after.ok());
      EXPECT_EQ(std::memcmp(before->f32(), after->f32(),
                            rt::numElements(spec.arguments[i].localShape) *
                                sizeof(float)),
                0)
          << "device " << d << " argument " << spec.arguments[i].name;
    }
}

TEST_F(CheckpointTest, ReshardsOntoOtherMeshes) {
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:4")), 1.5f);
  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:4", globals);
  ASSERT_NE(saved, nullptr);
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(3)).ok());
  absl::StatusOr<LoadedCheckpoint> loaded =
      loadCheckpoint(dir + "/step_00000003");
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  for (const char *target : {"data:2,fsdp:2", "x:1", "fsdp:2", "data:4"}) {
    std::unique_ptr<TrainingSession> resumed = session(target);
    ASSERT_NE(resumed, nullptr);
    absl::StatusOr<std::vector<HostTensor>> arguments =
        argumentsFromCheckpoint(*loaded, resumed->spec());
    ASSERT_TRUE(arguments.ok()) << arguments.status();
    ASSERT_TRUE(resumed->setArguments(*arguments).ok());
    for (size_t i = 0; i < globals.size(); ++i) {
      absl::StatusOr<HostTensor> gathered =
          resumed->gatherArgument(static_cast<int64_t>(i));
      ASSERT_TRUE(gathered.ok()) << gathered.status();
      EXPECT_TRUE(bitwiseEqual(*gathered, globals[i]))
          << target << ": " << resumed->spec().arguments[i].name;
    }
  }

  // And back: saved on data:2,fsdp:2, loaded onto fsdp:4.
  std::unique_ptr<TrainingSession> twoByTwo =
      sessionWith("data:2,fsdp:2", globals);
  ASSERT_NE(twoByTwo, nullptr);
  ASSERT_TRUE(saveCheckpoint(dir, *twoByTwo, metaFor(4)).ok());
  absl::StatusOr<LoadedCheckpoint> back =
      loadCheckpoint(dir + "/step_00000004");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mesh, mesh("data:2,fsdp:2"));
  std::unique_ptr<TrainingSession> four = session("fsdp:4");
  ASSERT_NE(four, nullptr);
  absl::StatusOr<std::vector<HostTensor>> arguments =
      argumentsFromCheckpoint(*back, four->spec());
  ASSERT_TRUE(arguments.ok()) << arguments.status();
  for (size_t i = 0; i < globals.size(); ++i)
    EXPECT_TRUE(bitwiseEqual((*arguments)[i], globals[i]))
        << four->spec().arguments[i].name;
}

TEST_F(CheckpointTest, EachBlockIsWrittenOnceByItsLowestDevice) {
  std::vector<HostTensor> globals =
      globalsFor(modelSpec(mesh("data:2,fsdp:2")));
  std::unique_ptr<TrainingSession> saved =
      sessionWith("data:2,fsdp:2", globals);
  ASSERT_NE(saved, nullptr);
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(1)).ok());

  // Devices 0..3 are (data, fsdp) = (0,0), (0,1), (1,0), (1,1). "w" and "mu
  // w" (over fsdp) are owned by 0 and 1, "latents" (over data) by 0 and 2,
  // "m" (over both) by everyone, "b" and "step" (replicated) by 0 only.
  std::vector<std::vector<std::string>> expected = {
      {"w", "b", "m", "mu w", "latents", "step"},
      {"w", "m", "mu w"},
      {"m", "latents"},
      {"m"}};
  for (int d = 0; d < 4; ++d) {
    std::string path =
        dir + "/step_00000001/device_" + std::to_string(d) + ".safetensors";
    absl::StatusOr<SafetensorsFile> file = readSafetensors(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<std::string> names;
    for (const SafetensorsTensor &tensor : file->tensors)
      names.push_back(tensor.name);
    EXPECT_EQ(names, expected[d]) << "device " << d;
    EXPECT_EQ(file->metadata.at("sd.device"), std::to_string(d));
    EXPECT_EQ(file->metadata.at("sd.mesh"), "data:2,fsdp:2");
    // A block is the device's local block.
    const SafetensorsTensor *m = file->find("m");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->shape, (std::vector<int64_t>{4, 1}));
  }
}

TEST_F(CheckpointTest, ADeviceThatOwnsNothingWritesAnEmptyFile) {
  ProgramSpec spec;
  MeshSpec two = mesh("x:2");
  spec.arguments = {argument("b", ArgumentKind::Parameter, {3}, {{}}, two),
                    argument("step", ArgumentKind::Step, {}, {}, two)};
  spec.resultAliases = {-1};
  std::unique_ptr<TrainingSession> saved = session("x:2", &spec);
  ASSERT_NE(saved, nullptr);
  ASSERT_TRUE(saved->setArguments({{1, 2, 3}, {5}}).ok());
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(0)).ok());
  absl::StatusOr<SafetensorsFile> empty =
      readSafetensors(dir + "/step_00000000/device_1.safetensors");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->tensors.empty());
  absl::StatusOr<LoadedCheckpoint> loaded =
      loadCheckpoint(dir + "/step_00000000");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->find("b")->values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(loaded->find("step")->values, (std::vector<float>{5}));
}

/// A checkpoint of step 10 on data:2,fsdp:2 under `dir`; returns its path.
std::string writeTwoByTwo(const std::string &dir) {
  std::unique_ptr<TrainingSession> saved = sessionWith(
      "data:2,fsdp:2", globalsFor(modelSpec(mesh("data:2,fsdp:2"))));
  EXPECT_NE(saved, nullptr);
  if (saved) {
    EXPECT_TRUE(saveCheckpoint(dir, *saved, metaFor(10)).ok());
  }
  return dir + "/step_00000010";
}

/// Reads every block each device of a session on `target` holds through
/// `reader` (as sdrun's --resume fills a session) into that session, and
/// checks the gathered values against `globals` bitwise.
void expectReadBlocks(const CheckpointReader &reader, const char *target,
                      const std::vector<HostTensor> &globals) {
  std::unique_ptr<TrainingSession> resumed = session(target);
  ASSERT_NE(resumed, nullptr);
  ASSERT_TRUE(reader.check(resumed->spec()).ok());
  const ProgramSpec &spec = resumed->spec();
  absl::Status filled = resumed->fillArguments(
      [&](int64_t i, const std::vector<int64_t> &coords, rt::Block out) {
        const ArgumentSpec &arg = spec.arguments[i];
        return reader.readBlock(arg.name, arg.blockOffsets(coords),
                                arg.localShape, out.f32());
      });
  ASSERT_TRUE(filled.ok()) << filled;
  for (size_t i = 0; i < globals.size(); ++i) {
    absl::StatusOr<HostTensor> gathered =
        resumed->gatherArgument(static_cast<int64_t>(i));
    ASSERT_TRUE(gathered.ok()) << gathered.status();
    EXPECT_TRUE(bitwiseEqual(*gathered, globals[i]))
        << target << ": " << spec.arguments[i].name;
  }
}

TEST_F(CheckpointTest, BlocksAreReadAloneOntoAnyMesh) {
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:4")), 2.5f);
  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:4", globals);
  ASSERT_NE(saved, nullptr);
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(5)).ok());
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::open(dir + "/step_00000005");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->meta().step, 5);
  EXPECT_EQ((*reader)->mesh(), mesh("fsdp:4"));
  for (const char *target :
       {"fsdp:4", "data:2,fsdp:2", "x:1", "fsdp:2", "data:4"})
    expectReadBlocks(**reader, target, globals);
}

// Uneven meshes: "w" [8, 3] on fsdp:3 is blocks of 3, 3 and 2 rows; "m"
// [4, 4] over data:3 × fsdp:3 has blocks of one column, five of them empty.
// Only valid elements are stored, and every block reads back onto meshes
// even and uneven, its padding zeros.
TEST_F(CheckpointTest, ReshardsBetweenUnevenMeshes) {
  std::vector<HostTensor> globals =
      globalsFor(modelSpec(mesh("data:3,fsdp:3")), 4.5f);
  std::string dir = testDir();
  for (const char *source : {"fsdp:3", "data:3,fsdp:3"}) {
    std::unique_ptr<TrainingSession> saved = sessionWith(source, globals);
    ASSERT_NE(saved, nullptr);
    ASSERT_TRUE(saveCheckpoint(dir + "/" + source, *saved, metaFor(7)).ok());
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::open(dir + "/" + source + "/step_00000007");
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (const char *target : {"fsdp:3", "data:3,fsdp:3", "data:2,fsdp:3",
                               "fsdp:5", "x:1", "data:2,fsdp:2"})
      expectReadBlocks(**reader, target, globals);
    absl::StatusOr<LoadedCheckpoint> loaded =
        loadCheckpoint(dir + "/" + source + "/step_00000007");
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (size_t i = 0; i < globals.size(); ++i)
      EXPECT_TRUE(bitwiseEqual(loaded->tensors[i].values, globals[i]))
          << source << ": " << loaded->tensors[i].name;
  }
}

TEST_F(CheckpointTest, OnItsOwnMeshEachBlockIsReadOnce) {
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:4")), 3.5f);
  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:4", globals);
  ASSERT_NE(saved, nullptr);
  std::string dir = testDir();
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(6)).ok());
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::open(dir + "/step_00000006");
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t headers = (*reader)->bytesRead();
  // One device's blocks: exactly their bytes, nothing of the others'.
  const ProgramSpec spec = modelSpec(mesh("fsdp:4"));
  int64_t expected = 0;
  std::vector<int64_t> coords = {1};
  for (const ArgumentSpec &original : spec.arguments) {
    ArgumentSpec arg = original;
    arg.axisSizes = {4};
    std::vector<float> block(rt::numElements(arg.localShape));
    ASSERT_TRUE((*reader)
                    ->readBlock(arg.name, arg.blockOffsets(coords),
                                arg.localShape, block.data())
                    .ok());
    expected += arg.localBytes();
  }
  EXPECT_EQ((*reader)->bytesRead() - headers, expected);
}

TEST_F(CheckpointTest, ACorruptBlockIsDataLossWhenItIsRead) {
  std::string stepDir = writeTwoByTwo(testDir());
  std::string shard = stepDir + "/device_1.safetensors";
  std::string bytes = readAll(shard);
  bytes[bytes.size() - 5] ^= 0x10;
  writeAll(shard, bytes);
  absl::StatusOr<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::open(stepDir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::unique_ptr<TrainingSession> target = session("data:2,fsdp:2");
  ASSERT_NE(target, nullptr);
  const ProgramSpec &spec = target->spec();
  absl::Status filled = target->fillArguments(
      [&](int64_t i, const std::vector<int64_t> &coords, rt::Block out) {
        const ArgumentSpec &arg = spec.arguments[i];
        return (*reader)->readBlock(arg.name, arg.blockOffsets(coords),
                                    arg.localShape, out.f32());
      });
  ASSERT_FALSE(filled.ok());
  EXPECT_EQ(filled.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(
      contains(filled, "checkpoint shard '" + shard + "' is corrupt: tensor '"))
      << filled;
}

TEST_F(CheckpointTest, ACorruptByteIsDataLossNamingTheFile) {
  std::string stepDir = writeTwoByTwo(testDir());
  std::string shard = stepDir + "/device_1.safetensors";
  std::string bytes = readAll(shard);
  bytes[bytes.size() - 5] ^= 0x10;
  writeAll(shard, bytes);
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(stepDir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(contains(loaded.status(),
                       "checkpoint shard '" + shard + "' is corrupt: crc32 0x"))
      << loaded.status();
  EXPECT_TRUE(contains(loaded.status(), "!= manifest's 0x")) << loaded.status();
}

TEST_F(CheckpointTest, ATruncatedShardIsDataLoss) {
  std::string stepDir = writeTwoByTwo(testDir());
  std::string shard = stepDir + "/device_2.safetensors";
  std::string bytes = readAll(shard);
  ASSERT_EQ(truncate(shard.c_str(), static_cast<off_t>(bytes.size() - 8)), 0);
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(stepDir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(
      contains(loaded.status(),
               "checkpoint shard '" + shard +
                   "' is truncated: " + std::to_string(bytes.size() - 8) +
                   " bytes, manifest says " + std::to_string(bytes.size())))
      << loaded.status();

  ASSERT_EQ(unlink(shard.c_str()), 0);
  loaded = loadCheckpoint(stepDir);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(
      contains(loaded.status(), "checkpoint shard '" + shard + "' is missing"))
      << loaded.status();
}

TEST_F(CheckpointTest, AStepWithoutManifestIsNotListedACorruptOneIs) {
  std::string dir = testDir();
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:2")));
  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:2", globals);
  ASSERT_NE(saved, nullptr);
  for (int64_t step : {20, 100, 5})
    ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(step)).ok());
  absl::StatusOr<std::vector<std::string>> listed = listCheckpoints(dir);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<std::string>{dir + "/step_00000005",
                                               dir + "/step_00000020",
                                               dir + "/step_00000100"}));

  ASSERT_EQ(unlink((dir + "/step_00000100/manifest.pb").c_str()), 0);
  // A manifest that does not parse is listed (it is corrupt, not
  // incomplete: loading it says so); unrelated entries are not.
  writeAll(dir + "/step_00000020/manifest.pb", "\xff\xff\xff garbage");
  ASSERT_EQ(mkdir((dir + "/step_abc").c_str(), 0755), 0);
  writeAll(dir + "/notes.txt", "x");
  listed = listCheckpoints(dir);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<std::string>{dir + "/step_00000005",
                                               dir + "/step_00000020"}));

  absl::StatusOr<LoadedCheckpoint> incomplete =
      loadCheckpoint(dir + "/step_00000100");
  EXPECT_EQ(incomplete.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(contains(incomplete.status(), "has no manifest"))
      << incomplete.status();
  EXPECT_EQ(loadCheckpoint(dir + "/step_00000020").status().code(),
            absl::StatusCode::kDataLoss);

  // A missing directory has no checkpoints.
  absl::StatusOr<std::vector<std::string>> none =
      listCheckpoints(dir + "/missing");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(CheckpointTest, AnExistingStepIsNeverOverwritten) {
  std::string dir = testDir();
  std::string stepDir = writeTwoByTwo(dir);
  std::vector<std::string> names = {
      "manifest.pb", "device_0.safetensors", "device_1.safetensors",
      "device_2.safetensors", "device_3.safetensors"};
  std::vector<std::string> before;
  for (const std::string &name : names)
    before.push_back(readAll(stepDir + "/" + name));

  std::unique_ptr<TrainingSession> other = sessionWith(
      "data:2,fsdp:2", globalsFor(modelSpec(mesh("data:2,fsdp:2")), 9.0f));
  ASSERT_NE(other, nullptr);
  absl::Status status = saveCheckpoint(dir, *other, metaFor(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(status, "'" + stepDir + "' already exists")) << status;
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(readAll(stepDir + "/" + names[i]), before[i]) << names[i];
  EXPECT_FALSE(exists(stepDir + "/device_0.safetensors.tmp"));
}

TEST_F(CheckpointTest, LeftoversOfAnInterruptedWriteAreReplaced) {
  std::string dir = testDir();
  std::string stepDir = dir + "/step_00000010";
  ASSERT_EQ(std::system(("mkdir -p '" + stepDir + "'").c_str()), 0);
  writeAll(stepDir + "/device_0.safetensors.tmp", std::string(100000, 'x'));
  writeAll(stepDir + "/manifest.pb.tmp", "stale");
  // A shard of an earlier write on a larger mesh.
  writeAll(stepDir + "/device_7.safetensors", "stale");
  writeAll(stepDir + "/device_1.safetensors", "stale");

  writeTwoByTwo(dir);
  for (const char *stale : {"/device_0.safetensors.tmp", "/manifest.pb.tmp",
                            "/device_7.safetensors"})
    EXPECT_FALSE(exists(stepDir + stale)) << stale;
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(stepDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(bitwiseEqual(loaded->find("m")->values,
                           globalsFor(modelSpec(mesh("data:2,fsdp:2")))[2]));
}

TEST_F(CheckpointTest, ArgumentsMustMatchByNameAndShape) {
  std::string stepDir = writeTwoByTwo(testDir());
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(stepDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();

  ProgramSpec renamed = modelSpec(mesh("x:1"));
  renamed.arguments[2].name = "m2";
  absl::StatusOr<std::vector<HostTensor>> missing =
      argumentsFromCheckpoint(*loaded, renamed);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(missing.status(),
                       "checkpoint '" + stepDir + "' has no tensor 'm2'"))
      << missing.status();

  ProgramSpec reshaped = modelSpec(mesh("x:1"));
  reshaped.arguments[0].globalShape = {8, 4};
  absl::StatusOr<std::vector<HostTensor>> mismatch =
      argumentsFromCheckpoint(*loaded, reshaped);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(mismatch.status(), "tensor 'w' is [8, 3] in checkpoint"))
      << mismatch.status();
  EXPECT_TRUE(contains(mismatch.status(), "but [8, 4] in the program"))
      << mismatch.status();

  // Extra tensors in the checkpoint are fine: a subset of the arguments.
  ProgramSpec fewer = modelSpec(mesh("x:1"));
  fewer.arguments.erase(fewer.arguments.begin() + 1);
  absl::StatusOr<std::vector<HostTensor>> subset =
      argumentsFromCheckpoint(*loaded, fewer);
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_EQ(subset->size(), fewer.arguments.size());
}

TEST_F(CheckpointTest, ASessionWithoutArgumentsCannotBeSaved) {
  std::unique_ptr<TrainingSession> empty = session("fsdp:2");
  ASSERT_NE(empty, nullptr);
  std::string dir = testDir();
  absl::Status status = saveCheckpoint(dir, *empty, metaFor(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_FALSE(exists(dir + "/step_00000001/manifest.pb"));
  EXPECT_EQ(saveCheckpoint(dir, *empty, metaFor(-1)).code(),
            absl::StatusCode::kInvalidArgument);
}

/// A checkpoint write stopped at `point` (CheckpointWriteOptions::atPoint)
/// and killed there (by SIGALRM, which like kill -9 gives it no chance to
/// clean up) leaves a step that is not listed, and the next write of that
/// step succeeds.
void checkStalledWrite(const std::string &dir, WritePoint point,
                       const char *leftover) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<HostTensor> globals = globalsFor(modelSpec(mesh("fsdp:2")));
  CheckpointWriteOptions stall;
  stall.atPoint = stallAt(point);
  EXPECT_EXIT(
      {
        std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:2", globals);
        alarm(2);
        (void)saveCheckpoint(dir, *saved, metaFor(10), stall);
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGALRM),
      std::string("sd: checkpoint write stalled at ") + writePointName(point));
  std::string stepDir = dir + "/step_00000010";
  EXPECT_TRUE(exists(stepDir + leftover)) << leftover;
  EXPECT_FALSE(exists(stepDir + "/manifest.pb"));
  absl::StatusOr<std::vector<std::string>> listed = listCheckpoints(dir);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());

  std::unique_ptr<TrainingSession> saved = sessionWith("fsdp:2", globals);
  ASSERT_NE(saved, nullptr);
  ASSERT_TRUE(saveCheckpoint(dir, *saved, metaFor(10)).ok());
  EXPECT_FALSE(exists(stepDir + leftover));
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(stepDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(bitwiseEqual(loaded->find("w")->values, globals[0]));
}

TEST_F(CheckpointTest, StallInAShardThenKill) {
  checkStalledWrite(testDir(), WritePoint::Shard, "/device_0.safetensors.tmp");
}

TEST_F(CheckpointTest, StallBeforeTheManifestsRenameThenKill) {
  checkStalledWrite(testDir(), WritePoint::Manifest, "/manifest.pb.tmp");
}

//===----------------------------------------------------------------------===//
// Resuming a real training run
//===----------------------------------------------------------------------===//

/// A step taking (w: [4] split over x, step) and returning (loss, w - step/8
/// in place); the loss is the sum of the device's block of w.
std::string stepBody(int localSize) {
  return R"(
extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results) {
  float *w = (float *)args[0];
  float step = *(const float *)args[1];
  float *loss = (float *)api->alloc(dev, sizeof(float), SD_DEVICE_MEMORY,
                                    "%loss = test");
  if (!loss)
    return 1;
  float sum = 0.0f;
  for (int i = 0; i < )" +
         std::to_string(localSize) + R"(; ++i) {
    sum += w[i];
    w[i] = w[i] * 0.75f - step / 8.0f;
  }
  *loss = sum;
  results[0] = loss;
  results[1] = w;
  return 0;
}
)";
}

/// A session of the step program on x:`devices`, with w = 1.1, 2.2, ...
std::unique_ptr<TrainingSession> trainingSession(int64_t devices,
                                                 const std::string &cacheDir) {
  std::unique_ptr<rt::LoadedProgram> program =
      compileAndLoad(programText(stepBody(static_cast<int>(4 / devices)),
                                 /*numArgs=*/2, /*numResults=*/2),
                     cacheDir);
  if (!program)
    return nullptr;
  rt::MeshRuntimeOptions options;
  options.mesh = MeshSpec({MeshAxis{"x", devices, 1}});
  options.threadsPerDevice = 1;
  ProgramSpec spec;
  spec.arguments = {
      argument("w", ArgumentKind::Parameter, {4}, {{"x"}}, options.mesh),
      argument("step", ArgumentKind::Step, {}, {}, options.mesh)};
  spec.resultAliases = {-1, 0};
  absl::StatusOr<std::unique_ptr<TrainingSession>> created =
      TrainingSession::create(options, spec, std::move(program));
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok())
    return nullptr;
  EXPECT_TRUE((*created)->setArguments({{1.1f, 2.2f, 3.3f, 4.4f}, {0}}).ok());
  return std::move(*created);
}

TEST_F(CheckpointTest, ResumingOnAnotherMeshContinuesTheSameRun) {
  std::string dir = testDir();
  std::unique_ptr<TrainingSession> reference =
      trainingSession(2, *root + "/cache");
  std::unique_ptr<TrainingSession> first = trainingSession(2, *root + "/cache");
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(first, nullptr);
  // The reference runs 5 steps without stopping; the first run stops after
  // 3 and is resumed from its checkpoint on one device.
  for (int64_t step = 0; step < 5; ++step)
    ASSERT_TRUE(reference->step(step).ok());
  for (int64_t step = 0; step < 3; ++step)
    ASSERT_TRUE(first->step(step).ok());
  ASSERT_TRUE(saveCheckpoint(dir, *first, metaFor(3)).ok());
  first.reset();

  absl::StatusOr<std::vector<std::string>> listed = listCheckpoints(dir);
  ASSERT_TRUE(listed.ok() && !listed->empty());
  absl::StatusOr<LoadedCheckpoint> loaded = loadCheckpoint(listed->back());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::unique_ptr<TrainingSession> resumed =
      trainingSession(1, *root + "/cache");
  ASSERT_NE(resumed, nullptr);
  absl::StatusOr<std::vector<HostTensor>> arguments =
      argumentsFromCheckpoint(*loaded, resumed->spec());
  ASSERT_TRUE(arguments.ok()) << arguments.status();
  ASSERT_TRUE(resumed->setArguments(*arguments).ok());
  for (int64_t step = loaded->meta.step; step < 5; ++step)
    ASSERT_TRUE(resumed->step(step).ok());

  absl::StatusOr<rt::ParameterComparison> comparison =
      rt::compareParameters(*resumed, *reference);
  ASSERT_TRUE(comparison.ok()) << comparison.status();
  EXPECT_EQ(comparison->relativeDifference, 0.0);
  EXPECT_TRUE(comparison->finite);
}

} // namespace
} // namespace sd::ckpt
