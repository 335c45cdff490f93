//===- ShardingVizTest.cpp - Tests for the sharding picture ---------------===//

#include "sd/Analysis/ShardingViz.h"

#include "gtest/gtest.h"

using namespace sd;

namespace {

using Owners = std::vector<std::vector<std::vector<int64_t>>>;

MeshSpec dataFsdp() { return MeshSpec({{"data", 2, 1}, {"fsdp", 4, 1}}); }

TEST(ShardingVizTest, FormatsDeviceLists) {
  EXPECT_EQ(formatDeviceList({0}), "0");
  EXPECT_EQ(formatDeviceList({0, 4}), "0,4");
  EXPECT_EQ(formatDeviceList({0, 1}), "0,1");
  EXPECT_EQ(formatDeviceList({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(formatDeviceList({0, 1, 2, 3, 8, 9, 10, 11}), "0-3,8-11");
  EXPECT_EQ(formatDeviceList({1, 2, 5, 7, 8, 9}), "1,2,5,7-9");
  EXPECT_EQ(formatDeviceList({}), "");
}

// A weight split over fsdp along its columns: each column block is held by
// the two data replicas, ids row-major over (data, fsdp).
TEST(ShardingVizTest, ReplicasShareABlock) {
  Owners owners = computeBlockOwners(dataFsdp(), {{}, {"fsdp"}});
  EXPECT_EQ(owners, (Owners{{{0, 4}, {1, 5}, {2, 6}, {3, 7}}}));
}

// Two axes on one dimension: block ca·size(b) + cb.
TEST(ShardingVizTest, AxesOfOneDimensionAreRowMajor) {
  Owners owners = computeBlockOwners(dataFsdp(), {{"data", "fsdp"}, {}});
  ASSERT_EQ(owners.size(), 8u);
  for (int64_t block = 0; block < 8; ++block)
    EXPECT_EQ(owners[block], (std::vector<std::vector<int64_t>>{{block}}));
  // Minor axis first: block = fsdp·2 + data.
  Owners swapped = computeBlockOwners(dataFsdp(), {{"fsdp", "data"}, {}});
  EXPECT_EQ(swapped[1], (std::vector<std::vector<int64_t>>{{4}}));
  EXPECT_EQ(swapped[2], (std::vector<std::vector<int64_t>>{{1}}));
}

TEST(ShardingVizTest, TwoShardedDimensionsMakeAGrid) {
  Owners owners = computeBlockOwners(dataFsdp(), {{"data"}, {"fsdp"}});
  ASSERT_EQ(owners.size(), 2u);
  EXPECT_EQ(owners[0], (std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {3}}));
  EXPECT_EQ(owners[1], (std::vector<std::vector<int64_t>>{{4}, {5}, {6}, {7}}));
}

// Device ids are process-major: on fsdp:2 with data:2 across processes,
// device 1 is (fsdp 1, data 0) although data is the minor axis.
TEST(ShardingVizTest, FollowsProcessMajorDeviceIds) {
  MeshSpec mesh({{"fsdp", 2, 1}, {"data", 1, 2}});
  Owners owners = computeBlockOwners(mesh, {{"fsdp"}});
  EXPECT_EQ(owners, (Owners{{{0, 2}, {1, 3}}}));
}

TEST(ShardingVizTest, ScalarsAndUnknownAxes) {
  EXPECT_EQ(computeBlockOwners(dataFsdp(), {}),
            (Owners{{{0, 1, 2, 3, 4, 5, 6, 7}}}));
  EXPECT_EQ(computeBlockOwners(dataFsdp(), {{"tensor"}}),
            (Owners{{{0, 1, 2, 3, 4, 5, 6, 7}}}));
}

TEST(ShardingVizTest, DrawsAGrid) {
  EXPECT_EQ(renderSharding(dataFsdp(), {16, 384}, {{}, {"fsdp"}}),
            "rows: dimension 0 (16): whole\n"
            "columns: dimension 1 (384): 4 blocks of 96 over fsdp\n"
            "+-----+-----+-----+-----+\n"
            "| 0,4 | 1,5 | 2,6 | 3,7 |\n"
            "+-----+-----+-----+-----+\n");
  EXPECT_EQ(renderSharding(dataFsdp(), {4}, {{"data"}}),
            "columns: dimension 0 (4): 2 blocks of 2 over data\n"
            "+-----+-----+\n"
            "| 0-3 | 4-7 |\n"
            "+-----+-----+\n");
}

TEST(ShardingVizTest, DescribesDimensionsItDoesNotDraw) {
  std::string whole = renderSharding(dataFsdp(), {8, 2, 3}, {{"data"}, {}, {}});
  EXPECT_NE(whole.find("not drawn: dimension 2 (whole)\n"), std::string::npos)
      << whole;
  std::string split =
      renderSharding(dataFsdp(), {8, 2, 8}, {{"data"}, {}, {"fsdp"}});
  EXPECT_NE(split.find("hold different blocks of them:\n"
                       "  dimension 2 (8): 4 blocks of 2 over fsdp\n"),
            std::string::npos)
      << split;
  EXPECT_NE(split.find("| 0-3 |\n"), std::string::npos) << split;
}

} // namespace
