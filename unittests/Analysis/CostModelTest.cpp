//===- CostModelTest.cpp - Tests for the cost model -----------------------===//

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

//===----------------------------------------------------------------------===//
// Liveness
//===----------------------------------------------------------------------===//

TEST(LivePeakTest, EmptyProgramHasNoPeak) {
  LivePeak peak = computeLivePeak({}, {}, 0);
  EXPECT_EQ(peak.bytes, 0);
  EXPECT_EQ(peak.position, -1);
}

// A chain a → b → c: each op holds its operand and its result.
TEST(LivePeakTest, ChainHoldsTwoValuesAtOnce) {
  std::vector<LiveRange> ranges = {{100, 0, 1}, {10, 1, 2}, {1, 2, 2}};
  LivePeak peak = computeLivePeak(ranges, {}, 3);
  EXPECT_EQ(peak.bytes, 110);
  EXPECT_EQ(peak.position, 1);
}

// A value used late stays alive over everything in between.
TEST(LivePeakTest, LongLivedValueAddsEverywhere) {
  std::vector<LiveRange> ranges = {
      {1000, 0, 3}, {10, 1, 2}, {20, 2, 3}, {5, 3, 3}};
  LivePeak peak = computeLivePeak(ranges, {}, 4);
  EXPECT_EQ(peak.bytes, 1030);
  EXPECT_EQ(peak.position, 2);
}

// A value nobody uses is alive only where it is made; the first of equal
// peaks wins.
TEST(LivePeakTest, DeadValuesAndTies) {
  std::vector<LiveRange> ranges = {{7, 0, 0}, {7, 1, 1}};
  LivePeak peak = computeLivePeak(ranges, {}, 2);
  EXPECT_EQ(peak.bytes, 7);
  EXPECT_EQ(peak.position, 0);
}

// A callee's own activations count only while it runs.
TEST(LivePeakTest, ExtraMemoryAtOnePosition) {
  std::vector<LiveRange> ranges = {{10, 0, 2}, {10, 1, 2}, {10, 2, 2}};
  LivePeak peak = computeLivePeak(ranges, {0, 500, 0}, 3);
  EXPECT_EQ(peak.bytes, 520);
  EXPECT_EQ(peak.position, 1);
}

//===----------------------------------------------------------------------===//
// Ring convention
//===----------------------------------------------------------------------===//

TEST(RingBytesTest, FollowsTheRingFormulas) {
  using P = CommunicationPattern;
  // The worked example of the lit test: all_gather 2x8 → 4x8 f32 over 2.
  EXPECT_EQ(getRingBytesPerDevice(P::AllGather, 128, 2), 64);
  EXPECT_EQ(getRingBytesPerDevice(P::ReduceScatter, 128, 4), 96);
  EXPECT_EQ(getRingBytesPerDevice(P::AllReduce, 128, 4), 192);
  EXPECT_EQ(getRingBytesPerDevice(P::AllToAll, 128, 8), 112);
  EXPECT_EQ(getRingBytesPerDevice(P::Permute, 128, 8), 128);
  EXPECT_EQ(getRingBytesPerDevice(P::None, 128, 8), 0);
}

TEST(RingBytesTest, GroupsOfOneSendNothing) {
  EXPECT_EQ(getRingBytesPerDevice(CommunicationPattern::AllReduce, 128, 1), 0);
  EXPECT_EQ(getRingBytesPerDevice(CommunicationPattern::Permute, 128, 1), 0);
}

// A tensor that does not split evenly is sent in chunks of ⌈S/N⌉ bytes: an
// f32 scalar all-reduced over 8 devices.
TEST(RingBytesTest, RoundsChunksUp) {
  EXPECT_EQ(getRingBytesPerDevice(CommunicationPattern::AllReduce, 4, 8), 14);
  EXPECT_EQ(getRingBytesPerDevice(CommunicationPattern::AllGather, 10, 3), 8);
}

//===----------------------------------------------------------------------===//
// Every op states its cost
//===----------------------------------------------------------------------===//

// The cost model knows no op names: an sd op without CostOpInterface would
// be an error in every report. Only the mesh, which is no computation, has
// none.
TEST(CostOpInterfaceTest, EverySdOpHasACost) {
  DialectRegistry registry;
  registerCostModels(registry);
  MLIRContext context(registry);
  context.loadDialect<SDDialect>();
  int64_t numOps = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "sd" || name.getStringRef() == "sd.mesh")
      continue;
    ++numOps;
    EXPECT_TRUE(name.hasInterface<CostOpInterface>())
        << name.getStringRef().str();
  }
  EXPECT_GT(numOps, 50);
}

//===----------------------------------------------------------------------===//
// Reports of small programs
//===----------------------------------------------------------------------===//

class CostReportTest : public ::testing::Test {
protected:
  CostReportTest() {
    DialectRegistry registry;
    registerCostModels(registry);
    context.appendDialectRegistry(registry);
    context.loadDialect<SDDialect, func::FuncDialect>();
  }

  FailureOr<CostReport> report(StringRef source,
                               LayoutChoice layout = LayoutChoice::Auto) {
    module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return failure();
    func::FuncOp func = findReportFunction(*module, "");
    if (!func)
      return failure();
    return computeCostReport(func, layout);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(CostReportTest, CountsFlopsMemoryAndCollectives) {
  FailureOr<CostReport> result = report(R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=2]>
    func.func @loss(%w: tensor<8x4xf32> {sd.role = #sd.param<"w", zeros>},
                    %x: tensor<2x8xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %g = sd.all_gather %w @mesh [{"fsdp"}, {}] : (tensor<8x4xf32>) -> tensor<16x4xf32>
      %s = sd.slice %g start = [0, 0] limit = [8, 4] strides = [1, 1] : (tensor<16x4xf32>) -> tensor<8x4xf32>
      %y = sd.dot_general %x, %s batch = [] x [] contract = [1] x [0] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %l = sd.reduce_sum %y dims = [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
      %r = sd.all_reduce %l @mesh axes = ["data"] : tensor<f32>
      return %r : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->layout, ProgramLayout::Partitioned);
  EXPECT_EQ(result->numDevices, 4);
  EXPECT_EQ(result->parameterBytes, 128);
  EXPECT_EQ(result->inputBytes, 64);
  // dot 2·2·4·8 = 128, reduce_sum 8.
  EXPECT_EQ(result->flops, 136);
  // At the slice: %g (256) and %s (128).
  EXPECT_EQ(result->peakActivationBytes, 384);
  EXPECT_EQ(result->peakOp, "sd.slice");
  ASSERT_EQ(result->collectives.size(), 2u);
  EXPECT_EQ(result->collectives[0].kind, "all_gather");
  EXPECT_EQ(result->collectives[0].bytesPerDevice, 128);
  EXPECT_EQ(result->collectives[1].kind, "all_reduce");
  EXPECT_EQ(result->collectives[1].axes, std::vector<std::string>{"data"});
  EXPECT_EQ(result->collectives[1].bytesPerDevice, 4);
  EXPECT_EQ(result->collectiveBytesPerDevice, 132);
}

TEST_F(CostReportTest, AdamWCountsItsDecomposition) {
  // 16 elements: 16 FLOPs each with weight decay, 14 without; one loop
  // that reads the parameter, gradient and moments and writes three
  // results (7 × 64 bytes), the scalars (9 + 8 reads of 4 bytes) aside.
  FailureOr<CostReport> result = report(R"mlir(
    func.func @train_step(%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %mu: tensor<4x4xf32>,
                          %nu: tensor<4x4xf32>, %s: tensor<f32>)
        -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
      %p1, %mu1, %nu1 = sd.adamw %p, %g, %mu, %nu lr = %s corrections = (%s, %s) beta1 = (%s, %s) beta2 = (%s, %s) eps = %s weight_decay = %s : tensor<4x4xf32>
      %q1, %m2, %v2 = sd.adamw %p, %g, %mu, %nu lr = %s corrections = (%s, %s) beta1 = (%s, %s) beta2 = (%s, %s) eps = %s : tensor<4x4xf32>
      return %p1, %mu1, %nu1, %q1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->flops, 16 * 16 + 16 * 14);
  EXPECT_EQ(result->bytesAccessed, 2 * 7 * 64 + (9 + 8) * 4);
  EXPECT_EQ(result->matmulFlopsF32, 0);
}

TEST_F(CostReportTest, BatchedProductsAreSizedPerProduct) {
  // 512 heads' 256 × 256 × 64 score products: 4.3 GFLOP in all (large by
  // the op), 8.4 MFLOP each (small); one 512 × 512 × 512 product: medium.
  FailureOr<CostReport> result = report(R"mlir(
    func.func @loss(%q: tensor<512x256x64xf32> {sd.role = #sd.input<latents>},
                    %k: tensor<512x256x64xf32> {sd.role = #sd.input<latents>},
                    %a: tensor<512x512xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %s = sd.dot_general %q, %k batch = [0] x [0] contract = [2] x [2] : (tensor<512x256x64xf32>, tensor<512x256x64xf32>) -> tensor<512x256x256xf32>
      %p = sd.dot_general %a, %a batch = [] x [] contract = [1] x [0] : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
      %l = sd.reduce_sum %s dims = [0, 1, 2] : (tensor<512x256x256xf32>) -> tensor<f32>
      %m = sd.reduce_sum %p dims = [0, 1] : (tensor<512x512xf32>) -> tensor<f32>
      %r = sd.add %l, %m : tensor<f32>
      return %r : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  int64_t scores = 2 * 512 * 256 * 256 * int64_t{64};
  int64_t square = 2 * int64_t{512} * 512 * 512;
  EXPECT_EQ(result->matmulFlopsF32, scores + square);
  EXPECT_EQ(result->matmulFlopsF32Small, scores);
  EXPECT_EQ(result->matmulFlopsF32Medium, square);
}

// A weight gradient's product, xᵀ·dy: both operands hold the contraction
// (the tokens) on rows, the Aᵀ·B form the runtime may give another library,
// counted apart and in no size class; the rhs transposed too (xᵀ·wᵀ) and a
// lhs the lowering copies (contraction in the middle) are not that form.
TEST_F(CostReportTest, TransposedLhsProductsAreCountedApart) {
  FailureOr<CostReport> result = report(R"mlir(
    func.func @loss(%x: tensor<1024x384xf32> {sd.role = #sd.input<latents>},
                    %dy: tensor<1024x1536xf32> {sd.role = #sd.input<latents>},
                    %w: tensor<1536x1024xf32> {sd.role = #sd.input<latents>},
                    %z: tensor<8x1024x48xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %g = sd.dot_general %x, %dy batch = [] x [] contract = [0] x [0] : (tensor<1024x384xf32>, tensor<1024x1536xf32>) -> tensor<384x1536xf32>
      %t = sd.dot_general %x, %w batch = [] x [] contract = [0] x [1] : (tensor<1024x384xf32>, tensor<1536x1024xf32>) -> tensor<384x1536xf32>
      %c = sd.dot_general %z, %dy batch = [] x [] contract = [1] x [0] : (tensor<8x1024x48xf32>, tensor<1024x1536xf32>) -> tensor<8x48x1536xf32>
      %a = sd.reduce_sum %g dims = [0, 1] : (tensor<384x1536xf32>) -> tensor<f32>
      %b = sd.reduce_sum %t dims = [0, 1] : (tensor<384x1536xf32>) -> tensor<f32>
      %d = sd.reduce_sum %c dims = [0, 1, 2] : (tensor<8x48x1536xf32>) -> tensor<f32>
      %s = sd.add %a, %b : tensor<f32>
      %r = sd.add %s, %d : tensor<f32>
      return %r : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  int64_t product = 2 * int64_t{384} * 1536 * 1024;
  EXPECT_EQ(result->matmulFlopsF32, 3 * product);
  EXPECT_EQ(result->matmulFlopsF32TransposedLhs, product);
  EXPECT_EQ(result->matmulFlopsF32Medium, 2 * product);
}

// A bf16 weight gradient accumulated into an f32 result runs on the bf16
// GEMMs: its FLOPs are bf16 ones, in no f32 class (the Aᵀ·B one included).
TEST_F(CostReportTest, ProductsComputeInTheirOperandsType) {
  FailureOr<CostReport> result = report(R"mlir(
    func.func @loss(%x: tensor<1024x384xbf16> {sd.role = #sd.input<latents>},
                    %dy: tensor<1024x1536xbf16> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %g = sd.dot_general %x, %dy batch = [] x [] contract = [0] x [0] : (tensor<1024x384xbf16>, tensor<1024x1536xbf16>) -> tensor<384x1536xf32>
      %r = sd.reduce_sum %g dims = [0, 1] : (tensor<384x1536xf32>) -> tensor<f32>
      return %r : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->matmulFlopsBf16, 2 * int64_t{384} * 1536 * 1024);
  EXPECT_EQ(result->matmulFlopsF32, 0);
  EXPECT_EQ(result->matmulFlopsF32TransposedLhs, 0);
}

// A convolution's kernel borrows its im2col rows from the device pool while
// it runs: the peak counts them at the conv (a 1×1 stride-1 conv needs none).
TEST_F(CostReportTest, ConvolutionsBorrowTheirIm2colRows) {
  FailureOr<CostReport> result = report(R"mlir(
    func.func @loss(%w: tensor<3x3x4x8xf32> {sd.role = #sd.param<"w", zeros>},
                    %p: tensor<1x1x8x8xf32> {sd.role = #sd.param<"p", zeros>},
                    %x: tensor<2x6x6x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %y = sd.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<2x6x6x4xf32>, tensor<3x3x4x8xf32>) -> tensor<2x3x3x8xf32>
      %z = sd.conv2d %y, %p strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x3x3x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x3x3x8xf32>
      %l = sd.reduce_sum %z dims = [0, 1, 2, 3] : (tensor<2x3x3x8xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  // At the first conv: its result (2·3·3·8·4 = 576 bytes) and both
  // samples' rows (one GEMM takes them), 2 × [3·3 positions, 3·3·4] floats
  // = 2592 bytes. The 1×1 conv holds %y and %z (1152) and borrows nothing.
  EXPECT_EQ(result->peakActivationBytes, 576 + 2592);
  EXPECT_EQ(result->peakOp, "sd.conv2d");
}

// On bf16 operands the kernels borrow bf16 rows and the f32 products that
// take the bias before rounding (sd/Runtime/ConvScratch.h), and the peak
// counts those.
TEST_F(CostReportTest, BF16ConvolutionsBorrowRowsAndProducts) {
  FailureOr<CostReport> result = report(R"mlir(
    func.func @loss(%w: tensor<3x3x4x8xbf16> {sd.role = #sd.param<"w", zeros>},
                    %p: tensor<1x1x8x8xbf16> {sd.role = #sd.param<"p", zeros>},
                    %x: tensor<2x6x6x4xbf16> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %y = sd.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<2x6x6x4xbf16>, tensor<3x3x4x8xbf16>) -> tensor<2x3x3x8xbf16>
      %z = sd.conv2d %y, %p strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<2x3x3x8xbf16>, tensor<1x1x8x8xbf16>) -> tensor<2x3x3x8xbf16>
      %f = sd.convert %z : tensor<2x3x3x8xbf16> -> tensor<2x3x3x8xf32>
      %l = sd.reduce_sum %f dims = [0, 1, 2, 3] : (tensor<2x3x3x8xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  // At the first conv: its result (2·3·3·8·2 = 288 bytes), both samples'
  // bf16 rows (2 × [9, 36] = 648 elements, 324 floats aligned to 336) and
  // their f32 products [18, 8] (144 floats): 288 + 4·480 = 2208. The 1×1
  // conv holds %y and %z (576) and borrows its products (576).
  EXPECT_EQ(result->peakActivationBytes, 288 + 1920);
  EXPECT_EQ(result->peakOp, "sd.conv2d");
}

// A global program: the arguments' shardings give the per-device blocks.
TEST_F(CostReportTest, GlobalProgramsUseShardings) {
  FailureOr<CostReport> result = report(R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=4]>
    func.func @loss(%w: tensor<16x32xf32> {sd.role = #sd.param<"w", zeros>, sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
                    %x: tensor<8x16xf32> {sd.role = #sd.input<latents>, sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>}) -> tensor<f32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
      %l = sd.reduce_sum %y dims = [0, 1] : (tensor<8x32xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->layout, ProgramLayout::Global);
  EXPECT_EQ(result->parameterBytes, 16 * 32 * 4 / 4);
  EXPECT_EQ(result->inputBytes, 8 * 16 * 4 / 8);
  // dot: 2·8·32·16 / (data 2 × unreduced fsdp 4); reduce_sum whole.
  EXPECT_EQ(result->flops, 8192 / 8 + 256);
  EXPECT_EQ(result->numOpsWithoutSharding, 1);
  EXPECT_EQ(result->numValues, 2);
  EXPECT_EQ(result->numValuesWithoutSharding, 1);
  // At the reduction: the dot's block (8·32·4 / 2) and the scalar.
  EXPECT_EQ(result->peakActivationBytes, 512 + 4);
}

// The planner's bound: a global program's product FLOPs per device on a
// mesh of other sizes than its mesh op's (the sizes come from the spec),
// split by each product's result sharding, by element type; the other ops
// do not count, and calls make it fail.
TEST_F(CostReportTest, ShardedProductFlopsTakeTheGivenMeshSizes) {
  auto parsed = [&](StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    return module ? findReportFunction(*module, "") : func::FuncOp();
  };
  func::FuncOp func = parsed(R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=4]>
    func.func @loss(%w: tensor<16x32xf32>, %x: tensor<8x16xf32>, %v: tensor<16x6xbf16>, %y: tensor<8x16xbf16>) -> (tensor<8x32xf32>, tensor<8x6xbf16>) {
      %a = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
      %b = sd.exp %a : tensor<8x32xf32>
      %c = sd.dot_general %y, %v batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {"fsdp"}]>]>} : (tensor<8x16xbf16>, tensor<16x6xbf16>) -> tensor<8x6xbf16>
      return %b, %c : tensor<8x32xf32>, tensor<8x6xbf16>
    })mlir");
  ASSERT_TRUE(func);
  ::sd::MeshSpec mesh({{"data", 4, 1}, {"fsdp", 2, 1}});
  FailureOr<ProductFlops> flops = computeShardedProductFlops(func, mesh);
  ASSERT_TRUE(succeeded(flops));
  // 2·8·32·16 over data 4 × unreduced fsdp 2.
  EXPECT_EQ(flops->f32, 8192 / 8);
  // 2·8·6·16 over fsdp 2.
  EXPECT_EQ(flops->bf16, 1536 / 2);
  // Six columns over fsdp 4 pad to blocks of 2: the bound rounds down
  // (1536 / 4), below the 2 columns a device computes.
  ::sd::MeshSpec padded({{"data", 1, 1}, {"fsdp", 4, 1}});
  flops = computeShardedProductFlops(func, padded);
  ASSERT_TRUE(succeeded(flops));
  EXPECT_EQ(flops->bf16, 1536 / 4);
  EXPECT_LE(flops->bf16, 2 * 8 * 2 * 16);

  func = parsed(R"mlir(
    func.func private @block(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
      return %x : tensor<4x4xf32>
    }
    func.func @loss(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %h = call @block(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      return %h : tensor<4x4xf32>
    })mlir");
  ASSERT_TRUE(func);
  EXPECT_TRUE(failed(computeShardedProductFlops(func, mesh)));
}

// Calls cost their callee once per call; the callee's own activations add
// to the caller's live values while it runs.
TEST_F(CostReportTest, CallsCountTheirCallee) {
  FailureOr<CostReport> result = report(R"mlir(
    func.func private @block(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %a = sd.exp %x : tensor<4x4xf32>
      %b = sd.exp %a : tensor<4x4xf32>
      return %b : tensor<4x4xf32>
    }
    func.func @loss(%x: tensor<4x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
      %h = call @block(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %k = call @block(%h) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %l = sd.reduce_sum %k dims = [0, 1] : (tensor<4x4xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->layout, ProgramLayout::Unsharded);
  EXPECT_EQ(result->flops, 2 * 32 + 16);
  // Second call: %h (64) plus the callee's peak (%a and %b, 128).
  EXPECT_EQ(result->peakActivationBytes, 192);
  EXPECT_EQ(result->peakOp, "func.call @block > sd.exp");
  ASSERT_EQ(result->calls.size(), 1u);
  EXPECT_EQ(result->calls[0], (std::pair<std::string, int64_t>{"block", 2}));
}

// All_gathers are attributed to the parameter they gather, through views
// and calls; replicated parameters are not counted.
TEST_F(CostReportTest, CountsAllGathersPerParameter) {
  FailureOr<CostReport> result = report(R"mlir(
    sd.mesh @mesh = <["fsdp"=4]>
    func.func private @block(%w: tensor<2x8xf32>) -> tensor<8x8xf32> {
      %g = sd.all_gather %w @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<8x8xf32>
      return %g : tensor<8x8xf32>
    }
    func.func @loss(%a: tensor<2x8xf32> {sd.role = #sd.param<"a", zeros>, sd.local_sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
                    %b: tensor<2x8xf32> {sd.role = #sd.param<"b", zeros>, sd.local_sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
                    %c: tensor<8x2xf32> {sd.role = #sd.param<"c", zeros>, sd.local_sharding = #sd.sharding<@mesh, [{}, {"fsdp"}]>},
                    %d: tensor<8xf32> {sd.role = #sd.param<"d", zeros>, sd.local_sharding = #sd.sharding<@mesh, [{}]>}) -> tensor<f32> {
      %r = sd.reshape %a : (tensor<2x8xf32>) -> tensor<16xf32>
      %ga = sd.all_gather %r @mesh [{"fsdp"}] : (tensor<16xf32>) -> tensor<64xf32>
      %b1 = call @block(%b) : (tensor<2x8xf32>) -> tensor<8x8xf32>
      %b2 = call @block(%b) : (tensor<2x8xf32>) -> tensor<8x8xf32>
      %l = sd.reduce_sum %ga dims = [0] : (tensor<64xf32>) -> tensor<f32>
      return %l : tensor<f32>
    })mlir");
  ASSERT_TRUE(succeeded(result));
  const ParameterGathers &g = result->parameterGathers;
  EXPECT_EQ(g.numParameters, 4);
  EXPECT_EQ(g.numSharded, 3);
  EXPECT_EQ(g.numGatheredOnce, 1);
  EXPECT_EQ(g.numGatheredMoreThanOnce, 1);
  EXPECT_EQ(g.numNeverGathered, 1);
  ASSERT_EQ(g.exceptions.size(), 2u);
  EXPECT_EQ(g.exceptions[0].name, "b");
  EXPECT_EQ(g.exceptions[0].gathers, 2);
  EXPECT_EQ(g.exceptions[0].bytes, 256);
  EXPECT_EQ(g.exceptions[1].name, "c");
  EXPECT_EQ(g.exceptions[1].gathers, 0);
  // Three gathers of 256-byte tensors over 4 devices: 3 × 192 bytes.
  EXPECT_EQ(g.numGathers, 3);
  EXPECT_EQ(g.gatherBytes, 576);
  // Ψ: a, b and c are 256 bytes whole; each gathered once would send 192.
  EXPECT_EQ(g.shardedBytes, 768);
  EXPECT_EQ(g.groupSize, 4);
  EXPECT_EQ(g.zeroBoundBytes, 576);
}

} // namespace
