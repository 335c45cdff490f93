//===- ReshardPlannerTest.cpp - the reshard planner -----------------------===//
//
// Source/target layout pairs and the collectives the planner chooses: one
// case per collective kind, several axes per dimension, partial sums
// (all-reduce, reduce-scatter, both), the preferences (all-to-all over
// gather + slice, slice before gather, reduce before gather), all four
// MaxDiffusion axes at once, and the errors. Every plan is also replayed
// with applyStep to check that it reaches the target.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ReshardPlanner.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sd::reshard;

namespace {

// The MaxDiffusion axes, each of size 2 unless a test says otherwise.
constexpr AxisId data = 0, fsdp = 1, context = 2, tensor = 3;
const std::vector<std::string> kNames = {"data", "fsdp", "context", "tensor"};

Layout layout(SmallVector<AxisList> dims, AxisList unreduced = {}) {
  return Layout{std::move(dims), std::move(unreduced)};
}

ReshardProblem problem(SmallVector<int64_t> shape, Layout source, Layout target,
                       SmallVector<int64_t> sizes = {2, 2, 2, 2}) {
  ReshardProblem p;
  p.shape = std::move(shape);
  p.axisSizes = std::move(sizes);
  p.source = std::move(source);
  p.target = std::move(target);
  return p;
}

/// Plans `p`, checks that replaying the plan reaches the target, and
/// returns the plan's text.
std::string plan(const ReshardProblem &p, double *bytes = nullptr) {
  std::string error;
  FailureOr<ReshardPlan> result = planReshard(p, &error);
  EXPECT_TRUE(succeeded(result)) << error;
  if (failed(result))
    return "<failed>";
  Layout cur = p.source;
  llvm::sort(cur.unreduced);
  for (const Step &step : result->steps) {
    FailureOr<Layout> next = applyStep(cur, step);
    EXPECT_TRUE(succeeded(next)) << toString(step, kNames);
    if (failed(next))
      return "<invalid>";
    cur = *next;
  }
  Layout target = p.target;
  llvm::sort(target.unreduced);
  EXPECT_TRUE(cur == target) << toString(*result, kNames);
  if (bytes)
    *bytes = result->bytes;
  return toString(*result, kNames);
}

TEST(ReshardPlannerTest, SameLayoutNeedsNothing) {
  EXPECT_EQ(plan(problem({8, 8}, layout({{data}, {tensor}}),
                         layout({{data}, {tensor}}))),
            "none");
  // Replicated axes are no part of a layout: replicated to replicated.
  EXPECT_EQ(plan(problem({8}, Layout::replicated(1), Layout::replicated(1))),
            "none");
}

TEST(ReshardPlannerTest, AllGather) {
  double bytes = 0;
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{fsdp}, {}}), layout({{}, {}})), &bytes),
      "all_gather [{fsdp}, {}]");
  // The result (256 bytes) times (N-1)/N.
  EXPECT_DOUBLE_EQ(bytes, 128);
  // From the minor end of a dimension of several axes.
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{data, fsdp}, {}}), layout({{data}, {}}))),
      "all_gather [{fsdp}, {}]");
  // Two dimensions at once.
  EXPECT_EQ(plan(problem({8, 8}, layout({{data}, {tensor}}), layout({{}, {}}))),
            "all_gather [{data}, {tensor}]");
}

TEST(ReshardPlannerTest, AllSlice) {
  double bytes = -1;
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{}, {}}), layout({{data, fsdp}, {tensor}})),
           &bytes),
      "all_slice [{data, fsdp}, {tensor}]");
  EXPECT_DOUBLE_EQ(bytes, 0);
  // Appended after the axes a dimension keeps.
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{data}, {}}), layout({{data, fsdp}, {}}))),
      "all_slice [{fsdp}, {}]");
}

TEST(ReshardPlannerTest, AllToAllBeatsGatherAndSlice) {
  double bytes = 0;
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{tensor}, {}}), layout({{}, {tensor}})),
           &bytes),
      "all_to_all [tensor] 0->1");
  // 128 local bytes, half of them sent; a gather alone would send 128.
  EXPECT_DOUBLE_EQ(bytes, 64);
  // Two axes move together, keeping their order.
  EXPECT_EQ(plan(problem({8, 8}, layout({{data, context}, {}}),
                         layout({{}, {data, context}}))),
            "all_to_all [data, context] 0->1");
  // Ulysses: sequence-sharded to head-sharded attention activations.
  EXPECT_EQ(plan(problem({8, 4, 16, 8}, layout({{data}, {}, {context}, {}}),
                         layout({{data}, {context}, {}, {}}))),
            "all_to_all [context] 2->1");
}

TEST(ReshardPlannerTest, AllReduce) {
  double bytes = 0;
  EXPECT_EQ(plan(problem({8, 8}, layout({{data}, {}}, {tensor}),
                         layout({{data}, {}})),
                 &bytes),
            "all_reduce [tensor]");
  // 128 local bytes: 2 · 128 · 1/2.
  EXPECT_DOUBLE_EQ(bytes, 128);
  EXPECT_EQ(plan(problem({}, layout({}, {data, fsdp}), layout({}))),
            "all_reduce [data, fsdp]");
}

TEST(ReshardPlannerTest, ReduceScatter) {
  double bytes = 0;
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{}, {}}, {fsdp}), layout({{fsdp}, {}})),
           &bytes),
      "reduce_scatter [{fsdp}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 128);
  // One axis scattered, the other all-reduced afterwards on half the data.
  EXPECT_EQ(plan(problem({8, 8}, layout({{}, {}}, {data, tensor}),
                         layout({{}, {tensor}}))),
            "reduce_scatter [{}, {tensor}]; all_reduce [data]");
  // A partial sum that stays partial over one axis.
  EXPECT_EQ(plan(problem({8, 8}, layout({{}, {}}, {data, fsdp}),
                         layout({{fsdp}, {}}, {data}))),
            "reduce_scatter [{fsdp}, {}]");
}

TEST(ReshardPlannerTest, SliceBeforeGather) {
  EXPECT_EQ(plan(problem({8, 8}, layout({{data}, {}}), layout({{}, {tensor}}))),
            "all_slice [{}, {tensor}]; all_gather [{data}, {}]");
  // Partial sums are reduced before a gather makes them larger.
  EXPECT_EQ(
      plan(problem({8, 8}, layout({{data}, {}}, {tensor}), layout({{}, {}}))),
      "all_reduce [tensor]; all_gather [{data}, {}]");
}

TEST(ReshardPlannerTest, ReorderWithinDimension) {
  // [data, fsdp] -> [fsdp, data] is a permutation of devices, not a
  // rotation along one axis: gather the minor axis, move the other.
  double bytes = 0;
  std::string text = plan(
      problem({8, 8}, layout({{data, fsdp}, {}}), layout({{fsdp, data}, {}})),
      &bytes);
  EXPECT_EQ(text,
            "all_gather [{data, fsdp}, {}]; all_slice [{fsdp, data}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 192);
}

TEST(ReshardPlannerTest, SwapTwoDimensions) {
  // Each axis changes dimension: gather one, all-to-all the other, slice.
  EXPECT_EQ(plan(problem({8, 8}, layout({{data}, {tensor}}),
                         layout({{tensor}, {data}}))),
            "all_gather [{data}, {}]; all_to_all [tensor] 1->0; "
            "all_slice [{}, {data}]");
}

TEST(ReshardPlannerTest, AllFourAxes) {
  // FSDP-sharded weight [embed, mlp] to tensor-parallel column split, with a
  // partial sum over context: every kind of step takes part, and it costs
  // less than gathering everything and slicing.
  ReshardProblem p = problem({16, 16}, layout({{data, fsdp}, {}}, {context}),
                             layout({{}, {tensor, data}}));
  double bytes = 0;
  std::string text = plan(p, &bytes);
  EXPECT_EQ(text, "all_slice [{}, {tensor}]; all_reduce [context]; "
                  "all_gather [{fsdp}, {}]; all_to_all [data] 0->1");
  // Naive: all-reduce the 256-byte shard (256), gather to 1024 bytes (768).
  EXPECT_LT(bytes, 256 + 768);
  // Four axes on one dimension, to the reverse order on another.
  EXPECT_EQ(plan(problem({16, 16}, layout({{data, fsdp, context, tensor}, {}}),
                         layout({{}, {data, fsdp, context, tensor}}))),
            "all_to_all [data, fsdp, context, tensor] 0->1");
}

TEST(ReshardPlannerTest, LargerAxes) {
  // tensor=4: gathering it costs 3/4 of the result.
  double bytes = 0;
  EXPECT_EQ(plan(problem({8, 8}, layout({{tensor}, {}}), layout({{}, {}}),
                         {2, 2, 2, 4}),
                 &bytes),
            "all_gather [{tensor}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 192);
}

TEST(ReshardPlannerTest, IntermediatesStayDivisible) {
  // Dimension 1 (size 2) can hold only one axis at a time, so the axis it
  // loses must leave before the one it gains arrives.
  EXPECT_EQ(
      plan(problem({8, 2}, layout({{data}, {fsdp}}), layout({{fsdp}, {data}}))),
      "all_gather [{data}, {}]; all_to_all [fsdp] 1->0; "
      "all_slice [{}, {data}]");
}

TEST(ReshardPlannerTest, Errors) {
  std::string error;
  EXPECT_TRUE(failed(
      planReshard(problem({8}, layout({{}}), layout({{}}, {data})), &error)));
  EXPECT_EQ(error, "the target is a partial sum over mesh axis #0, which the "
                   "source is not");
  EXPECT_TRUE(failed(
      planReshard(problem({6}, layout({{data, fsdp}}), layout({{}})), &error)));
  EXPECT_EQ(error, "source layout splits dimension 0 of size 6 over axes of "
                   "total size 4");
  EXPECT_TRUE(failed(planReshard(
      problem({8}, layout({{data}}), layout({{data}}, {data})), &error)));
  EXPECT_EQ(error, "target layout names an axis out of range or twice");
}

} // namespace
