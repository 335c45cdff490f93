//===- ShardingRuleBuilderTest.cpp - ShardingRuleBuilder ------------------===//
//
// The builder's basics and the reshape factorization: fixed cases with the
// expected rule, and a property check over many reshapes that every shared
// factor means the same index range on both sides of the reshape.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/ShardingRuleBuilder.h"
#include "sd/IR/SDDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

using namespace mlir;
using namespace mlir::sd;

namespace {

constexpr int64_t kNoDim = ShardingRuleBuilder::kNoDim;

class ShardingRuleBuilderTest : public ::testing::Test {
protected:
  ShardingRuleBuilderTest() { context.loadDialect<SDDialect>(); }

  Type tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float32Type::get(&context));
  }

  /// The rule as printed in the IR, without the `#sd.sharding_rule` prefix.
  static std::string str(OpShardingRuleAttr rule) {
    std::string text;
    llvm::raw_string_ostream os(text);
    Attribute(rule).print(os);
    StringRef body = text;
    body.consume_front("#sd.sharding_rule");
    return body.str();
  }

  /// The rule of a reshape from `in` to `out`, or "failure".
  std::string reshape(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
    ShardingRuleBuilder builder(&context, {tensor(in)}, {tensor(out)});
    if (failed(builder.addReshape(in, out)))
      return "failure";
    return str(builder.build());
  }

  MLIRContext context;
};

TEST_F(ShardingRuleBuilderTest, FactorNames) {
  EXPECT_EQ(getFactorName(0), "i");
  EXPECT_EQ(getFactorName(17), "z");
  EXPECT_EQ(getFactorName(18), "z_1");
  EXPECT_EQ(getFactorName(27), "z_10");
  for (int64_t index : {0, 5, 17, 18, 19, 100})
    EXPECT_EQ(getFactorIndex(getFactorName(index)), index);
  for (StringRef bad : {"", "a", "h", "ij", "z_", "z_0", "z_01", "i_1", "Z"})
    EXPECT_EQ(getFactorIndex(bad), std::nullopt) << bad.str();
}

TEST_F(ShardingRuleBuilderTest, AddFactorSkipsNoDim) {
  // A matmul: [8, 16] x [16, 32] -> [8, 32].
  ShardingRuleBuilder builder(&context, {tensor({8, 16}), tensor({16, 32})},
                              {tensor({8, 32})});
  builder.addFactor({0, kNoDim}, {0}, 8)
      .addFactor({1, 0}, {kNoDim}, 16, FactorKind::Reduction)
      .addFactor({kNoDim, 1}, {1}, 32);
  EXPECT_EQ(builder.getNumFactors(), 3);
  OpShardingRuleAttr rule = builder.build();
  EXPECT_EQ(str(rule),
            "<([i, j], [j, k]) -> ([i, k]) {i=8, j=16, k=32}, reduction={j}>");
  EXPECT_EQ(rule.getFactorKind(0), FactorKind::PassThrough);
  EXPECT_EQ(rule.getFactorKind(1), FactorKind::Reduction);
}

TEST_F(ShardingRuleBuilderTest, AddFactorAppendsMinorFactors) {
  // Two factors on one dimension: the first added is the major one.
  ShardingRuleBuilder builder(&context, {tensor({6})}, {tensor({2, 3})});
  builder.addFactor({0}, {0}, 2).addFactor({0}, {1}, 3);
  EXPECT_EQ(str(builder.build()), "<([ij]) -> ([i, j]) {i=2, j=3}>");
}

TEST_F(ShardingRuleBuilderTest, AddPointwiseWithKinds) {
  ShardingRuleBuilder builder(&context, {tensor({2, 4, 8}), tensor({2, 4, 8})},
                              {tensor({2, 4, 8})});
  builder.addPointwise({2, 4, 8}, [](int64_t dim) {
    return dim == 2 ? FactorKind::NeedReplication : FactorKind::PassThrough;
  });
  EXPECT_EQ(str(builder.build()), "<([i, j, k], [i, j, k]) -> ([i, j, k]) "
                                  "{i=2, j=4, k=8}, need_replication={k}>");
}

TEST_F(ShardingRuleBuilderTest, AddPointwiseSkipsScalars) {
  ShardingRuleBuilder builder(&context, {tensor({2, 4})}, {tensor({})});
  builder.addPointwise({2, 4});
  EXPECT_EQ(str(builder.build()), "<([i, j]) -> ([]) {i=2, j=4}>");
}

TEST_F(ShardingRuleBuilderTest, EmptyBuilder) {
  ShardingRuleBuilder builder(&context, {}, {tensor({})});
  EXPECT_EQ(str(builder.build()), "<() -> ([]) {}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeSplit) {
  EXPECT_EQ(reshape({6}, {2, 3}), "<([ij]) -> ([i, j]) {i=2, j=3}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeMerge) {
  EXPECT_EQ(reshape({2, 3}, {6}), "<([i, j]) -> ([ij]) {i=2, j=3}>");
  EXPECT_EQ(reshape({2, 3, 4}, {6, 4}),
            "<([i, j, k]) -> ([ij, k]) {i=2, j=3, k=4}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeGcd) {
  // 8 = 4 x 2 and 6 = 2 x 3: the 2 in the middle is shared by both.
  EXPECT_EQ(reshape({4, 6}, {8, 3}),
            "<([i, jk]) -> ([ij, k]) {i=4, j=2, k=3}>");
  // Heads: [B, S, 384] -> [B, S, 6, 64].
  EXPECT_EQ(reshape({2, 8, 384}, {2, 8, 6, 64}),
            "<([i, j, kl]) -> ([i, j, k, l]) {i=2, j=8, k=6, l=64}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeSizeOneDims) {
  EXPECT_EQ(reshape({1, 6}, {6, 1}), "<([1, i]) -> ([i, 1]) {i=6}>");
  EXPECT_EQ(reshape({1, 1}, {1}), "<([1, 1]) -> ([1]) {}>");
  EXPECT_EQ(reshape({2, 1, 3}, {6}), "<([i, 1, j]) -> ([ij]) {i=2, j=3}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeIdentical) {
  EXPECT_EQ(reshape({2, 3, 4}, {2, 3, 4}),
            "<([i, j, k]) -> ([i, j, k]) {i=2, j=3, k=4}>");
  EXPECT_EQ(reshape({}, {}), "<([]) -> ([]) {}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeUnaligned) {
  // Nothing lines up: each dimension keeps factors of its own.
  EXPECT_EQ(reshape({2, 3}, {3, 2}),
            "<([i, k]) -> ([j, l]) {i=2, j=3, k=3, l=2}>");
  // ... until the element counts meet again (after 6 elements).
  EXPECT_EQ(reshape({2, 3, 5}, {3, 2, 5}),
            "<([i, k, m]) -> ([j, l, m]) {i=2, j=3, k=3, l=2, m=5}>");
}

TEST_F(ShardingRuleBuilderTest, ReshapeFailures) {
  EXPECT_EQ(reshape({2, 3}, {5}), "failure");
  EXPECT_EQ(reshape({0, 3}, {0}), "failure");
  ShardingRuleBuilder builder(&context, {tensor({ShapedType::kDynamic, 3})},
                              {tensor({ShapedType::kDynamic})});
  EXPECT_TRUE(failed(
      builder.addReshape({ShapedType::kDynamic, 3}, {ShapedType::kDynamic})));
}

/// Checks that `rule` describes the reshape `in` -> `out`: every dimension
/// is the product of its factors, no tensor uses a factor twice, and for
/// each element the shared factors take the same index on both sides (the
/// index of a factor is its digit in the dimension's mixed-radix index).
void expectValidReshape(OpShardingRuleAttr rule, ArrayRef<int64_t> in,
                        ArrayRef<int64_t> out) {
  ArrayRef<int64_t> sizes = rule.getFactorSizes();
  auto factorsOf = [&](TensorMappingAttr mapping, int64_t dim) {
    return mapping.getDimMappings()[dim].getFactorIndices();
  };
  auto check = [&](TensorMappingAttr mapping, ArrayRef<int64_t> shape) {
    ASSERT_EQ(mapping.getRank(), static_cast<int64_t>(shape.size()));
    std::set<int64_t> used;
    for (auto [dim, size] : llvm::enumerate(shape)) {
      int64_t product = 1;
      for (int64_t factor : factorsOf(mapping, dim)) {
        product *= sizes[factor];
        EXPECT_TRUE(used.insert(factor).second);
      }
      EXPECT_EQ(product, size);
    }
  };
  TensorMappingAttr inMapping = rule.getOperandMappings()[0];
  TensorMappingAttr outMapping = rule.getResultMappings()[0];
  check(inMapping, in);
  check(outMapping, out);
  // Factor index values of the element at row-major position `flat`.
  auto digits = [&](TensorMappingAttr mapping, ArrayRef<int64_t> shape,
                    int64_t flat) {
    std::map<int64_t, int64_t> values;
    for (int64_t dim = shape.size() - 1; dim >= 0; --dim) {
      int64_t index = flat % shape[dim];
      flat /= shape[dim];
      ArrayRef<int64_t> factors = factorsOf(mapping, dim);
      for (int64_t factor : llvm::reverse(factors)) {
        values[factor] = index % sizes[factor];
        index /= sizes[factor];
      }
    }
    return values;
  };
  int64_t total = std::accumulate(in.begin(), in.end(), int64_t{1},
                                  std::multiplies<int64_t>());
  for (int64_t flat = 0; flat < total; ++flat) {
    std::map<int64_t, int64_t> inDigits = digits(inMapping, in, flat);
    std::map<int64_t, int64_t> outDigits = digits(outMapping, out, flat);
    for (auto [factor, value] : inDigits) {
      if (outDigits.count(factor)) {
        ASSERT_EQ(outDigits[factor], value)
            << "factor " << getFactorName(factor) << " at element " << flat;
      }
    }
  }
}

TEST_F(ShardingRuleBuilderTest, ReshapePropertyOverManyShapes) {
  // All shapes of up to 3 dimensions (sizes 1..12) with 12, 24 or 36
  // elements, reshaped into each other.
  std::vector<SmallVector<int64_t>> shapes;
  for (int64_t total : {12, 24, 36}) {
    for (int64_t a = 1; a <= total; ++a) {
      if (total % a)
        continue;
      if (a == total)
        shapes.push_back({a});
      for (int64_t b = 1; b <= total / a; ++b) {
        if ((total / a) % b)
          continue;
        int64_t c = total / a / b;
        if (c == 1)
          shapes.push_back({a, b});
        if (a <= 12 && b <= 12 && c <= 12)
          shapes.push_back({a, b, c});
      }
    }
  }
  int64_t checked = 0, shared = 0;
  auto count = [](ArrayRef<int64_t> shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                           std::multiplies<int64_t>());
  };
  for (const SmallVector<int64_t> &in : shapes)
    for (const SmallVector<int64_t> &out : shapes) {
      if (count(in) != count(out))
        continue;
      ShardingRuleBuilder builder(&context, {tensor(in)}, {tensor(out)});
      ASSERT_TRUE(succeeded(builder.addReshape(in, out)));
      OpShardingRuleAttr rule = builder.build();
      expectValidReshape(rule, in, out);
      for (int64_t f = 0; f < rule.getNumFactors(); ++f)
        shared += rule.getOperandMappings()[0].containsFactor(f) &&
                  rule.getResultMappings()[0].containsFactor(f);
      ++checked;
    }
  EXPECT_GT(checked, 500);
  EXPECT_GT(shared, checked); // most reshapes share more than one factor
}

} // namespace
