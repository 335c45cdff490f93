//===- SampleBlocksTest.cpp - Tests for the planner's sample blocks -------===//

#include "sd/Analysis/SampleBlocks.h"
#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/CostModels.h"

#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::sd;

namespace {

class SampleBlocksTest : public ::testing::Test {
protected:
  SampleBlocksTest() {
    DialectRegistry registry;
    registerCostModels(registry);
    context.appendDialectRegistry(registry);
    context.loadDialect<SDDialect, func::FuncDialect>();
  }

  func::FuncOp parse(StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    return module ? findReportFunction(*module, "train_step") : func::FuncOp();
  }

  /// The op of `func` whose sd.name is `name`.
  static Operation *named(func::FuncOp func, StringRef name) {
    Operation *found = nullptr;
    func.walk([&](Operation *op) {
      if (auto attr = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
        if (attr.getValue() == name)
          found = op;
    });
    return found;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(SampleBlocksTest, MarksSurviveFusionOfOneBlock) {
  Location file = FileLineColLoc::get(&context, "model.mlir", 3, 5);
  Location other = FileLineColLoc::get(&context, "model.mlir", 4, 5);
  Location middle = markSampleBlock(file, {0, 1});
  std::optional<SampleBlock> block = sampleBlockOf(middle);
  ASSERT_TRUE(block);
  EXPECT_EQ(block->chain, 0);
  EXPECT_EQ(block->position, 1);
  EXPECT_FALSE(sampleBlockOf(file));
  // Marking again keeps the first mark (a call inside a marked block).
  EXPECT_EQ(markSampleBlock(middle, {1, 2}), middle);
  // What a rewrite fuses from one block's ops is in that block; from two
  // blocks', or from a block's and an unmarked op's, in none.
  Location sameBlock =
      FusedLoc::get(&context, {middle, markSampleBlock(other, {0, 1})});
  EXPECT_EQ(sampleBlockOf(sameBlock)->position, 1);
  EXPECT_FALSE(sampleBlockOf(
      FusedLoc::get(&context, {middle, markSampleBlock(other, {0, 2})})));
  EXPECT_FALSE(sampleBlockOf(FusedLoc::get(&context, {middle, other})));
  // Through names and call sites.
  EXPECT_TRUE(
      sampleBlockOf(NameLoc::get(StringAttr::get(&context, "x"), sameBlock)));
  EXPECT_TRUE(sampleBlockOf(CallSiteLoc::get(middle, other)));
}

// Three blocks of a chain: the middle block holds its marked ops, what
// only they read, what only the return reads of theirs, and the parameter
// only it reads.
constexpr const char *kSample = R"mlir(
  #b0 = loc(fused<{sd.sample_block = array<i64: 0, 0>}>["model.mlir":1:1])
  #b1 = loc(fused<{sd.sample_block = array<i64: 0, 1>}>["model.mlir":1:1])
  #b2 = loc(fused<{sd.sample_block = array<i64: 0, 2>}>["model.mlir":1:1])
  func.func @train_step(%w0: tensor<64x64xf32> {sd.role = #sd.param<"w0", zeros>},
                        %w1: tensor<64x64xf32> {sd.role = #sd.param<"w1", zeros>},
                        %w2: tensor<64x128xf32> {sd.role = #sd.param<"w2", zeros>},
                        %x: tensor<8x64xf32> {sd.role = #sd.input<latents>})
      -> (tensor<f32>, tensor<64x64xf32>) {
    %e = sd.exp %x {sd.name = "embed"} : tensor<8x64xf32>
    %h0 = sd.dot_general %e, %w0 batch = [] x [] contract = [1] x [0] {sd.name = "h0"} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc(#b0)
    %n1 = sd.neg %w1 {sd.name = "n1"} : tensor<64x64xf32>
    %h1 = sd.dot_general %h0, %n1 batch = [] x [] contract = [1] x [0] {sd.name = "h1"} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32> loc(#b1)
    %h2 = sd.dot_general %h1, %w2 batch = [] x [] contract = [1] x [0] {sd.name = "h2"} : (tensor<8x64xf32>, tensor<64x128xf32>) -> tensor<8x128xf32> loc(#b2)
    %l = sd.reduce_sum %h2 dims = [0, 1] {sd.name = "loss"} : (tensor<8x128xf32>) -> tensor<f32>
    %u1 = sd.exp %w1 {sd.name = "u1"} : tensor<64x64xf32> loc(#b1)
    %r1 = sd.neg %u1 {sd.name = "r1"} : tensor<64x64xf32>
    return %l, %r1 : tensor<f32>, tensor<64x64xf32>
  }
)mlir";

TEST_F(SampleBlocksTest, FindsTheMiddleBlock) {
  func::FuncOp func = parse(kSample);
  ASSERT_TRUE(func);
  MiddleBlocks middle = findMiddleBlocks(func);
  EXPECT_TRUE(middle.marked);
  for (StringRef name : {"h1", "n1", "u1", "r1"}) {
    auto found = middle.ops.find(named(func, name));
    ASSERT_NE(found, middle.ops.end()) << name.str();
    EXPECT_EQ(found->second, 0) << name.str();
  }
  // The block before the middle one is not in it, though only the middle
  // block reads its output.
  for (StringRef name : {"embed", "h0", "h2", "loss"})
    EXPECT_FALSE(middle.ops.count(named(func, name))) << name.str();
  EXPECT_EQ(middle.arguments, (SmallVector<int64_t>{-1, 0, -1, -1}));
}

// The base is the program without the middle block, the block after it
// reading the block before it: the same counts and peak as that program
// written out.
TEST_F(SampleBlocksTest, BaseIsTheProgramWithoutTheMiddleBlock) {
  func::FuncOp func = parse(kSample);
  ASSERT_TRUE(func);
  FailureOr<SampleReports> sample =
      computeSampleReports(func, LayoutChoice::Auto, 1);
  ASSERT_TRUE(succeeded(sample));
  FailureOr<CostReport> whole = computeCostReport(func, LayoutChoice::Auto);
  ASSERT_TRUE(succeeded(whole));
  ASSERT_EQ(sample->samples.size(), 1u);
  EXPECT_EQ(sample->samples[0].flops, whole->flops);
  EXPECT_EQ(sample->samples[0].peakActivationBytes, whole->peakActivationBytes);

  func::FuncOp cut = parse(R"mlir(
    func.func @train_step(%w0: tensor<64x64xf32> {sd.role = #sd.param<"w0", zeros>},
                          %w2: tensor<64x128xf32> {sd.role = #sd.param<"w2", zeros>},
                          %x: tensor<8x64xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %e = sd.exp %x : tensor<8x64xf32>
      %h0 = sd.dot_general %e, %w0 batch = [] x [] contract = [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
      %h2 = sd.dot_general %h0, %w2 batch = [] x [] contract = [1] x [0] : (tensor<8x64xf32>, tensor<64x128xf32>) -> tensor<8x128xf32>
      %l = sd.reduce_sum %h2 dims = [0, 1] : (tensor<8x128xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(cut);
  FailureOr<CostReport> base = computeCostReport(cut, LayoutChoice::Auto);
  ASSERT_TRUE(succeeded(base));
  EXPECT_EQ(sample->base.numParameters, base->numParameters);
  EXPECT_EQ(sample->base.parameterBytes, base->parameterBytes);
  EXPECT_EQ(sample->base.numInputs, base->numInputs);
  EXPECT_EQ(sample->base.flops, base->flops);
  EXPECT_EQ(sample->base.matmulFlopsF32, base->matmulFlopsF32);
  EXPECT_EQ(sample->base.bytesAccessed, base->bytesAccessed);
  EXPECT_EQ(sample->base.otherMemoryBytes, base->otherMemoryBytes);
  EXPECT_EQ(sample->base.numValues, base->numValues);
  // h0 lives until h2 reads it in h1's place: both are alive at h2.
  EXPECT_EQ(sample->base.peakActivationBytes, base->peakActivationBytes);
  EXPECT_EQ(sample->base.peakActivationBytes, (8 * 64 + 8 * 128) * 4);
  // One block more adds w1's FLOPs and bytes.
  EXPECT_GT(sample->samples[0].flops, sample->base.flops);
}

// The peaks with more blocks count what the middle block holds once per
// copy of it, and its values alive only inside it once: the peak moves to
// where the middle block's held values are.
TEST(SampleLivenessTest, PeakFollowsTheCopies) {
  SampleLiveness liveness;
  liveness.numPositions = 5;
  // The middle block's ops run at positions 1 and 2.
  liveness.positionChain = {-1, 0, 0, -1, -1};
  liveness.extra = {0, 0, 0, 0, 5};
  // A 100-byte value of the base at 0; the middle block's 40-byte value
  // alive only inside it; its 30-byte gradient sum, held after it; a
  // 50-byte value of the base at 3.
  liveness.device = {{100, 0, 0}, {40, 1, 2}, {30, 2, 4}, {50, 3, 3}};
  liveness.deviceChain = {-1, 0, 0, -1};
  liveness.gradientSum = {false, false, true, false};
  liveness.host = {{10, 1, 4}};
  liveness.hostChain = {0};
  SampleLiveness::Peaks one = liveness.peaksFor({1});
  EXPECT_EQ(one.activationBytes, 100);
  EXPECT_EQ(one.gradientSumBytes, 0);
  EXPECT_EQ(one.hostBytes, 10);
  EXPECT_EQ(liveness.peaksFor({2}).activationBytes, 110);
  // Three copies: 50 + 3 * 30 at position 3, which no line through the
  // peaks of one and two copies (100, 110) gives. Inside the block the
  // other two copies hold their 30 bytes, not the 40 only it needs:
  // 40 + 30 + 2 * 30 = 130 at position 2.
  SampleLiveness::Peaks three = liveness.peaksFor({3});
  EXPECT_EQ(three.activationBytes, 140);
  EXPECT_EQ(three.gradientSumBytes, 90);
  EXPECT_EQ(three.hostBytes, 30);
  // A chain the ranges do not name counts nothing more.
  EXPECT_EQ(liveness.peaksFor({1, 7}).activationBytes, 100);
}

// computeSampleReports keeps the sample's ranges with their middle
// blocks' chains: with one copy the peak is the sample's own.
TEST_F(SampleBlocksTest, LivenessOfTheSample) {
  func::FuncOp func = parse(kSample);
  ASSERT_TRUE(func);
  FailureOr<SampleReports> sample =
      computeSampleReports(func, LayoutChoice::Auto, 1);
  ASSERT_TRUE(succeeded(sample));
  const SampleLiveness &liveness = sample->liveness;
  EXPECT_EQ(liveness.device.size(), liveness.deviceChain.size());
  EXPECT_EQ(liveness.peaksFor({1}).activationBytes,
            sample->samples[0].peakActivationBytes);
  // h1 (8x64 f32), which the next copy would keep, and n1, u1 and r1
  // (64x64) go with each copy of the middle block.
  int64_t middleBytes = 0;
  for (auto [range, chain] : llvm::zip(liveness.device, liveness.deviceChain))
    if (chain == 0)
      middleBytes += range.bytes;
  EXPECT_EQ(middleBytes, (8 * 64 + 3 * 64 * 64) * 4);
}

TEST_F(SampleBlocksTest, UnmarkedProgramIsNoSample) {
  func::FuncOp func = parse(R"mlir(
    func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = sd.neg %x : tensor<4xf32>
      return %y : tensor<4xf32>
    })mlir");
  ASSERT_TRUE(func);
  EXPECT_FALSE(findMiddleBlocks(func).marked);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  EXPECT_TRUE(failed(computeSampleReports(func, LayoutChoice::Auto, 1)));
  EXPECT_NE(message.find("no op is marked as the middle block of chain 0"),
            std::string::npos)
      << message;
}

} // namespace
