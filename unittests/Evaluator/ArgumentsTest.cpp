//===- ArgumentsTest.cpp - initializeArguments ----------------------------===//

#include "TestUtils.h"

#include "sd/Reference/Random.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <cmath>

using namespace sd::testing;
using mlir::sd::InputKind;

namespace {

class ArgumentsTest : public EvaluatorTest {
protected:
  /// Parses `source` and initializes its @main with `seed`.
  mlir::FailureOr<std::vector<Tensor>> initialize(llvm::StringRef source,
                                                  uint64_t seed) {
    module = parse(source);
    if (!module)
      return mlir::failure();
    return mlir::sd::initializeArguments(lookup(*module), seed);
  }
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

const char *kModel = R"mlir(
  func.func @main(
      %w: tensor<16x32xf32> {sd.role = #sd.param<"blocks.0.w", xavier_uniform>},
      %b: tensor<32xf32> {sd.role = #sd.param<"blocks.0.b", zeros>},
      %o: tensor<4xf32> {sd.role = #sd.param<"o", ones>},
      %c: tensor<4xbf16> {sd.role = #sd.param<"c", constant(0.3)>},
      %n: tensor<2000xf32> {sd.role = #sd.param<"n", normal(0.02)>},
      %u: tensor<1000xf32> {sd.role = #sd.param<"u", uniform(0.1)>},
      %x: tensor<2x8xf32> {sd.role = #sd.input<latents>},
      %e: tensor<2x8xf32> {sd.role = #sd.input<noise>},
      %t: tensor<100xf32> {sd.role = #sd.input<timestep>},
      %y: tensor<3x10xbf16> {sd.role = #sd.input<labels>}) {
    return
  }
)mlir";

/// The seed derivation is pinned (the runtime reproduces it): SplitMix64
/// and FNV-1a as documented in Evaluator.h, checked against an independent
/// implementation.
TEST_F(ArgumentsTest, SeedDerivationKnownAnswers) {
  EXPECT_EQ(mlir::sd::deriveSeed(0, "blocks.0.attn.q.weight"),
            0xd60bd23590f33780ULL);
  EXPECT_EQ(mlir::sd::parameterSeed(42, "blocks.0.attn.q.weight"),
            0xe2febf6d0517741eULL);
  EXPECT_EQ(mlir::sd::inputSeed(42, InputKind::latents, 0),
            0x1b9b734e430990bfULL);
}

TEST_F(ArgumentsTest, ValuesFollowInitializers) {
  auto args = initialize(kModel, 42);
  ASSERT_TRUE(mlir::succeeded(args)) << diagnostics;
  ASSERT_EQ(args->size(), 10u);
  const std::vector<Tensor> &a = *args;

  // xavier_uniform: within ±sqrt(6 / (16 + 32)), and filling the range.
  double bound = std::sqrt(6.0 / 48.0);
  double maxAbs = 0;
  for (double v : a[0].values()) {
    EXPECT_LE(std::abs(v), bound);
    maxAbs = std::max(maxAbs, std::abs(v));
  }
  EXPECT_GT(maxAbs, 0.9 * bound);
  EXPECT_EQ(a[0].dtype(), DType::F32);

  expectTensor(a[1], {32}, DType::F32, std::vector<double>(32, 0.0), 0);
  expectTensor(a[2], {4}, DType::F32, std::vector<double>(4, 1.0), 0);
  // constant(0.3), rounded to bf16.
  expectTensor(a[3], {4}, DType::BF16,
               std::vector<double>(4, ::sd::ref::roundTo(DType::BF16, 0.3)), 0);

  // normal(0.02) is exactly the counter-based stream of the parameter name.
  Tensor normal = ::sd::ref::rngNormal({2000}, mlir::sd::parameterSeed(42, "n"),
                                       0.0, 0.02, DType::F32);
  normal.roundToDType();
  EXPECT_EQ(a[4].values(), normal.values());
  double sumSq = 0;
  for (double v : a[4].values())
    sumSq += v * v;
  EXPECT_NEAR(std::sqrt(sumSq / 2000), 0.02, 0.002);

  for (double v : a[5].values()) {
    EXPECT_GE(v, -0.1);
    EXPECT_LT(v, 0.1);
  }

  // Latents and noise are standard normal from their own streams.
  Tensor latents = ::sd::ref::rngNormal(
      {2, 8}, mlir::sd::inputSeed(42, InputKind::latents, 0), 0.0, 1.0,
      DType::F32);
  latents.roundToDType();
  EXPECT_EQ(a[6].values(), latents.values());
  EXPECT_NE(a[6].values(), a[7].values());

  for (double v : a[8].values()) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }

  // Labels: one 1 per sample, at the class the sample's uniform selects.
  ASSERT_EQ(a[9].shape(), (std::vector<int64_t>{3, 10}));
  uint64_t labelSeed = mlir::sd::inputSeed(42, InputKind::labels, 0);
  for (int64_t sample = 0; sample < 3; ++sample) {
    int64_t expected =
        static_cast<int64_t>(10 * ::sd::ref::uniformAt(labelSeed, sample));
    for (int64_t c = 0; c < 10; ++c)
      EXPECT_EQ(a[9][sample * 10 + c], c == expected ? 1.0 : 0.0);
  }
}

TEST_F(ArgumentsTest, SameSeedSameValuesOtherSeedOthers) {
  auto first = initialize(kModel, 7);
  auto second = initialize(kModel, 7);
  auto other = initialize(kModel, 8);
  ASSERT_TRUE(mlir::succeeded(first) && mlir::succeeded(second) &&
              mlir::succeeded(other))
      << diagnostics;
  for (size_t i = 0; i < first->size(); ++i)
    EXPECT_EQ((*first)[i].values(), (*second)[i].values()) << "argument " << i;
  for (size_t i : {0, 4, 5, 6, 7, 8})
    EXPECT_NE((*first)[i].values(), (*other)[i].values()) << "argument " << i;
}

/// A parameter's values depend on its name, not its position.
TEST_F(ArgumentsTest, IndependentOfArgumentOrder) {
  auto original = initialize(kModel, 5);
  ASSERT_TRUE(mlir::succeeded(original)) << diagnostics;
  const char *reordered = R"mlir(
    func.func @main(
        %x: tensor<2x8xf32> {sd.role = #sd.input<latents>},
        %extra: tensor<8x8xf32> {sd.role = #sd.param<"extra", normal(1.0)>},
        %u: tensor<1000xf32> {sd.role = #sd.param<"u", uniform(0.1)>},
        %w: tensor<16x32xf32> {sd.role = #sd.param<"blocks.0.w", xavier_uniform>}) {
      return
    }
  )mlir";
  auto moved = initialize(reordered, 5);
  ASSERT_TRUE(mlir::succeeded(moved)) << diagnostics;
  EXPECT_EQ((*moved)[0].values(), (*original)[6].values());
  EXPECT_EQ((*moved)[2].values(), (*original)[5].values());
  EXPECT_EQ((*moved)[3].values(), (*original)[0].values());
}

TEST_F(ArgumentsTest, ArgumentWithoutRole) {
  auto args = initialize(R"mlir(
    func.func @main(%w: tensor<2xf32> {sd.role = #sd.param<"w", zeros>}, %x: tensor<2xf32>) {
      return
    }
  )mlir",
                         0);
  EXPECT_TRUE(mlir::failed(args));
  EXPECT_NE(diagnostics.find("argument #1 has no 'sd.role'"), std::string::npos)
      << diagnostics;
}

TEST_F(ArgumentsTest, DynamicArgument) {
  auto args = initialize(R"mlir(
    func.func @main(%x: tensor<?x4xf32> {sd.role = #sd.input<latents>}) {
      return
    }
  )mlir",
                         0);
  EXPECT_TRUE(mlir::failed(args));
  EXPECT_NE(diagnostics.find("argument #0 has dynamic type 'tensor<?x4xf32>'; "
                             "run sd-specialize-batch first"),
            std::string::npos)
      << diagnostics;
}

TEST_F(ArgumentsTest, XavierNeedsTwoDimensions) {
  auto args = initialize(R"mlir(
    func.func @main(%b: tensor<4xf32> {sd.role = #sd.param<"bias", xavier_uniform>}) {
      return
    }
  )mlir",
                         0);
  EXPECT_TRUE(mlir::failed(args));
  EXPECT_NE(diagnostics.find("argument #0 (\"bias\") is initialized with "
                             "xavier_uniform, which needs rank >= 2"),
            std::string::npos)
      << diagnostics;
}

} // namespace
