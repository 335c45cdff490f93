//===- ReportTest.cpp - Tests for the report printers ---------------------===//

#include "sd/Analysis/Report.h"

#include "gtest/gtest.h"

using namespace mlir::sd;

namespace {

TEST(ReportTest, FormatsBytesInSIUnits) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(999), "999 B");
  EXPECT_EQ(formatBytes(1000), "1.0 kB");
  EXPECT_EQ(formatBytes(33'000'000), "33.0 MB");
  EXPECT_EQ(formatBytes(131'480'000), "131.5 MB");
  // Rounds into the next unit rather than printing 1000.0 kB.
  EXPECT_EQ(formatBytes(999'960), "1.0 MB");
  EXPECT_EQ(formatBytes(5'500'000'000'000), "5.5 TB");
}

TEST(ReportTest, FormatsFlops) {
  EXPECT_EQ(formatFlops(512), "512 FLOP");
  EXPECT_EQ(formatFlops(1'200'000'000), "1.2 GFLOP");
}

TEST(ReportTest, JsonHasExactNumbers) {
  CostReport report;
  report.function = "loss";
  report.meshName = "mesh";
  report.meshSpec = "fsdp:2";
  report.numDevices = 2;
  report.layout = ProgramLayout::Partitioned;
  report.parameterBytes = 123'456'789;
  report.flops = 9'876'543'210;
  CollectiveSummary gather;
  gather.kind = "all_gather";
  gather.axes = {"fsdp"};
  gather.groupSize = 2;
  gather.count = 3;
  gather.tensorBytes = 384;
  gather.bytesPerDevice = 192;
  report.collectives.push_back(gather);
  report.collectiveBytesPerDevice = 192;

  llvm::json::Value json = reportToJson(report);
  const llvm::json::Object *root = json.getAsObject();
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->getString("program"), "partitioned");
  const llvm::json::Object *perDevice = root->getObject("per_device");
  ASSERT_NE(perDevice, nullptr);
  EXPECT_EQ(perDevice->getInteger("flops"), 9'876'543'210);
  EXPECT_EQ(perDevice->getObject("parameters")->getInteger("bytes"),
            123'456'789);
  EXPECT_EQ(perDevice->getInteger("total_bytes"), 123'456'789);
  const llvm::json::Array *collectives = root->getArray("collectives");
  ASSERT_NE(collectives, nullptr);
  ASSERT_EQ(collectives->size(), 1u);
  const llvm::json::Object *first = (*collectives)[0].getAsObject();
  EXPECT_EQ(first->getString("kind"), "all_gather");
  EXPECT_EQ(first->getInteger("bytes_per_device"), 192);
  EXPECT_EQ(first->getInteger("count"), 3);
  const llvm::json::Object *gathers = root->getObject("parameter_gathers");
  ASSERT_NE(gathers, nullptr);
  EXPECT_EQ(gathers->getInteger("zero_bound_bytes"), 0);
}

TEST(ReportTest, ParameterGathersListTheExceptions) {
  CostReport report;
  report.function = "loss";
  report.layout = ProgramLayout::Partitioned;
  ParameterGathers &g = report.parameterGathers;
  g.numParameters = 3;
  g.numSharded = 2;
  g.numGatheredMoreThanOnce = 1;
  g.numNeverGathered = 1;
  g.exceptions = {{"qkv", 3, 600'000}, {"table", 0, 400'000}};
  g.numGathers = 3;
  g.gatherBytes = 2'100'000;
  g.shardedBytes = 1'600'000;
  g.groupSize = 8;
  g.zeroBoundBytes = 1'400'000;

  std::string text;
  llvm::raw_string_ostream os(text);
  printReport(report, ReportFormat::Text, os);
  EXPECT_NE(text.find("more than once" + std::string(17, ' ') + "1   qkv x3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("never" + std::string(26, ' ') + "1   table"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("all_gather bytes" + std::string(10, ' ') +
                      "2.1 MB   3 all_gathers"),
            std::string::npos)
      << text;

  llvm::json::Value json = reportToJson(report);
  const llvm::json::Object *gathers =
      json.getAsObject()->getObject("parameter_gathers");
  ASSERT_NE(gathers, nullptr);
  EXPECT_EQ(gathers->getInteger("group_size"), 8);
  EXPECT_EQ(gathers->getInteger("all_gather_bytes"), 2'100'000);
  const llvm::json::Array *exceptions = gathers->getArray("exceptions");
  ASSERT_NE(exceptions, nullptr);
  ASSERT_EQ(exceptions->size(), 2u);
  EXPECT_EQ((*exceptions)[0].getAsObject()->getString("name"), "qkv");
  EXPECT_EQ((*exceptions)[0].getAsObject()->getInteger("gathers"), 3);
  EXPECT_EQ((*exceptions)[0].getAsObject()->getInteger("bytes"), 600'000);
}

} // namespace
