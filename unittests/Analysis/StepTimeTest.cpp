//===- StepTimeTest.cpp - The step-time model's arithmetic ----------------===//

#include "sd/Analysis/StepTime.h"

#include "gtest/gtest.h"

using namespace mlir::sd;

namespace {

/// A profile with round numbers: 100 FLOP/s in f32, 400 in bf16, 10 bytes/s
/// of memory, 1000 bytes of it; ICI 2 bytes/s, no latency.
::sd::HardwareProfile roundProfile() {
  ::sd::HardwareProfile p;
  p.name = "round";
  p.device = {100, 400, 10, 1000};
  p.network.iciBandwidth = 2;
  p.network.iciLatency = 0;
  return p;
}

CostReport fsdp2Report() {
  CostReport report;
  absl::StatusOr<::sd::MeshSpec> mesh = ::sd::parseMesh("fsdp:2");
  EXPECT_TRUE(mesh.ok());
  report.mesh = *mesh;
  report.meshSpec = "fsdp:2";
  report.numDevices = 2;
  report.layout = ProgramLayout::Partitioned;
  report.matmulFlopsF32 = 1000;
  report.matmulFlopsBf16 = 2000;
  report.matmulBytes = 50;
  report.otherBytes = 40;
  report.otherMemoryBytes = 30;
  report.parameterBytes = 600;
  return report;
}

/// `count` all_gathers over fsdp:2 (`async` of them asynchronous) sending
/// `bytes` per device in all.
CollectiveSummary fsdpGathers(int64_t count, int64_t async, int64_t bytes) {
  CollectiveSummary gather;
  gather.kind = "all_gather";
  gather.axes = {"fsdp"};
  gather.groupSize = 2;
  gather.count = count;
  gather.asyncCount = async;
  gather.bytesPerDevice = bytes;
  return gather;
}

// A calibrated profile rates small and medium f32 products apart: of the
// 1000 f32 FLOPs, 200 small at 20 FLOP/s (10 s) and 300 medium at 50 (6 s),
// the other 500 at 100 (5 s); bf16 2000/400 = 5 s.
TEST(StepTimeTest, SmallAndMediumProductsAtTheirOwnRates) {
  CostReport report = fsdp2Report();
  report.matmulFlopsF32Small = 200;
  report.matmulFlopsF32Medium = 300;
  ::sd::HardwareProfile profile = roundProfile();
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 15);
  profile.device.f32FlopsSmall = 20;
  profile.device.f32FlopsMedium = 50;
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 26);
}

// Attention's kernels at their own rate: of the 1000 f32 FLOPs, 100 of
// attention at 10 FLOP/s (10 s), the other 900 at 100 (9 s); bf16 5 s.
// Without the rate, attention goes at the medium products' (here 50: 2 s).
TEST(StepTimeTest, AttentionAtItsOwnRate) {
  CostReport report = fsdp2Report();
  report.attentionFlopsF32 = 100;
  ::sd::HardwareProfile profile = roundProfile();
  profile.device.f32FlopsMedium = 50;
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 16);
  profile.device.f32FlopsAttention = 10;
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 24);
}

// Products in the Aᵀ·B form at their own rate: of the 1000 f32 FLOPs, 300
// at 30 FLOP/s (10 s), the other 700 at 100 (7 s); bf16 5 s. Without the
// rate, they go at the medium products' (here 50: 6 s).
TEST(StepTimeTest, TransposedLhsProductsAtTheirOwnRate) {
  CostReport report = fsdp2Report();
  report.matmulFlopsF32TransposedLhs = 300;
  ::sd::HardwareProfile profile = roundProfile();
  profile.device.f32FlopsMedium = 50;
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 18);
  profile.device.f32FlopsTransposedLhs = 30;
  EXPECT_DOUBLE_EQ(predictStepTime(report, profile).matmulSeconds, 22);
}

// Compute: products 1000/100 + 2000/400 = 15 s (their 50 bytes take 5 s);
// other ops 30/10 = 3 s (of their 40 bytes, 30 touch memory). An all_gather
// sending 20 bytes per device: 10 s, of which the asynchronous half (5 s) hides
// behind compute.
TEST(StepTimeTest, ComputeCommunicationAndWhatHides) {
  CostReport report = fsdp2Report();
  report.collectives.push_back(fsdpGathers(2, 1, 20));
  StepTimePrediction p = predictStepTime(report, roundProfile());
  EXPECT_DOUBLE_EQ(p.matmulSeconds, 15);
  EXPECT_DOUBLE_EQ(p.otherSeconds, 3);
  EXPECT_DOUBLE_EQ(p.communicationSeconds, 10);
  EXPECT_DOUBLE_EQ(p.hiddenSeconds, 5);
  EXPECT_DOUBLE_EQ(p.stepSeconds, 23);
  EXPECT_EQ(p.neededBytes, 600);
  EXPECT_EQ(p.stateBytes, 600);
  EXPECT_TRUE(p.fits());
}

// The state is what no remat policy or accumulation changes: parameters and
// optimizer state, not the inputs or the activation peak.
TEST(StepTimeTest, StateIsParametersAndOptimizerState) {
  CostReport report = fsdp2Report();
  report.optimizerStateBytes = 1200;
  report.inputBytes = 7;
  report.peakActivationBytes = 90;
  StepTimePrediction p = predictStepTime(report, roundProfile());
  EXPECT_EQ(p.stateBytes, 1800);
  EXPECT_EQ(p.neededBytes, 1897);
}

// Memory-bound products take their bytes' time; asynchronous collectives
// hide only up to the compute time; a report larger than the device does
// not fit.
TEST(StepTimeTest, RooflineAndLimits) {
  CostReport report = fsdp2Report();
  report.matmulBytes = 500;
  report.parameterBytes = 2000;
  report.collectives.push_back(fsdpGathers(1, 1, 400));
  StepTimePrediction p = predictStepTime(report, roundProfile());
  EXPECT_DOUBLE_EQ(p.matmulSeconds, 50);
  EXPECT_DOUBLE_EQ(p.communicationSeconds, 200);
  EXPECT_DOUBLE_EQ(p.hiddenSeconds, 53);
  EXPECT_DOUBLE_EQ(p.stepSeconds, 200);
  EXPECT_FALSE(p.fits());
}

} // namespace
