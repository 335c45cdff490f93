//===- ShapeOpsTest.cpp - Tests of reduce and layout reference kernels ----===//

#include "sd/Reference/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace sd::ref;

namespace {

/// Asserts exact shape and values (layout kernels only move numbers).
void expectValues(const Tensor &actual, const std::vector<int64_t> &shape,
                  const std::vector<double> &expected) {
  ASSERT_EQ(actual.shape(), shape) << actual.toString();
  EXPECT_EQ(actual.values(), expected) << actual.toString(64);
}

/// [[1, 2, 3], [4, 5, 6]].
Tensor twoByThree(DType dtype = DType::F32) {
  return Tensor({2, 3}, dtype, {1, 2, 3, 4, 5, 6});
}

/// A tensor of `shape` holding 0, 1, 2, ... in row-major order.
Tensor counting(const std::vector<int64_t> &shape) {
  Tensor t(shape, DType::F32);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t[i] = static_cast<double>(i);
  return t;
}

TEST(ShapeOpsTest, ReduceKinds) {
  Tensor x = twoByThree(DType::BF16);
  Tensor rows = reduce(ReduceKind::Sum, x, {1});
  EXPECT_EQ(rows.dtype(), DType::BF16);
  expectValues(rows, {2}, {6, 15});
  expectValues(reduce(ReduceKind::Sum, x, {0}), {3}, {5, 7, 9});
  expectValues(reduce(ReduceKind::Sum, x, {0, 1}), {}, {21});
  expectValues(reduce(ReduceKind::Sum, x, {}), {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(reduce(ReduceKind::Max, x, {1}), {2}, {3, 6});
  expectValues(reduce(ReduceKind::Min, x, {1}), {2}, {1, 4});
  expectValues(reduce(ReduceKind::Mean, x, {0}), {3}, {2.5, 3.5, 4.5});
  expectValues(reduce(ReduceKind::Mean, x, {1, 0}), {}, {3.5});
}

TEST(ShapeOpsTest, ReduceOuterAndInnerDims) {
  // x[i, j, k] = 4i + 2j + k. Summing over i and k leaves j:
  //   j = 0: 0 + 1 + 4 + 5 = 10,  j = 1: 2 + 3 + 6 + 7 = 18.
  expectValues(reduce(ReduceKind::Sum, counting({2, 2, 2}), {0, 2}), {2},
               {10, 18});
  // Max over j: max(x[i, 0, k], x[i, 1, k]) = x[i, 1, k] = 4i + 2 + k.
  expectValues(reduce(ReduceKind::Max, counting({2, 2, 2}), {1}), {2, 2},
               {2, 3, 6, 7});
}

TEST(ShapeOpsTest, ReduceSpecialValues) {
  Tensor x({2}, DType::F32, {1, std::numeric_limits<double>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(reduce(ReduceKind::Max, x, {0})[0]));
  EXPECT_TRUE(std::isnan(reduce(ReduceKind::Min, x, {0})[0]));
  Tensor empty({0, 2}, DType::F32);
  expectValues(reduce(ReduceKind::Sum, empty, {0}), {2}, {0, 0});
  EXPECT_EQ(reduce(ReduceKind::Max, empty, {0})[0],
            -std::numeric_limits<double>::infinity());
}

TEST(ShapeOpsTest, BroadcastInDim) {
  Tensor row({3}, DType::F32, {1, 2, 3});
  expectValues(broadcastInDim(row, {2, 3}, {1}), {2, 3}, {1, 2, 3, 1, 2, 3});
  Tensor col({2}, DType::F32, {7, 8});
  expectValues(broadcastInDim(col, {2, 3}, {0}), {2, 3}, {7, 7, 7, 8, 8, 8});
  // Size-1 operand dimension repeated.
  Tensor one({1, 3}, DType::F32, {1, 2, 3});
  expectValues(broadcastInDim(one, {2, 3}, {0, 1}), {2, 3}, {1, 2, 3, 1, 2, 3});
  expectValues(broadcastInDim(Tensor::scalar(5), {2, 2}, {}), {2, 2},
               {5, 5, 5, 5});
  // [2, 1] into [3, 2, 2] at dims {1, 2}: result[i, j, k] = x[j, 0].
  Tensor x({2, 1}, DType::BF16, {1, 2});
  Tensor b = broadcastInDim(x, {3, 2, 2}, {1, 2});
  EXPECT_EQ(b.dtype(), DType::BF16);
  expectValues(b, {3, 2, 2}, {1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2});
  // Dimensions may be mapped out of order: operand dim 0 -> result dim 1.
  Tensor m({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
  expectValues(broadcastInDim(m, {3, 2}, {1, 0}), {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST(ShapeOpsTest, ReshapeAndTranspose) {
  expectValues(reshape(twoByThree(), {3, 2}), {3, 2}, {1, 2, 3, 4, 5, 6});
  expectValues(reshape(Tensor({1}, DType::F32, 4.0), {}), {}, {4});
  expectValues(transpose(twoByThree(), {1, 0}), {3, 2}, {1, 4, 2, 5, 3, 6});

  // x[i, j, k] = 12i + 4j + k with shape [2, 3, 4]; permutation {2, 0, 1}
  // gives result[a, b, c] = x[b, c, a] = 12b + 4c + a, shape [4, 2, 3].
  Tensor t = transpose(counting({2, 3, 4}), {2, 0, 1});
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(t.at({0, 0, 0}), 0);
  EXPECT_EQ(t.at({0, 0, 1}), 4);
  EXPECT_EQ(t.at({1, 0, 0}), 1);
  EXPECT_EQ(t.at({3, 1, 2}), 23);
  EXPECT_EQ(t.at({2, 1, 0}), 14);
}

TEST(ShapeOpsTest, Slice) {
  // [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]: rows 0 and 2, cols 1, 3.
  expectValues(slice(counting({3, 4}), {0, 1}, {3, 4}, {2, 2}), {2, 2},
               {1, 3, 9, 11});
  expectValues(slice(counting({3, 4}), {1, 1}, {2, 3}, {1, 1}), {1, 2}, {5, 6});
  // ceil((5 - 0) / 2) = 3 elements.
  expectValues(slice(counting({5}), {0}, {5}, {2}), {3}, {0, 2, 4});
  expectValues(slice(counting({5}), {2}, {2}, {1}), {0}, {});
}

TEST(ShapeOpsTest, Concat) {
  Tensor a({2, 1}, DType::F32, {1, 2});
  Tensor b({2, 2}, DType::F32, {3, 4, 5, 6});
  expectValues(concat({&a, &b}, 1), {2, 3}, {1, 3, 4, 2, 5, 6});
  Tensor c({1, 2}, DType::F32, {1, 2});
  expectValues(concat({&c, &b, &c}, 0), {4, 2}, {1, 2, 3, 4, 5, 6, 1, 2});
}

TEST(ShapeOpsTest, Pad) {
  Tensor x({2, 2}, DType::F32, {1, 2, 3, 4});
  expectValues(pad(x, {1, 0}, {0, 1}, 9), {3, 3}, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  // Negative low padding drops the first element.
  expectValues(pad(Tensor({3}, DType::F32, {1, 2, 3}), {-1}, {2}, 0), {4},
               {2, 3, 0, 0});
  expectValues(pad(x, {0, -1}, {0, -1}, 0), {2, 0}, {});
}

TEST(ShapeOpsTest, UpsampleNearest) {
  Tensor x({1, 2, 2, 1}, DType::F32, {1, 2, 3, 4});
  expectValues(upsampleNearest(x, 2, 2), {1, 4, 4, 1},
               {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // Channels move together: pixel (0, 0) = [1, 2], pixel (0, 1) = [3, 4].
  Tensor y({1, 1, 2, 2}, DType::F32, {1, 2, 3, 4});
  expectValues(upsampleNearest(y, 1, 2), {1, 1, 4, 2},
               {1, 2, 1, 2, 3, 4, 3, 4});
}

} // namespace
