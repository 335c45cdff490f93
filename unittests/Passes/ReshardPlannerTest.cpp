//===- ReshardPlannerTest.cpp - the reshard planner -----------------------===//
//
// Source/target layout pairs and the collectives the planner chooses: one
// case per collective kind, several axes per dimension, partial sums
// (all-reduce, reduce-scatter, both), the preferences (all-to-all over
// gather + slice, slice before gather, reduce before gather), all four
// MaxDiffusion axes at once, permutes where the problem allows them, and
// the errors. Every plan is also replayed with applyStep to check that it
// reaches the target, every permute is checked device by device, and every
// problem is planned again with permutes allowed, which must not cost more.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ReshardPlanner.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

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

/// The block (per dimension) that a device with mesh coordinates `coords`
/// holds in `layout`.
SmallVector<int64_t> blockOf(const Layout &layout, ArrayRef<int64_t> sizes,
                             ArrayRef<int64_t> coords) {
  SmallVector<int64_t> block;
  for (const AxisList &axes : layout.dims) {
    int64_t index = 0;
    for (AxisId axis : axes)
      index = index * sizes[axis] + coords[axis];
    block.push_back(index);
  }
  return block;
}

/// Checks on every device of the mesh that getPermutation hands each device
/// its block of `to`, that no member sends or receives twice, and that
/// partial-sum axes stay out of the groups.
void expectPermutes(ArrayRef<int64_t> sizes, const Layout &from,
                    const Layout &to) {
  FailureOr<Permutation> perm = getPermutation(sizes, from, to);
  ASSERT_TRUE(succeeded(perm));
  std::set<int64_t> senders;
  std::map<int64_t, int64_t> senderOf;
  for (auto [sender, receiver] : perm->pairs) {
    EXPECT_NE(sender, receiver);
    EXPECT_TRUE(senders.insert(sender).second) << sender << " sends twice";
    EXPECT_TRUE(senderOf.emplace(receiver, sender).second)
        << receiver << " receives twice";
  }
  for (AxisId axis : from.unreduced)
    EXPECT_FALSE(llvm::is_contained(perm->axes, axis));
  int64_t numDevices = 1;
  for (int64_t size : sizes)
    numDevices *= size;
  for (int64_t device = 0; device < numDevices; ++device) {
    SmallVector<int64_t> coords(sizes.size());
    for (int64_t axis = sizes.size() - 1, rest = device; axis >= 0; --axis) {
      coords[axis] = rest % sizes[axis];
      rest /= sizes[axis];
    }
    int64_t member = 0;
    for (AxisId axis : perm->axes)
      member = member * sizes[axis] + coords[axis];
    SmallVector<int64_t> source = coords;
    if (auto it = senderOf.find(member); it != senderOf.end())
      for (int64_t i = perm->axes.size() - 1, rest = it->second; i >= 0; --i) {
        source[perm->axes[i]] = rest % sizes[perm->axes[i]];
        rest /= sizes[perm->axes[i]];
      }
    EXPECT_EQ(blockOf(from, sizes, source), blockOf(to, sizes, coords))
        << "device " << device;
  }
}

/// Plans `p`, checks that replaying the plan reaches the target (and that
/// each permute hands every device its block), and returns the plan's text.
/// A problem without permutes is planned again with them, which must not
/// cost more.
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
    if (step.kind == StepKind::Permute)
      expectPermutes(p.axisSizes, cur, *next);
    cur = *next;
  }
  Layout target = p.target;
  llvm::sort(target.unreduced);
  EXPECT_TRUE(cur == target) << toString(*result, kNames);
  if (bytes)
    *bytes = result->bytes;
  if (!p.allowPermute) {
    ReshardProblem withPermute = p;
    withPermute.allowPermute = true;
    double permuteBytes = 0;
    plan(withPermute, &permuteBytes);
    EXPECT_LE(permuteBytes, result->bytes);
  }
  return toString(*result, kNames);
}

/// `p` with permutes allowed.
ReshardProblem permuting(ReshardProblem p) {
  p.allowPermute = true;
  return p;
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
  // Without permutes, [data, fsdp] -> [fsdp, data] gathers both axes and
  // slices them again (PermuteReordersDimension: one permute sends L).
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

TEST(ReshardPlannerTest, PermuteReplacesAxis) {
  // Each device takes the block of the device whose data coordinate is its
  // fsdp coordinate: one permute of L = 128 bytes. Gather + slice sends as
  // much on axes of size 2, in two collectives.
  double bytes = 0;
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data}, {}}),
                                   layout({{fsdp}, {}}))),
                 &bytes),
            "collective_permute [{fsdp}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 128);
  // On axes of size 4 the gather sends 3 L; the permute still L.
  ReshardProblem four =
      problem({8, 8}, layout({{data}, {}}), layout({{fsdp}, {}}), {4, 4, 2, 2});
  EXPECT_EQ(plan(four, &bytes),
            "all_gather [{data}, {}]; all_slice [{fsdp}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 192);
  EXPECT_EQ(plan(permuting(four), &bytes), "collective_permute [{fsdp}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 64);
  // Devices (0, 0) and (1, 1) keep their block; (0, 1) and (1, 0) trade.
  FailureOr<Permutation> perm =
      getPermutation({2, 2, 2, 2}, layout({{data}, {}}), layout({{fsdp}, {}}));
  ASSERT_TRUE(succeeded(perm));
  EXPECT_EQ(perm->axes, (AxisList{data, fsdp}));
  EXPECT_EQ(perm->pairs,
            (SmallVector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 1}}));
  // Size 4: member data·4 + fsdp sends to the transposed member.
  perm =
      getPermutation({4, 4, 2, 2}, layout({{data}, {}}), layout({{fsdp}, {}}));
  ASSERT_TRUE(succeeded(perm));
  EXPECT_EQ(perm->pairs.size(), 12u);
  EXPECT_EQ(perm->pairs.front(), (std::pair<int64_t, int64_t>{1, 4}));
}

TEST(ReshardPlannerTest, PermuteReordersDimension) {
  // [data, fsdp] -> [fsdp, data]: L = 64 instead of gathering both (192).
  double bytes = 0;
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data, fsdp}, {}}),
                                   layout({{fsdp, data}, {}}))),
                 &bytes),
            "collective_permute [{fsdp, data}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 64);
  // All four axes reversed: still one block per device (960 by gathers).
  EXPECT_EQ(plan(permuting(problem(
                     {16, 16}, layout({{data, fsdp, context, tensor}, {}}),
                     layout({{tensor, context, fsdp, data}, {}}))),
                 &bytes),
            "collective_permute [{tensor, context, fsdp, data}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 64);
}

TEST(ReshardPlannerTest, PermuteSwapsDimensions) {
  // Axes trading dimensions: 64 bytes instead of gather + all-to-all (128).
  double bytes = 0;
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data}, {tensor}}),
                                   layout({{tensor}, {data}}))),
                 &bytes),
            "collective_permute [{tensor}, {data}]");
  EXPECT_DOUBLE_EQ(bytes, 64);
  // No intermediate layout needs to fit: dimension 1 has size 2.
  EXPECT_EQ(plan(permuting(problem({8, 2}, layout({{data}, {fsdp}}),
                                   layout({{fsdp}, {data}})))),
            "collective_permute [{fsdp}, {data}]");
}

TEST(ReshardPlannerTest, PermuteBeforeGatherOrSlice) {
  // [data, fsdp] -> [fsdp]: move data to the minor end, then gather it
  // (64 + 64) instead of gathering both (192).
  double bytes = 0;
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data, fsdp}, {}}),
                                   layout({{fsdp}, {}}))),
                 &bytes),
            "collective_permute [{fsdp, data}, {}]; all_gather [{data}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 128);
  // data (4) -> [fsdp (4), tensor]: replace, then slice (128 instead of 384).
  EXPECT_EQ(plan(permuting(problem({16, 8}, layout({{data}, {}}),
                                   layout({{fsdp, tensor}, {}}), {4, 4, 2, 2})),
                 &bytes),
            "collective_permute [{fsdp}, {}]; all_slice [{tensor}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 128);
}

TEST(ReshardPlannerTest, PermuteKeepsPartialSums) {
  // The partial-sum axis stays out of the groups, so every device receives
  // a partial sum over the same tensor coordinate.
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data}, {}}, {tensor}),
                                   layout({{fsdp}, {}}, {tensor})))),
            "collective_permute [{fsdp}, {}]");
  double bytes = 0;
  EXPECT_EQ(plan(permuting(problem({8, 8}, layout({{data}, {}}, {tensor}),
                                   layout({{fsdp}, {}}))),
                 &bytes),
            "all_reduce [tensor]; collective_permute [{fsdp}, {}]");
  EXPECT_DOUBLE_EQ(bytes, 256);
}

TEST(ReshardPlannerTest, Permutations) {
  // An axis in the same place in both layouts stays out of the groups.
  FailureOr<Permutation> perm = getPermutation(
      {2, 2, 2, 2}, layout({{tensor}, {data}}), layout({{tensor}, {fsdp}}));
  ASSERT_TRUE(succeeded(perm));
  EXPECT_EQ(perm->axes, (AxisList{data, fsdp}));
  perm = getPermutation({2, 2, 2, 2}, layout({{data, context}}),
                        layout({{fsdp, context}}));
  ASSERT_TRUE(succeeded(perm));
  EXPECT_EQ(perm->axes, (AxisList{data, fsdp}));
  expectPermutes({2, 2, 2, 2}, layout({{data, context}}),
                 layout({{fsdp, context}}));
  // Uneven axes: [data (4), fsdp (2)] -> [tensor (2), context (4)].
  expectPermutes({4, 2, 4, 2}, layout({{data, fsdp}, {}}),
                 layout({{tensor, context}, {}}));
  expectPermutes({4, 2, 4, 2}, layout({{data, fsdp}, {tensor}}),
                 layout({{tensor, context}, {fsdp}}));
  // The same layout moves nothing.
  perm =
      getPermutation({2, 2, 2, 2}, layout({{data}, {}}), layout({{data}, {}}));
  ASSERT_TRUE(succeeded(perm));
  EXPECT_TRUE(perm->pairs.empty());
  // No permutation changes a dimension's product or a partial sum.
  EXPECT_TRUE(failed(getPermutation({2, 2, 2, 2}, layout({{data}, {}}),
                                    layout({{data, fsdp}, {}}))));
  EXPECT_TRUE(failed(getPermutation({2, 2, 2, 2}, layout({{data}, {}}),
                                    layout({{}, {data}}))));
  EXPECT_TRUE(failed(getPermutation({2, 2, 2, 2}, layout({{data}}, {tensor}),
                                    layout({{fsdp}}))));
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
