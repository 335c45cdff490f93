//===- ShardingPropagationTest.cpp - the propagation algorithm ------------===//
//
// Projection onto factors (compound dimensions, axes that do not fit), the
// per-factor merge and its conflict rules, and the fixed point on small
// hand-made programs: forward and backward, partial sums, one use of an
// axis per tensor, need_replication, user priorities, closed dimensions and
// the consistent layout that decides reshards.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ShardingPropagation.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::propagation;

namespace {

// Mesh axes of the tests: a=2, b=2, c=4.
constexpr AxisId a = 0, b = 1, c = 2;
const MeshShape kMesh{{2, 2, 4}};

constexpr FactorKind P = FactorKind::PassThrough;
constexpr FactorKind R = FactorKind::Reduction;
constexpr FactorKind N = FactorKind::NeedReplication;

using Mapping = FactorRule::TensorMapping;

FactorRule makeRule(SmallVector<int64_t> sizes, SmallVector<FactorKind> kinds,
                    SmallVector<Mapping> operands,
                    SmallVector<Mapping> results) {
  FactorRule rule;
  rule.factorSizes = std::move(sizes);
  rule.factorKinds = std::move(kinds);
  rule.operands = std::move(operands);
  rule.results = std::move(results);
  return rule;
}

/// An elementwise rule on a tensor of `shape` with `numOperands` operands.
FactorRule elementwise(SmallVector<int64_t> shape, int numOperands = 1) {
  Mapping mapping;
  for (int64_t d = 0, e = shape.size(); d < e; ++d)
    mapping.push_back({d});
  return makeRule(shape, SmallVector<FactorKind>(shape.size(), P),
                  SmallVector<Mapping>(numOperands, mapping), {mapping});
}

/// [m, k] x [k, n] -> [m, k]: i = m, j = k (reduction), k = n.
FactorRule matmul(int64_t m, int64_t k, int64_t n) {
  return makeRule({m, k, n}, {P, R, P}, {{{0}, {1}}, {{1}, {2}}}, {{{0}, {2}}});
}

DimSharding dim(AxisList axes, bool closed = true,
                std::optional<int64_t> priority = std::nullopt) {
  return DimSharding{std::move(axes), closed, priority};
}

TensorSharding sharding(SmallVector<DimSharding> dims) {
  TensorSharding result;
  result.dims = std::move(dims);
  return result;
}

ValueInfo source(TensorSharding annotation, int64_t bytes = 64) {
  return ValueInfo{bytes, std::move(annotation), /*isSource=*/true};
}

ValueInfo open(int64_t rank, int64_t bytes = 64) {
  return ValueInfo{bytes, TensorSharding::open(rank), /*isSource=*/false};
}

Node node(FactorRule rule, SmallVector<int> operands,
          SmallVector<int> results) {
  return Node{std::make_shared<const FactorRule>(std::move(rule)),
              std::move(operands), std::move(results)};
}

/// The axes of each dimension of `sharding`.
SmallVector<AxisList> axesOf(const TensorSharding &sharding) {
  SmallVector<AxisList> result;
  for (const DimSharding &d : sharding.dims)
    result.push_back(d.axes);
  return result;
}

using Axes = SmallVector<AxisList>;

//===----------------------------------------------------------------------===//
// Projection
//===----------------------------------------------------------------------===//

TEST(ProjectionTest, SimpleDimensions) {
  Mapping mapping = {{0}, {1}};
  TensorFactorShardings projected = projectToFactors(
      sharding({dim({a}), dim({}, false)}), mapping, {8, 8}, kMesh);
  EXPECT_EQ(projected.factors[0].axes, AxisList({a}));
  EXPECT_TRUE(projected.factors[0].closed);
  EXPECT_TRUE(projected.factors[1].axes.empty());
  EXPECT_FALSE(projected.factors[1].closed);
  EXPECT_TRUE(projected.factors[1].present);
}

TEST(ProjectionTest, CompoundDimensionSplitsMajorToMinor) {
  // A dimension of heads (4) times head size (16).
  Mapping mapping = {{0, 1}};
  // c (4) fills the heads; b goes on to the head size.
  TensorFactorShardings full =
      projectToFactors(sharding({dim({c, b})}), mapping, {4, 16}, kMesh);
  EXPECT_EQ(full.factors[0].axes, AxisList({c}));
  EXPECT_EQ(full.factors[1].axes, AxisList({b}));
  EXPECT_TRUE(full.dimFits[0]);
  // a (2) only half fills the heads: nothing is left for the head size.
  TensorFactorShardings half =
      projectToFactors(sharding({dim({a})}), mapping, {4, 16}, kMesh);
  EXPECT_EQ(half.factors[0].axes, AxisList({a}));
  EXPECT_TRUE(half.factors[1].axes.empty());
  EXPECT_EQ(axesOf(projectFromFactors(half, mapping, {4, 16}, kMesh,
                                      sharding({dim({})}))),
            Axes({{a}}));
}

TEST(ProjectionTest, AxesThatDoNotFitStay) {
  // Heads of 2 cannot take c (4): the dimension keeps its axes and its
  // factors are closed.
  Mapping mapping = {{0, 1}};
  TensorSharding original = sharding({dim({c}, false)});
  TensorFactorShardings projected =
      projectToFactors(original, mapping, {2, 16}, kMesh);
  EXPECT_FALSE(projected.dimFits[0]);
  EXPECT_EQ(projected.otherAxes, AxisList({c}));
  EXPECT_TRUE(projected.factors[0].closed);
  EXPECT_TRUE(projected.factors[1].closed);
  projected.factors[1].axes = {a};
  EXPECT_EQ(projectFromFactors(projected, mapping, {2, 16}, kMesh, original),
            original);
}

TEST(ProjectionTest, RoundTripKeepsClosednessAndPriorities) {
  Mapping mapping = {{0}, {1, 2}};
  TensorSharding original = sharding({dim({a}, true, 0), dim({b, c}, false)});
  original.replicated = {};
  TensorFactorShardings projected =
      projectToFactors(original, mapping, {8, 2, 8}, kMesh);
  EXPECT_EQ(projectFromFactors(projected, mapping, {8, 2, 8}, kMesh, original),
            original);
}

//===----------------------------------------------------------------------===//
// Merge
//===----------------------------------------------------------------------===//

TEST(MergeTest, PrefixTakesTheLonger) {
  AxisList x = {a}, xy = {a, b};
  MergeResult merged = mergeFactorAxes({{x, 64, true}, {xy, 64, true}});
  EXPECT_EQ(merged.axes, AxisList({a, b}));
  EXPECT_EQ(merged.winner, 1);
}

TEST(MergeTest, ConflictOfEqualSizesKeepsTheCommonPrefix) {
  AxisList ab = {a, b}, ac = {a, c}, bc = {b, c};
  EXPECT_EQ(mergeFactorAxes({{ab, 64, true}, {ac, 64, true}}).axes,
            AxisList({a}));
  MergeResult none = mergeFactorAxes({{ab, 64, true}, {bc, 64, true}});
  EXPECT_TRUE(none.axes.empty());
  EXPECT_EQ(none.winner, -1);
}

TEST(MergeTest, LargerTensorWins) {
  AxisList small = {a}, large = {b};
  MergeResult merged = mergeFactorAxes({{small, 64, true}, {large, 256, true}});
  EXPECT_EQ(merged.axes, AxisList({b}));
  EXPECT_EQ(merged.winner, 1);
}

TEST(MergeTest, NoGrowthAfterAConflict) {
  AxisList ab = {a, b}, ac = {a, c}, x = {a};
  // The conflict cuts to [a]; a later compatible extension is not taken.
  AxisList abc = {a, b, c};
  EXPECT_EQ(
      mergeFactorAxes({{ab, 64, true}, {ac, 64, true}, {abc, 32, true}}).axes,
      AxisList({a}));
  EXPECT_EQ(mergeFactorAxes({{x, 64, true}}).axes, AxisList({a}));
}

TEST(MergeTest, NonExpandingSideOnlyCuts) {
  AxisList x = {a}, xy = {a, b}, other = {c};
  // Forward: the result's longer axes are not taken...
  EXPECT_EQ(mergeFactorAxes({{x, 64, true}, {xy, 64, false}}).axes,
            AxisList({a}));
  // ...and a conflicting result stops the propagation.
  EXPECT_TRUE(
      mergeFactorAxes({{x, 64, true}, {other, 64, false}}).axes.empty());
}

//===----------------------------------------------------------------------===//
// Fixed point
//===----------------------------------------------------------------------===//

TEST(PropagatorTest, ForwardAndBackwardThroughElementwise) {
  // v0 -> neg -> v1 -> add(v1, v2) -> v3; v2 closed on the other dimension.
  SmallVector<ValueInfo> values = {
      source(sharding({dim({a}), dim({})})), open(2),
      source(sharding({dim({}, false), dim({b})})), open(2)};
  std::vector<Node> nodes = {node(elementwise({8, 8}), {0}, {1}),
                             node(elementwise({8, 8}, 2), {1, 2}, {3})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(1)), Axes({{a}, {b}}));
  EXPECT_EQ(axesOf(propagator.getSharding(3)), Axes({{a}, {b}}));
  // v2's open dimension 0 takes a backward; v0's closed one stays.
  EXPECT_EQ(axesOf(propagator.getSharding(2)), Axes({{a}, {b}}));
  EXPECT_EQ(axesOf(propagator.getSharding(0)), Axes({{a}, {}}));
  // v0 must be resharded for the first node, nothing else.
  NodeLayout layout = propagator.getConsistentLayout(0);
  EXPECT_FALSE(propagator.getSharding(0).sameLayout(layout.operands[0]));
  EXPECT_EQ(axesOf(layout.operands[0]), Axes({{a}, {b}}));
  layout = propagator.getConsistentLayout(1);
  EXPECT_TRUE(propagator.getSharding(2).sameLayout(layout.operands[1]));
}

TEST(PropagatorTest, ShardedContractionLeavesAPartialSum) {
  // x [8, 16] open, w [16, 32] closed on k: the result is unreduced over c.
  SmallVector<ValueInfo> values = {source(sharding({dim({a}), dim({}, false)})),
                                   source(sharding({dim({c}), dim({})})),
                                   open(2)};
  std::vector<Node> nodes = {node(matmul(8, 16, 32), {0, 1}, {2})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(0)), Axes({{a}, {c}}));
  EXPECT_EQ(axesOf(propagator.getSharding(2)), Axes({{a}, {}}));
  EXPECT_EQ(propagator.getSharding(2).unreduced, AxisList({c}));
  NodeLayout layout = propagator.getConsistentLayout(0);
  EXPECT_EQ(layout.results[0].unreduced, AxisList({c}));
  EXPECT_TRUE(propagator.getSharding(2).sameLayout(layout.results[0]));
}

TEST(PropagatorTest, AnAxisIsUsedOncePerTensor) {
  // FSDP: the batch of x is on a, and so is the contraction of w. The
  // contraction cannot take a (x holds it), so w must be gathered.
  SmallVector<ValueInfo> values = {source(sharding({dim({a}), dim({})})),
                                   source(sharding({dim({a}), dim({b})})),
                                   open(2)};
  std::vector<Node> nodes = {node(matmul(8, 16, 32), {0, 1}, {2})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(2)), Axes({{a}, {b}}));
  EXPECT_TRUE(propagator.getSharding(2).unreduced.empty());
  NodeLayout layout = propagator.getConsistentLayout(0);
  EXPECT_EQ(axesOf(layout.operands[1]), Axes({{}, {b}}));
  EXPECT_TRUE(propagator.getSharding(0).sameLayout(layout.operands[0]));
}

TEST(PropagatorTest, NeedReplicationFactorsStayWhole) {
  // A softmax-like op: dimension 1 needs replication.
  FactorRule rule = elementwise({8, 8});
  rule.factorKinds[1] = N;
  SmallVector<ValueInfo> values = {source(sharding({dim({a}), dim({b})})),
                                   open(2)};
  std::vector<Node> nodes = {node(rule, {0}, {1})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(1)), Axes({{a}, {}}));
  NodeLayout layout = propagator.getConsistentLayout(0);
  EXPECT_EQ(axesOf(layout.operands[0]), Axes({{a}, {}}));
}

TEST(PropagatorTest, HigherPriorityWinsAConflict) {
  // add(x, y): x says a (p1), y says b (p0), both closed: the result follows
  // y, whatever the order of the operands.
  SmallVector<ValueInfo> values = {source(sharding({dim({a}, true, 1)})),
                                   source(sharding({dim({b}, true, 0)})),
                                   open(1)};
  std::vector<Node> nodes = {node(elementwise({8}, 2), {0, 1}, {2})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(2)), Axes({{b}}));
  // The annotation is back in place, priority included.
  EXPECT_EQ(propagator.getSharding(0).dims[0].priority, 1);
  EXPECT_EQ(axesOf(propagator.getSharding(0)), Axes({{a}}));
  NodeLayout layout = propagator.getConsistentLayout(0);
  EXPECT_EQ(axesOf(layout.operands[0]), Axes({{b}}));
}

TEST(PropagatorTest, ReshapeKeepsTheHeadsSharding) {
  // [2, 4, 16] -> [2, 64]: heads (4) on c, merged with the head size.
  FactorRule reshape =
      makeRule({2, 4, 16}, {P, P, P}, {{{0}, {1}, {2}}}, {{{0}, {1, 2}}});
  SmallVector<ValueInfo> values = {
      source(sharding({dim({}), dim({c}), dim({})})), open(2)};
  std::vector<Node> nodes = {node(reshape, {0}, {1})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(1)), Axes({{}, {c}}));
  // And backward: a [2, 64] sharded on a (2) gives the heads a.
  values = {open(3), source(sharding({dim({}), dim({a})}))};
  Propagator backward(kMesh, values, nodes, false);
  backward.run();
  EXPECT_EQ(axesOf(backward.getSharding(0)), Axes({{}, {a}, {}}));
}

TEST(PropagatorTest, BroadcastsPropagateBackwardFirst) {
  // bias [8] on c -> broadcast -> [4, 8] -> sum over dim 0 -> [8] on b.
  // Forward first, the broadcast would hand c to its result; backward first,
  // the result takes b from the reduction, which wins.
  FactorRule broadcast = makeRule({4, 8}, {P, P}, {{{1}}}, {{{0}, {1}}});
  FactorRule reduce = makeRule({4, 8}, {R, P}, {{{0}, {1}}}, {{{1}}});
  SmallVector<ValueInfo> values = {source(sharding({dim({c}, false)}), 32),
                                   open(2, 128),
                                   source(sharding({dim({b})}), 32)};
  std::vector<Node> nodes = {node(broadcast, {0}, {1}), node(reduce, {1}, {2})};
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(1)), Axes({{}, {b}}));
  EXPECT_EQ(axesOf(propagator.getSharding(0)), Axes({{c}}));
}

TEST(PropagatorTest, ProvenanceFollowsTheChain) {
  SmallVector<ValueInfo> values = {source(sharding({dim({a})})), open(1),
                                   open(1)};
  std::vector<Node> nodes = {node(elementwise({8}), {0}, {1}),
                             node(elementwise({8}), {1}, {2})};
  Propagator propagator(kMesh, values, nodes, true);
  propagator.run();
  Provenance last = propagator.getProvenance(2, 0);
  EXPECT_EQ(last.source, 0);
  EXPECT_EQ(last.node, 1);
  EXPECT_EQ(last.fromValue, 1);
  Provenance first = propagator.getProvenance(1, 0);
  EXPECT_EQ(first.node, 0);
  EXPECT_EQ(first.fromValue, 0);
  EXPECT_EQ(propagator.getProvenance(0, 0).node, -1);
}

TEST(PropagatorTest, DeepChainsNeedNoRecursion) {
  // 20000 elementwise ops in a row, annotated at the end only.
  constexpr int kLength = 20000;
  SmallVector<ValueInfo> values;
  std::vector<Node> nodes;
  for (int i = 0; i < kLength; ++i)
    values.push_back(open(1));
  values.push_back(source(sharding({dim({c})})));
  for (int i = 0; i < kLength; ++i)
    nodes.push_back(node(elementwise({8}), {i}, {i + 1}));
  Propagator propagator(kMesh, values, nodes, false);
  propagator.run();
  EXPECT_EQ(axesOf(propagator.getSharding(0)), Axes({{c}}));
}

TEST(PropagatorTest, NodesOfOneRuleReuseVisits) {
  // Three chains of neg -> exp, each chain's ops of one rule: two chains
  // start from the same annotation (the second reuses the first's visits),
  // the third from another (it must not), and a matmul joins two of them.
  SmallVector<ValueInfo> values = {
      source(sharding({dim({a}), dim({}, false)})), open(2), open(2),
      source(sharding({dim({a}), dim({}, false)})), open(2), open(2),
      source(sharding({dim({}, false), dim({b})})), open(2), open(2),
      source(sharding({dim({}, false), dim({c})})), open(2)};
  auto program = [&](bool shareRules) {
    std::vector<Node> nodes;
    for (int chain = 0; chain < 3; ++chain) {
      int v = 3 * chain;
      nodes.push_back(node(elementwise({8, 8}), {v}, {v + 1}));
      nodes.push_back(node(elementwise({8, 8}), {v + 1}, {v + 2}));
    }
    nodes.push_back(node(matmul(8, 8, 8), {5, 9}, {10}));
    if (shareRules)
      for (size_t n = 0; n < nodes.size(); ++n)
        nodes[n].ruleId = n + 1 == nodes.size() ? 1 : 0;
    return nodes;
  };
  Propagator alone(kMesh, values, program(false), false);
  alone.run();
  Propagator shared(kMesh, values, program(true), false);
  shared.run();
  EXPECT_EQ(alone.getNumReusedVisits(), 0);
  EXPECT_GT(shared.getNumReusedVisits(), 0);
  EXPECT_EQ(shared.getNumVisits(), alone.getNumVisits());
  for (int v = 0; v < 11; ++v)
    EXPECT_EQ(shared.getSharding(v), alone.getSharding(v)) << "value " << v;
  EXPECT_EQ(axesOf(shared.getSharding(4)), Axes({{a}, {}}));
  EXPECT_EQ(axesOf(shared.getSharding(7)), Axes({{}, {b}}));
  // Provenance names the values the axes came from: no reuse.
  Propagator recorded(kMesh, values, program(true), true);
  recorded.run();
  EXPECT_EQ(recorded.getNumReusedVisits(), 0);
}

TEST(PropagatorTest, MeshesThatAnswerTheSizeQueriesAlikePropagateAlike) {
  // [2, 6, 16] -> [2, 96]: six heads on c, then an elementwise op on the
  // result. The propagation reads the sizes only through the comparisons
  // it records; a mesh that answers each alike gives the same shardings.
  FactorRule reshape =
      makeRule({2, 6, 16}, {P, P, P}, {{{0}, {1}, {2}}}, {{{0}, {1, 2}}});
  SmallVector<ValueInfo> values = {
      source(sharding({dim({}), dim({c}), dim({})})), open(2), open(2)};
  std::vector<Node> nodes = {node(reshape, {0}, {1}),
                             node(elementwise({2, 96}), {1}, {2})};
  auto propagate = [&](SmallVector<int64_t> sizes,
                       llvm::DenseSet<uint64_t> *queries) {
    MeshShape mesh{std::move(sizes)};
    mesh.queries = queries;
    Propagator propagator(mesh, values, nodes, false);
    propagator.run();
    return std::make_pair(mesh, axesOf(propagator.getSharding(2)));
  };
  llvm::DenseSet<uint64_t> queries;
  auto [recorded, sharded] = propagate({2, 2, 2}, &queries);
  EXPECT_EQ(sharded, Axes({{}, {c}}));
  ASSERT_FALSE(queries.empty());
  SmallVector<uint64_t> recordedQueries(queries.begin(), queries.end());
  auto answersAlike = [&](const MeshShape &other) {
    return MeshShape::answerAlike(recorded, other, recordedQueries);
  };
  // a and b are never compared: other sizes of theirs answer alike.
  auto [alike, alikeSharded] = propagate({4, 8, 2}, nullptr);
  EXPECT_TRUE(answersAlike(alike));
  EXPECT_EQ(alikeSharded, sharded);
  // c = 4 does not divide the six heads: another answer, another sharding.
  auto [other, otherSharded] = propagate({2, 2, 4}, nullptr);
  EXPECT_FALSE(answersAlike(other));
  EXPECT_EQ(otherSharded, Axes({{}, {}}));
  // A comparison over a repeated axis does not encode: no mesh answers it
  // alike, not even the one that made it.
  llvm::DenseSet<uint64_t> repeated;
  MeshShape mesh{{2, 2, 2}};
  mesh.queries = &repeated;
  EXPECT_TRUE(mesh.divides({c, c}, 8));
  SmallVector<uint64_t> unencoded(repeated.begin(), repeated.end());
  EXPECT_FALSE(MeshShape::answerAlike(mesh, mesh, unencoded));
}

} // namespace
