//===- NetworkTest.cpp - The network model's parsing and pricing ----------===//

#include "sd/Sharding/Network.h"

#include "gtest/gtest.h"

#include <string>

using namespace sd;

namespace {

TEST(NetworkTest, BandwidthsParseWithTheirUnits) {
  EXPECT_DOUBLE_EQ(*parseBandwidth("100GB/s", "x"), 100e9);
  EXPECT_DOUBLE_EQ(*parseBandwidth("25Gb/s", "x"), 25e9 / 8);
  EXPECT_DOUBLE_EQ(*parseBandwidth("800MB/s", "x"), 800e6);
  EXPECT_DOUBLE_EQ(*parseBandwidth("100Mb/s", "x"), 100e6 / 8);
  EXPECT_DOUBLE_EQ(*parseBandwidth("2.5", "x"), 2.5e9);
  EXPECT_DOUBLE_EQ(*parseBandwidth("10 GB/s", "x"), 10e9);
}

TEST(NetworkTest, ABadBandwidthNamesTheFlagAndTheText) {
  for (const char *text : {"", "fast", "0", "-1GB/s", "10GB", "GB/s", "nan"}) {
    absl::StatusOr<double> value = parseBandwidth(text, "dcn-bandwidth");
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(value.status()));
    EXPECT_NE(std::string(value.status().message())
                  .find(std::string("--dcn-bandwidth='") + text + "'"),
              std::string::npos)
        << value.status();
  }
}

TEST(NetworkTest, LatenciesParseWithTheirUnits) {
  EXPECT_DOUBLE_EQ(*parseLatency("25us", "x"), 25e-6);
  EXPECT_DOUBLE_EQ(*parseLatency("1.5ms", "x"), 1.5e-3);
  EXPECT_DOUBLE_EQ(*parseLatency("800ns", "x"), 800e-9);
  EXPECT_DOUBLE_EQ(*parseLatency("0.001s", "x"), 1e-3);
  EXPECT_DOUBLE_EQ(*parseLatency("3", "x"), 3e-6);
  EXPECT_DOUBLE_EQ(*parseLatency("0", "x"), 0);
  for (const char *text : {"", "soon", "-1us", "5 minutes"}) {
    absl::StatusOr<double> value = parseLatency(text, "ici-latency");
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_NE(std::string(value.status().message()).find("--ici-latency"),
              std::string::npos);
  }
}

TEST(NetworkTest, GroupShapesTellTheLinks) {
  // data: 2 processes × 2 devices; fsdp: 2 devices in each process.
  MeshSpec mesh({{"data", 2, 2}, {"fsdp", 2, 1}});
  GroupShape data = groupShape(mesh, {0});
  EXPECT_EQ(data.size, 4);
  EXPECT_EQ(data.perProcess, 2);
  EXPECT_EQ(data.link, Link::IciAndDcn);
  GroupShape fsdp = groupShape(mesh, {1});
  EXPECT_EQ(fsdp.size, 2);
  EXPECT_EQ(fsdp.link, Link::Ici);
  MeshSpec dcnOnly({{"data", 1, 2}});
  EXPECT_EQ(groupShape(dcnOnly, {0}).link, Link::Dcn);
  EXPECT_EQ(groupShape(mesh, {}).link, Link::None);
}

TEST(NetworkTest, RingSteps) {
  EXPECT_EQ(ringSteps("all_gather", 4), 3);
  EXPECT_EQ(ringSteps("reduce_scatter", 4), 3);
  EXPECT_EQ(ringSteps("all_to_all", 4), 3);
  EXPECT_EQ(ringSteps("all_reduce", 4), 6);
  EXPECT_EQ(ringSteps("collective_permute", 4), 1);
  EXPECT_EQ(ringSteps("all_slice", 4), 0);
  EXPECT_EQ(ringSteps("all_reduce", 1), 0);
}

TEST(NetworkTest, PredictionsFollowTheFormula) {
  NetworkModel network;
  network.iciBandwidth = 10e9;
  network.dcnBandwidth = 1e9;
  network.iciLatency = 1e-6;
  network.dcnLatency = 10e-6;
  // Inside a process: bytes at the ICI rate plus N − 1 steps.
  MeshSpec ici({{"fsdp", 4, 1}});
  EXPECT_DOUBLE_EQ(
      predictCollectiveSeconds(ici, {0}, "all_gather", 2, 3000000, network),
      3e6 / 10e9 + 2 * 3 * 1e-6);
  // data: 2 processes × 2 devices. Of the bytes a device sends to its 3
  // peers, 1/3 stays in the process and 2/3 leave it, through the
  // process's one interface, which its 2 devices share.
  MeshSpec hybrid({{"data", 2, 2}});
  double bytes = 3e6;
  EXPECT_DOUBLE_EQ(
      predictCollectiveSeconds(hybrid, {0}, "all_reduce", 1, 3000000, network),
      bytes / 3 / 10e9 + 2 * (bytes * 2 / 3) / 1e9 + 6 * 10e-6);
  // A group of one costs nothing.
  EXPECT_EQ(predictCollectiveSeconds(hybrid, {}, "all_reduce", 5, 100, network),
            0);
}

TEST(NetworkTest, Formats) {
  EXPECT_EQ(formatBandwidth(3.125e9), "3.1 GB/s");
  EXPECT_EQ(formatBandwidth(800e6), "800.0 MB/s");
  EXPECT_EQ(formatSeconds(12.34e-6), "12.3 µs");
  EXPECT_EQ(formatSeconds(4.567e-3), "4.57 ms");
  EXPECT_EQ(formatSeconds(1.5), "1.50 s");
  EXPECT_STREQ(linkName(Link::IciAndDcn), "ICI+DCN");
}

} // namespace
