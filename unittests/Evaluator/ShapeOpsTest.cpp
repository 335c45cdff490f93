//===- ShapeOpsTest.cpp - reductions, shapes, constants, rng --------------===//

#include "TestUtils.h"

#include "sd/Reference/Random.h"

using namespace sd::testing;

namespace {

class ShapeOpsTest : public EvaluatorTest {};

/// x = [[1, 2, 3], [4, 5, 6]].
Tensor matrix23() { return Tensor({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}); }

TEST_F(ShapeOpsTest, ReductionsOverDims) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<3xf32>,
        tensor<2xf32>, tensor<f32>) {
      %s = sd.reduce_sum %x dims = [1] : (tensor<2x3xf32>) -> tensor<2xf32>
      %m = sd.reduce_max %x dims = [0] : (tensor<2x3xf32>) -> tensor<3xf32>
      %a = sd.reduce_mean %x dims = [1] : (tensor<2x3xf32>) -> tensor<2xf32>
      %t = sd.reduce_sum %x dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
      return %s, %m, %a, %t : tensor<2xf32>, tensor<3xf32>, tensor<2xf32>,
          tensor<f32>
    }
  )mlir";
  auto results = run(program, {matrix23()});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {2}, DType::F32, {6, 15});
  expectTensor((*results)[1], {3}, DType::F32, {4, 5, 6});
  expectTensor((*results)[2], {2}, DType::F32, {2, 5});
  expectTensor((*results)[3], {}, DType::F32, {21});
}

/// The operand's dimension 0 becomes result dimension 1.
TEST_F(ShapeOpsTest, BroadcastInDimDims) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2xf32>) -> tensor<3x2xf32> {
      %b = sd.broadcast_in_dim %x dims = [1] : (tensor<2xf32>) -> tensor<3x2xf32>
      return %b : tensor<3x2xf32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({2}, DType::F32, {7, 8})});
  expectTensor(r, {3, 2}, DType::F32, {7, 8, 7, 8, 7, 8});
}

TEST_F(ShapeOpsTest, ReshapeAndTranspose) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
      %r = sd.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
      %t = sd.transpose %x permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
      return %r, %t : tensor<3x2xf32>, tensor<3x2xf32>
    }
  )mlir";
  auto results = run(program, {matrix23()});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {3, 2}, DType::F32, {1, 2, 3, 4, 5, 6});
  expectTensor((*results)[1], {3, 2}, DType::F32, {1, 4, 2, 5, 3, 6});
}

TEST_F(ShapeOpsTest, SliceWithStrides) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> tensor<1x2xf32> {
      %s = sd.slice %x start = [1, 0] limit = [2, 3] strides = [1, 2] : (tensor<2x3xf32>) -> tensor<1x2xf32>
      return %s : tensor<1x2xf32>
    }
  )mlir";
  expectTensor(runOne(program, {matrix23()}), {1, 2}, DType::F32, {4, 6});
}

TEST_F(ShapeOpsTest, ConcatAlongDim) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x1xf32>) -> tensor<2x4xf32> {
      %c = sd.concat %x, %y dim = 1 : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
      return %c : tensor<2x4xf32>
    }
  )mlir";
  Tensor r = runOne(program, {matrix23(), Tensor({2, 1}, DType::F32, {9, 10})});
  expectTensor(r, {2, 4}, DType::F32, {1, 2, 3, 9, 4, 5, 6, 10});
}

/// Low/high amounts per dimension and the padding value attribute.
TEST_F(ShapeOpsTest, PadLowHighValue) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<1x2xf32>) -> tensor<2x5xf32> {
      %p = sd.pad %x low = [1, 0] high = [0, 3] {padding_value = -1.0 : f64} : (tensor<1x2xf32>) -> tensor<2x5xf32>
      return %p : tensor<2x5xf32>
    }
  )mlir";
  Tensor r = runOne(program, {Tensor({1, 2}, DType::F32, {1, 2})});
  expectTensor(r, {2, 5}, DType::F32, {-1, -1, -1, -1, -1, 1, 2, -1, -1, -1});
}

TEST_F(ShapeOpsTest, IotaAlongDim) {
  const char *program = R"mlir(
    func.func @main() -> (tensor<2x3xf32>, tensor<2x3xbf16>) {
      %a = sd.iota dim = 1 : tensor<2x3xf32>
      %b = sd.iota dim = 0 : tensor<2x3xbf16>
      return %a, %b : tensor<2x3xf32>, tensor<2x3xbf16>
    }
  )mlir";
  auto results = run(program, {});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {2, 3}, DType::F32, {0, 1, 2, 0, 1, 2});
  expectTensor((*results)[1], {2, 3}, DType::BF16, {0, 0, 0, 1, 1, 1});
}

/// Splat and dense constants, f32 and bf16 (a bf16 literal is exact).
TEST_F(ShapeOpsTest, Constants) {
  const char *program = R"mlir(
    func.func @main() -> (tensor<2x2xf32>, tensor<3xf32>, tensor<2xbf16>) {
      %s = sd.constant dense<0.25> : tensor<2x2xf32>
      %d = sd.constant dense<[1.5, -2.0, 3.25]> : tensor<3xf32>
      %h = sd.constant dense<[0.5, 1.0078125]> : tensor<2xbf16>
      return %s, %d, %h : tensor<2x2xf32>, tensor<3xf32>, tensor<2xbf16>
    }
  )mlir";
  auto results = run(program, {});
  ASSERT_TRUE(mlir::succeeded(results)) << diagnostics;
  expectTensor((*results)[0], {2, 2}, DType::F32, {0.25, 0.25, 0.25, 0.25}, 0);
  expectTensor((*results)[1], {3}, DType::F32, {1.5, -2.0, 3.25}, 0);
  expectTensor((*results)[2], {2}, DType::BF16, {0.5, 1.0078125}, 0);
}

TEST_F(ShapeOpsTest, ShardingConstraintIsIdentity) {
  const char *program = R"mlir(
    func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %y = sd.sharding_constraint %x logical = <[batch, embed]> : tensor<2x3xf32>
      return %y : tensor<2x3xf32>
    }
  )mlir";
  expectTensor(runOne(program, {matrix23()}), {2, 3}, DType::F32,
               {1, 2, 3, 4, 5, 6}, 0);
}

/// The seed attribute selects the counter-based stream: the same seed gives
/// the same values (in one run and across runs), another seed others, and
/// the values are exactly the kernel's, rounded to f32.
TEST_F(ShapeOpsTest, RngDeterminism) {
  const char *program = R"mlir(
    func.func @main() -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>,
        tensor<64xf32>) {
      %a = sd.rng_normal seed = 7 {mean = 1.0 : f64, stddev = 2.0 : f64} : tensor<4x8xf32>
      %b = sd.rng_normal seed = 7 {mean = 1.0 : f64, stddev = 2.0 : f64} : tensor<4x8xf32>
      %c = sd.rng_normal seed = 8 {mean = 1.0 : f64, stddev = 2.0 : f64} : tensor<4x8xf32>
      %u = sd.rng_uniform seed = 3 {low = -0.5 : f64, high = 0.5 : f64} : tensor<64xf32>
      return %a, %b, %c, %u : tensor<4x8xf32>, tensor<4x8xf32>,
          tensor<4x8xf32>, tensor<64xf32>
    }
  )mlir";
  auto first = run(program, {});
  auto second = run(program, {});
  ASSERT_TRUE(mlir::succeeded(first) && mlir::succeeded(second)) << diagnostics;
  EXPECT_EQ((*first)[0].values(), (*first)[1].values());
  EXPECT_NE((*first)[0].values(), (*first)[2].values());
  for (size_t i = 0; i < first->size(); ++i)
    EXPECT_EQ((*first)[i].values(), (*second)[i].values());

  Tensor expected = ::sd::ref::rngNormal({4, 8}, 7, 1.0, 2.0, DType::F32);
  expected.roundToDType();
  EXPECT_EQ((*first)[0].values(), expected.values());
  for (double v : (*first)[3].values()) {
    EXPECT_GE(v, -0.5);
    EXPECT_LT(v, 0.5);
  }
}

} // namespace
