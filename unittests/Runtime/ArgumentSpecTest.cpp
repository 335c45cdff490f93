//===- ArgumentSpecTest.cpp - Typed arguments and their starting blocks ---===//
//
// rt::initialBlock draws each device's block alone; these tests check that
// the blocks of every partition of a tensor put together are bitwise the
// tensor the reference generator draws whole (sd/Reference/Random.h, with
// the formulas sd/Evaluator/Evaluator.h specifies), for every initializer.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/ArgumentSpec.h"
#include "sd/Reference/Random.h"
#include "sd/Runtime/Session.h"
#include "sd/Sharding/Mesh.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>

namespace sd::rt {
namespace {

/// A parameter of `shape` whose dimension d is split `splits[d]` ways by
/// its own mesh axis d (in padded blocks where that does not divide).
ArgumentSpec parameter(std::vector<int64_t> shape, std::vector<int64_t> splits,
                       InitSpec init) {
  ArgumentSpec arg;
  arg.name = arg.parameter = "blocks.0.attn.qkv.weight";
  arg.kind = ArgumentKind::Parameter;
  arg.init = init;
  arg.globalShape = shape;
  arg.localShape = shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    arg.dimAxes.push_back({static_cast<int32_t>(d)});
    arg.axisSizes.push_back(splits[d]);
    arg.localShape[d] = blockExtent(shape[d], splits[d]);
  }
  return arg;
}

/// The whole tensor from every block of `arg`, each drawn alone.
std::vector<float> fromBlocks(const ArgumentSpec &arg, uint64_t seed) {
  std::vector<float> global(numElements(arg.globalShape));
  std::vector<float> block(numElements(arg.localShape));
  int64_t devices = 1;
  for (int64_t size : arg.axisSizes)
    devices *= size;
  for (int64_t device = 0; device < devices; ++device) {
    std::vector<int64_t> coords(arg.axisSizes.size());
    for (int64_t rest = device, a = coords.size(); a-- > 0;) {
      coords[a] = rest % arg.axisSizes[a];
      rest /= arg.axisSizes[a];
    }
    initialBlock(arg, seed, arg.blockOffsets(coords), block.data());
    copyBlock(arg, coords, global.data(), block.data(), /*toGlobal=*/true);
  }
  return global;
}

/// The evaluator's whole tensor (Evaluator.h), rounded to f32 once.
std::vector<float> whole(const ArgumentSpec &arg, uint64_t seed) {
  uint64_t stream = ref::deriveSeed(seed, arg.parameter);
  ref::Tensor tensor;
  double scale = arg.init.scale;
  switch (arg.init.kind) {
  case InitKind::Zeros:
    tensor = ref::Tensor(arg.globalShape, ref::DType::F32, 0.0);
    break;
  case InitKind::Ones:
    tensor = ref::Tensor(arg.globalShape, ref::DType::F32, 1.0);
    break;
  case InitKind::Constant:
    tensor = ref::Tensor(arg.globalShape, ref::DType::F32, scale);
    break;
  case InitKind::Normal:
    tensor =
        ref::rngNormal(arg.globalShape, stream, 0.0, scale, ref::DType::F32);
    break;
  case InitKind::Uniform:
    tensor = ref::rngUniform(arg.globalShape, stream, -scale, scale,
                             ref::DType::F32);
    break;
  case InitKind::XavierUniform: {
    // fan_in the last dimension (a Linear weight [out, in]), fan_out the
    // others.
    double fanOut = 1;
    for (size_t d = 0; d + 1 < arg.globalShape.size(); ++d)
      fanOut *= arg.globalShape[d];
    double bound = std::sqrt(6.0 / (arg.globalShape.back() + fanOut));
    tensor = ref::rngUniform(arg.globalShape, stream, -bound, bound,
                             ref::DType::F32);
    break;
  }
  }
  return std::vector<float>(tensor.values().begin(), tensor.values().end());
}

bool bitwiseEqual(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ArgumentSpecTest, BlocksDrawnAloneAreTheWholeTensorBitwise) {
  const std::vector<InitSpec> inits = {
      {InitKind::Zeros, 0},       {InitKind::Ones, 0},
      {InitKind::Constant, 0.25}, {InitKind::Normal, 0.02},
      {InitKind::Uniform, 0.125}, {InitKind::XavierUniform, 0}};
  // Padded blocks too: 8 over 3 (3, 3, 2), 3 over 2 (2, 1), 16 over 5
  // (4, 4, 4, 4 and an empty block).
  const std::vector<std::vector<int64_t>> partitions = {
      {1, 1, 1}, {2, 1, 1}, {1, 3, 1}, {4, 1, 2}, {2, 3, 4},
      {3, 1, 1}, {1, 2, 1}, {1, 1, 5}, {3, 2, 5}};
  for (const InitSpec &init : inits)
    for (const std::vector<int64_t> &splits : partitions) {
      ArgumentSpec arg = parameter({8, 3, 16}, splits, init);
      EXPECT_TRUE(bitwiseEqual(fromBlocks(arg, 42), whole(arg, 42)))
          << "init " << static_cast<int>(init.kind) << " splits " << splits[0]
          << "x" << splits[1] << "x" << splits[2];
    }
}

// A padded block: its valid part, and zeros in its padding wherever it
// comes from (drawn, or copied from the global tensor).
TEST(ArgumentSpecTest, PaddedBlocksHoldZerosPastTheTensor) {
  ArgumentSpec arg = parameter({5, 7}, {2, 3}, {InitKind::Normal, 1.0});
  ASSERT_EQ(arg.localShape, (std::vector<int64_t>{3, 3}));
  std::vector<int64_t> last = {1, 2};
  EXPECT_EQ(arg.blockOffsets(last), (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(arg.validShape(last), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(arg.validShape({0, 0}), (std::vector<int64_t>{3, 3}));
  std::vector<std::pair<int64_t, int64_t>> rows;
  arg.forEachValidRow(last, [&](int64_t at, int64_t from, int64_t count) {
    EXPECT_EQ(count, 1);
    rows.emplace_back(at, from);
  });
  // Local rows 0 and 1 of [3, 3], global rows 3 and 4 of [5, 7], column 6.
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, int64_t>>{{0, 27}, {3, 34}}));

  std::vector<float> drawn(9, -1.0f), copied(9, -1.0f);
  initialBlock(arg, 3, arg.blockOffsets(last), drawn.data());
  std::vector<float> global = whole(arg, 3);
  copyBlock(arg, last, global.data(), copied.data(), /*toGlobal=*/false);
  EXPECT_TRUE(bitwiseEqual(drawn, copied));
  EXPECT_EQ(drawn[0], global[27]);
  EXPECT_EQ(drawn[3], global[34]);
  for (int i : {1, 2, 4, 5, 6, 7, 8})
    EXPECT_EQ(drawn[i], 0.0f) << i;
}

TEST(ArgumentSpecTest, EmaStartsAtItsParameterAndMomentsAtZero) {
  ArgumentSpec param = parameter({6, 4}, {2, 1}, {InitKind::Normal, 1.0});
  ArgumentSpec ema = param, mu = param;
  ema.kind = mu.kind = ArgumentKind::OptimizerState;
  ema.moment = MomentKind::Ema;
  mu.moment = MomentKind::Mu;
  EXPECT_TRUE(bitwiseEqual(fromBlocks(ema, 7), fromBlocks(param, 7)));
  EXPECT_EQ(fromBlocks(mu, 7), std::vector<float>(24, 0.0f));
  // Another seed, other values.
  EXPECT_FALSE(bitwiseEqual(fromBlocks(param, 8), fromBlocks(param, 7)));
}

TEST(ArgumentSpecTest, RolesAndMomentsHaveNames) {
  for (InputRole role :
       {InputRole::Latents, InputRole::Noise, InputRole::Timestep,
        InputRole::Context, InputRole::Labels, InputRole::Pooled,
        InputRole::Guidance})
    EXPECT_EQ(parseInputRole(inputRoleName(role)), role);
  EXPECT_EQ(parseInputRole("step"), std::nullopt);
  EXPECT_STREQ(momentKindName(MomentKind::Ema), "ema");
  EXPECT_EQ(elementBytes(ElementType::F32), 4);
}

} // namespace
} // namespace sd::rt
