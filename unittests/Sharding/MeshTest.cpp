//===- MeshTest.cpp - Tests for mesh parsing and device numbering ---------===//

#include "sd/Sharding/Mesh.h"

#include "ShardingTestUtils.h"
#include "gtest/gtest.h"

#include <string>

using namespace sd;

namespace {

/// Checks that parsing failed with InvalidArgument and that the message
/// contains `expected`.
::testing::AssertionResult failsWith(const absl::StatusOr<MeshSpec> &result,
                                     const std::string &expected) {
  if (result.ok())
    return ::testing::AssertionFailure()
           << "parsed as " << result->toString() << ", expected an error";
  return isInvalidArgumentWith(result.status(), expected);
}

MeshOptions devices(int64_t n) { return MeshOptions{n, std::nullopt}; }

TEST(MeshTest, ParsesIciSpec) {
  absl::StatusOr<MeshSpec> mesh = parseMesh("data:8,fsdp:4");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  ASSERT_EQ(mesh->axes().size(), 2u);
  EXPECT_EQ(mesh->axes()[0], (MeshAxis{"data", 8, 1}));
  EXPECT_EQ(mesh->axes()[1], (MeshAxis{"fsdp", 4, 1}));
  EXPECT_EQ(mesh->numDevices(), 32);
  EXPECT_EQ(mesh->numProcesses(), 1);
  EXPECT_EQ(mesh->devicesPerProcess(), 32);
  EXPECT_EQ(mesh->toString(), "data:8,fsdp:4");
  ASSERT_NE(mesh->findAxis("fsdp"), nullptr);
  EXPECT_EQ(mesh->findAxis("fsdp")->size(), 4);
  EXPECT_EQ(mesh->findAxis("tensor"), nullptr);
}

TEST(MeshTest, ToleratesWhitespaceAndIdentifiers) {
  absl::StatusOr<MeshSpec> mesh = parseMesh("  data : 2 ,\tfsdp:4 , _x1:1 ");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "data:2,fsdp:4,_x1:1");
}

TEST(MeshTest, RejectsEmptySpec) {
  EXPECT_TRUE(failsWith(parseMesh(""), "empty mesh specification"));
  EXPECT_TRUE(failsWith(parseMesh("  "), "empty mesh specification"));
}

TEST(MeshTest, RejectsMalformedEntries) {
  EXPECT_TRUE(failsWith(parseMesh("data8"),
                        "malformed mesh entry \"data8\"; expected axis:size"));
  EXPECT_TRUE(failsWith(parseMesh("data:8:2"), "malformed mesh entry "
                                               "\"data:8:2\""));
  EXPECT_TRUE(failsWith(parseMesh("data:8,"), "malformed mesh entry \"\""));
  EXPECT_TRUE(failsWith(parseMesh("data:2", "fsdp"),
                        "malformed dcn mesh entry \"fsdp\""));
}

TEST(MeshTest, RejectsBadAxisNames) {
  EXPECT_TRUE(failsWith(parseMesh("1data:2"), "axis name \"1data\""));
  EXPECT_TRUE(failsWith(parseMesh("da-ta:2"), "axis name \"da-ta\""));
  EXPECT_TRUE(failsWith(parseMesh(":2"), "axis name \"\""));
}

TEST(MeshTest, RejectsBadSizes) {
  EXPECT_TRUE(failsWith(parseMesh("data:x"),
                        "mesh axis \"data\" has non-numeric size \"x\""));
  EXPECT_TRUE(failsWith(parseMesh("data:4x"), "non-numeric size \"4x\""));
  EXPECT_TRUE(failsWith(parseMesh("data:"), "non-numeric size \"\""));
  EXPECT_TRUE(failsWith(parseMesh("data:0"),
                        "mesh axis \"data\" has size 0; sizes must be "
                        "positive or -1"));
  EXPECT_TRUE(failsWith(parseMesh("data:-2"), "has size -2; sizes must be"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:1", "data:0"),
                        "dcn mesh axis \"data\" has size 0"));
}

TEST(MeshTest, RejectsOverflow) {
  EXPECT_TRUE(failsWith(parseMesh("data:99999999999999999999"),
                        "mesh axis \"data\" has size 99999999999999999999 "
                        "which is too large"));
  EXPECT_TRUE(failsWith(parseMesh("a:4294967296,b:4294967296"),
                        "is too large: the product of its sizes overflows"));
  EXPECT_TRUE(failsWith(parseMesh("a:4294967296", "a:4294967296"),
                        "mesh \"a:4294967296\" with dcn mesh \"a:4294967296\" "
                        "is too large"));
}

// Found by fuzz/: a mesh of 99999999999 devices parsed and sent sdrun
// building per-device tables; beyond kMaxMeshDevices it is one error.
TEST(MeshTest, RejectsMoreDevicesThanTheLimit) {
  EXPECT_TRUE(failsWith(parseMesh("x:99999999999"),
                        "mesh x:99999999999 has 99999999999 devices; sd "
                        "supports at most 1048576"));
  EXPECT_TRUE(failsWith(parseMesh("a:1024", "a:2048"),
                        "mesh a:2097152(dcn=2048) has 2097152 devices"));
  EXPECT_TRUE(parseMesh("x:1048576").ok());
}

// `foo:4096` in one sdrun process starts thousands of thread teams; a caller
// that runs the devices caps the devices per process.
TEST(MeshTest, RejectsMoreDevicesPerProcessThanAsked) {
  MeshOptions opts;
  opts.maxDevicesPerProcess = kMaxDevicesPerProcess;
  EXPECT_TRUE(failsWith(parseMesh("foo:4096", "", opts),
                        "mesh foo:4096 has 4096 devices per process; at most "
                        "512 can run in one process"));
  EXPECT_TRUE(parseMesh("foo:4096").ok());
  EXPECT_TRUE(parseMesh("foo:512", "", opts).ok());
  EXPECT_TRUE(parseMesh("foo:256", "foo:16", opts).ok());
}

// Axes from an IR mesh attribute or a checkpoint manifest: the product that
// overflowed 64 bits (a SIGFPE in the sharding verifier) is an error.
TEST(MeshTest, VerifiesAxesBuiltElsewhere) {
  EXPECT_TRUE(verifyMeshAxes({{"data", 8, 2}, {"fsdp", 4, 1}}).ok());
  EXPECT_TRUE(verifyMeshAxes({}).ok());
  auto failsWithMessage = [](const absl::Status &status,
                             const std::string &expected) {
    return status.code() == absl::StatusCode::kInvalidArgument &&
           std::string(status.message()).find(expected) != std::string::npos;
  };
  EXPECT_TRUE(failsWithMessage(
      verifyMeshAxes({{"a", 4294967296, 1}, {"b", 4294967296, 1}}),
      "mesh has more than 1048576 devices, the most sd supports, by mesh "
      "axis \"a\""));
  EXPECT_TRUE(failsWithMessage(
      verifyMeshAxes({{"a", 3037000500, 3037000500}}),
      "by mesh axis \"a\" (ICI part 3037000500, DCN part 3037000500)"));
  EXPECT_TRUE(failsWithMessage(verifyMeshAxes({{"a", 2, 0}}),
                               "mesh axis \"a\" has ICI part 2 and DCN part "
                               "0; both must be positive"));
  EXPECT_TRUE(failsWithMessage(verifyMeshAxes({{"a", 2, 1}, {"a", 2, 1}}),
                               "mesh axis \"a\" appears twice"));
  EXPECT_TRUE(failsWithMessage(verifyMeshAxes({{"", 2, 1}}),
                               "mesh axis with an empty name"));
}

TEST(MeshTest, RejectsDuplicateAxes) {
  EXPECT_TRUE(failsWith(parseMesh("data:2,fsdp:2,data:4"),
                        "mesh axis \"data\" appears twice"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:2", "data:2,data:2"),
                        "dcn mesh axis \"data\" appears twice"));
}

TEST(MeshTest, RejectsTwoFills) {
  EXPECT_TRUE(failsWith(parseMesh("data:-1,fsdp:-1", "", devices(8)),
                        "mesh axes \"data\" and \"fsdp\" are both -1; at most "
                        "one ICI axis may be -1"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:2", "data:-1,context:-1", devices(8)),
                        "mesh axes \"data\" and \"context\" are both -1; at "
                        "most one DCN axis may be -1"));
}

TEST(MeshTest, FillNeedsDeviceCount) {
  EXPECT_TRUE(failsWith(parseMesh("data:2,context:-1"),
                        "mesh axis \"context\" is -1 but the device count is "
                        "unknown; pass --devices=N"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:2", "data:-1"),
                        "dcn mesh axis \"data\" is -1 but the process count "
                        "is unknown; pass --processes=N"));
  // With both -1 the devices alone do not say how to split them.
  EXPECT_TRUE(failsWith(parseMesh("context:-1", "context:-1", devices(8)),
                        "the process count is unknown"));
}

TEST(MeshTest, FillsIciAxis) {
  absl::StatusOr<MeshSpec> mesh = parseMesh("data:2,fsdp:-1", "", devices(8));
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "data:2,fsdp:4");
  // The DCN part counts among "the other axes".
  mesh = parseMesh("data:2,fsdp:-1", "data:2", devices(16));
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "data:4(dcn=2),fsdp:4");
  EXPECT_TRUE(failsWith(parseMesh("data:3,context:-1", "", devices(8)),
                        "cannot fill mesh axis \"context\": 8 devices are not "
                        "divisible by 3 (the product of the other axes)"));
}

TEST(MeshTest, FillsDcnAxis) {
  absl::StatusOr<MeshSpec> mesh =
      parseMesh("fsdp:4", "data:-1", MeshOptions{std::nullopt, 2});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "fsdp:4,data:2(dcn=2)");
  // Without a process count the device count decides.
  mesh = parseMesh("fsdp:4", "data:-1", devices(16));
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "fsdp:4,data:4(dcn=4)");
  EXPECT_TRUE(failsWith(
      parseMesh("fsdp:4", "tensor:2,data:-1", MeshOptions{std::nullopt, 3}),
      "cannot fill dcn mesh axis \"data\": 3 processes are not divisible by "
      "2 (the product of the other dcn axes)"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:4", "data:-1", devices(6)),
                        "cannot fill dcn mesh axis \"data\": 6 devices are "
                        "not divisible by 4"));
}

TEST(MeshTest, FillsBothLikeWan) {
  // base_wan_14b.yml sets both ici_ and dcn_context_parallelism to -1.
  absl::StatusOr<MeshSpec> mesh =
      parseMesh("data:1,fsdp:1,context:-1,tensor:1",
                "data:1,fsdp:1,context:-1,tensor:1", MeshOptions{8, 2});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->toString(), "data:1,fsdp:1,context:8(dcn=2),tensor:1");
  EXPECT_EQ(*mesh->findAxis("context"), (MeshAxis{"context", 4, 2}));
  EXPECT_EQ(mesh->devicesPerProcess(), 4);
}

TEST(MeshTest, ChecksCounts) {
  EXPECT_TRUE(failsWith(parseMesh("data:8,fsdp:4", "", devices(16)),
                        "mesh data:8,fsdp:4 has 32 devices but --devices=16"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:4", "data:2", MeshOptions{8, 4}),
                        "dcn mesh data:2 has 2 processes but --processes=4"));
  EXPECT_TRUE(failsWith(parseMesh("fsdp:4", "", MeshOptions{std::nullopt, 2}),
                        "an empty dcn mesh has 1 process but --processes=2"));
  EXPECT_TRUE(
      failsWith(parseMesh("fsdp:4", "", devices(0)), "--devices=0 is invalid"));
  absl::StatusOr<MeshSpec> mesh =
      parseMesh("fsdp:4", "data:2", MeshOptions{8, 2});
  EXPECT_TRUE(mesh.ok()) << mesh.status();
}

TEST(MeshTest, MergesDcnAxesInOrder) {
  absl::StatusOr<MeshSpec> mesh =
      parseMesh("fsdp:4,tensor:2", "data:2, fsdp:2");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  ASSERT_EQ(mesh->axes().size(), 3u);
  EXPECT_EQ(mesh->axes()[0], (MeshAxis{"fsdp", 4, 2}));
  EXPECT_EQ(mesh->axes()[1], (MeshAxis{"tensor", 2, 1}));
  EXPECT_EQ(mesh->axes()[2], (MeshAxis{"data", 1, 2}));
  EXPECT_EQ(mesh->toString(), "fsdp:8(dcn=2),tensor:2,data:2(dcn=2)");
  EXPECT_EQ(mesh->numDevices(), 32);
  EXPECT_EQ(mesh->numProcesses(), 4);
  EXPECT_EQ(mesh->devicesPerProcess(), 8);
}

TEST(MeshTest, NumbersDevicesProcessMajor) {
  // data: ici 2 x dcn 2, fsdp: ici 2 -> 8 devices, 2 processes of 4.
  MeshSpec mesh({{"data", 2, 2}, {"fsdp", 2, 1}});
  // Device 5 = process 1, local 1: data = dcn 1 * 2 + ici 0, fsdp = ici 1.
  EXPECT_EQ(mesh.coordinates(5), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(mesh.coordinates(2), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(mesh.coordinates(0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(mesh.deviceId({3, 1}), 7);
  EXPECT_EQ(mesh.deviceId({2, 0}), 4);
  EXPECT_EQ(mesh.deviceId({1, 1}), 3);
  EXPECT_EQ(mesh.processOf(3), 0);
  EXPECT_EQ(mesh.processOf(4), 1);
  for (int64_t id = 0; id < mesh.numDevices(); ++id) {
    std::vector<int64_t> coords = mesh.coordinates(id);
    EXPECT_EQ(mesh.deviceId(coords), id);
    // The DCN part is the major part of the data axis.
    EXPECT_EQ(coords[0] / 2, mesh.processOf(id)) << "device " << id;
  }
}

TEST(MeshTest, RoundTripsWithSeveralDcnAxes) {
  absl::StatusOr<MeshSpec> mesh = parseMesh("data:2,fsdp:3", "fsdp:2,tensor:2");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  for (int64_t id = 0; id < mesh->numDevices(); ++id) {
    std::vector<int64_t> coords = mesh->coordinates(id);
    ASSERT_EQ(coords.size(), 3u);
    EXPECT_EQ(mesh->deviceId(coords), id);
    EXPECT_EQ(mesh->processOf(id), id / mesh->devicesPerProcess());
  }
  // Last device: every coordinate is at its maximum.
  EXPECT_EQ(mesh->coordinates(mesh->numDevices() - 1),
            (std::vector<int64_t>{1, 5, 1}));
}

TEST(MeshTest, RejectsOutOfRangeIds) {
  MeshSpec mesh({{"data", 2, 2}, {"fsdp", 2, 1}});
  EXPECT_TRUE(mesh.coordinates(8).empty());
  EXPECT_TRUE(mesh.coordinates(-1).empty());
  EXPECT_EQ(mesh.deviceId({4, 0}), -1);
  EXPECT_EQ(mesh.deviceId({0}), -1);
  EXPECT_EQ(mesh.processOf(-1), -1);
  EXPECT_EQ(mesh.processOf(8), -1);
}

} // namespace
