//===- ReshardPlanner.cpp - collectives that change a sharding ------------===//
//
// Dijkstra over layouts (see ReshardPlanner.h). Moves are restricted to
// those that can be part of a cheapest plan: axes are only appended where
// the target wants them next, only axes outside the common prefix of a
// dimension and its target are gathered, and a permute gives each dimension
// a prefix of its target followed by some of its own axes, so the search
// stays small (a few hundred layouts for four axes).
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ReshardPlanner.h"
#include "sd/Support/Debug.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Format.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

#define DEBUG_TYPE "sd-reshard"
#define DBGS() (llvm::dbgs() << "[" DEBUG_TYPE "] ")

using namespace mlir;
using namespace mlir::sd::reshard;

Layout Layout::replicated(int64_t rank) {
  Layout layout;
  layout.dims.resize(rank);
  return layout;
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

static bool endsWith(ArrayRef<AxisId> axes, ArrayRef<AxisId> suffix) {
  return suffix.size() <= axes.size() &&
         axes.take_back(suffix.size()) == suffix;
}

static bool isUsed(const Layout &layout, AxisId axis) {
  return llvm::is_contained(layout.unreduced, axis) ||
         llvm::any_of(layout.dims, [&](const AxisList &dim) {
           return llvm::is_contained(dim, axis);
         });
}

FailureOr<Layout> mlir::sd::reshard::applyStep(const Layout &layout,
                                               const Step &step) {
  Layout result = layout;
  int64_t rank = layout.dims.size();
  bool perDim =
      step.kind == StepKind::AllGather || step.kind == StepKind::AllSlice ||
      step.kind == StepKind::ReduceScatter || step.kind == StepKind::Permute;
  if (perDim && static_cast<int64_t>(step.dimAxes.size()) != rank)
    return failure();
  switch (step.kind) {
  case StepKind::AllGather:
    for (auto [dim, axes] : llvm::enumerate(step.dimAxes)) {
      if (!endsWith(result.dims[dim], axes))
        return failure();
      result.dims[dim].truncate(result.dims[dim].size() - axes.size());
    }
    return result;
  case StepKind::AllSlice:
  case StepKind::ReduceScatter:
    for (auto [dim, axes] : llvm::enumerate(step.dimAxes))
      for (AxisId axis : axes) {
        bool partial = llvm::is_contained(result.unreduced, axis);
        // A slice takes a free axis; a reduce-scatter a partial-sum axis.
        if ((step.kind == StepKind::AllSlice) == partial ||
            (!partial && isUsed(result, axis)))
          return failure();
        llvm::erase(result.unreduced, axis);
        result.dims[dim].push_back(axis);
      }
    return result;
  case StepKind::AllReduce:
    for (AxisId axis : step.axes) {
      if (!llvm::is_contained(result.unreduced, axis))
        return failure();
      llvm::erase(result.unreduced, axis);
    }
    return result;
  case StepKind::AllToAll: {
    if (step.srcDim < 0 || step.srcDim >= rank || step.tgtDim < 0 ||
        step.tgtDim >= rank || step.srcDim == step.tgtDim ||
        !endsWith(result.dims[step.srcDim], step.axes))
      return failure();
    AxisList &src = result.dims[step.srcDim];
    src.truncate(src.size() - step.axes.size());
    result.dims[step.tgtDim].append(step.axes.begin(), step.axes.end());
    return result;
  }
  case StepKind::Permute: {
    // The new dimensions name every axis at most once, and no partial-sum
    // axis: a permute moves blocks, it does not reduce them.
    result.dims = step.dimAxes;
    AxisList all(result.unreduced);
    for (const AxisList &dim : result.dims)
      all.append(dim.begin(), dim.end());
    llvm::sort(all);
    if ((!all.empty() && all.front() < 0) ||
        std::adjacent_find(all.begin(), all.end()) != all.end())
      return failure();
    return result;
  }
  }
  return failure();
}

//===----------------------------------------------------------------------===//
// Permutations
//===----------------------------------------------------------------------===//

FailureOr<Permutation>
mlir::sd::reshard::getPermutation(ArrayRef<int64_t> axisSizes,
                                  const Layout &from, const Layout &to) {
  int64_t numAxes = axisSizes.size();
  AxisList fromUnreduced(from.unreduced), toUnreduced(to.unreduced);
  llvm::sort(fromUnreduced);
  llvm::sort(toUnreduced);
  if (from.dims.size() != to.dims.size() || fromUnreduced != toUnreduced)
    return failure();
  // Where each axis sits in a layout: its dimension (-1 for none) and its
  // stride, the product of the sizes of the axes minor to it.
  struct Place {
    int64_t dim = -1;
    int64_t stride = 0;
  };
  auto places =
      [&](const Layout &layout,
          SmallVectorImpl<int64_t> &products) -> FailureOr<SmallVector<Place>> {
    SmallVector<Place> result(numAxes);
    for (auto [dim, axes] : llvm::enumerate(layout.dims)) {
      int64_t stride = 1;
      for (AxisId axis : llvm::reverse(axes)) {
        if (axis < 0 || axis >= numAxes || result[axis].dim >= 0)
          return failure();
        result[axis] = Place{static_cast<int64_t>(dim), stride};
        stride *= axisSizes[axis];
      }
      products.push_back(stride);
    }
    return result;
  };
  SmallVector<int64_t> fromProducts, toProducts;
  FailureOr<SmallVector<Place>> fromPlaces = places(from, fromProducts);
  FailureOr<SmallVector<Place>> toPlaces = places(to, toProducts);
  if (failed(fromPlaces) || failed(toPlaces) || fromProducts != toProducts)
    return failure();

  // An axis in the same place in both layouts adds the same offset to both
  // blocks, so holders and needers of a block agree on it: it stays out.
  Permutation perm;
  for (AxisId axis = 0; axis < numAxes; ++axis) {
    const Place &a = (*fromPlaces)[axis], &b = (*toPlaces)[axis];
    bool used = a.dim >= 0 || b.dim >= 0;
    bool aligned = a.dim == b.dim && a.stride == b.stride;
    if (used && !aligned)
      perm.axes.push_back(axis);
  }
  int64_t groupSize = 1;
  for (AxisId axis : perm.axes)
    groupSize *= axisSizes[axis];
  // The block (per-dimension offsets from the group's axes) that member `g`
  // holds in a layout.
  int64_t rank = from.dims.size();
  auto block = [&](ArrayRef<Place> where, int64_t g) {
    std::vector<int64_t> offsets(rank, 0);
    for (AxisId axis : llvm::reverse(perm.axes)) {
      int64_t coord = g % axisSizes[axis];
      g /= axisSizes[axis];
      if (where[axis].dim >= 0)
        offsets[where[axis].dim] += coord * where[axis].stride;
    }
    return offsets;
  };
  // Per block, its holders and its needers in ascending order.
  std::map<std::vector<int64_t>,
           std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      blocks;
  for (int64_t g = 0; g < groupSize; ++g) {
    blocks[block(*fromPlaces, g)].first.push_back(g);
    blocks[block(*toPlaces, g)].second.push_back(g);
  }
  for (auto &[offsets, members] : blocks) {
    auto &[holders, needers] = members;
    std::vector<int64_t> senders, receivers;
    std::set_difference(holders.begin(), holders.end(), needers.begin(),
                        needers.end(), std::back_inserter(senders));
    std::set_difference(needers.begin(), needers.end(), holders.begin(),
                        holders.end(), std::back_inserter(receivers));
    if (senders.size() != receivers.size())
      return failure();
    for (auto [sender, receiver] : llvm::zip_equal(senders, receivers))
      perm.pairs.push_back({sender, receiver});
  }
  llvm::sort(perm.pairs);
  return perm;
}

//===----------------------------------------------------------------------===//
// Search
//===----------------------------------------------------------------------===//

namespace {
/// Scaled cost: bytes × (product of all axis sizes), an integer because
/// every group size divides that product. Ties go to fewer collectives.
struct Cost {
  int64_t bytes = 0;
  int64_t ops = 0;
  bool operator<(const Cost &o) const {
    return std::tie(bytes, ops) < std::tie(o.bytes, o.ops);
  }
};

struct Node {
  Layout layout;
  /// The kind of the step that led here (-1 at the source): a next step of
  /// the same kind merges with it and costs no extra collective.
  int lastKind = -1;
  Cost cost;
  int parent = -1;
  Step step;
};

class Planner {
public:
  explicit Planner(const ReshardProblem &problem) : p(problem) {
    meshProduct = 1;
    for (int64_t size : p.axisSizes)
      meshProduct *= size;
    globalBytes = p.elementBytes;
    for (int64_t size : p.shape)
      globalBytes *= size;
  }

  LogicalResult validate(const Layout &layout, StringRef which,
                         std::string *error) const;
  FailureOr<ReshardPlan> run(std::string *error);

private:
  int64_t product(ArrayRef<AxisId> axes) const {
    int64_t n = 1;
    for (AxisId axis : axes)
      n *= p.axisSizes[axis];
    return n;
  }
  int64_t localBytes(const Layout &layout) const {
    int64_t bytes = globalBytes;
    for (const AxisList &dim : layout.dims)
      bytes /= product(dim);
    return bytes;
  }
  /// Scaled bytes sent by a ring collective over a group of `n` on `bytes`.
  int64_t ringCost(int64_t bytes, int64_t n) const {
    return bytes * (n - 1) * (meshProduct / n);
  }
  bool fits(const Layout &layout) const {
    for (auto [dim, axes] : llvm::enumerate(layout.dims))
      if (p.shape[dim] % product(axes) != 0)
        return false;
    return true;
  }
  void expand(int node, SmallVectorImpl<std::pair<Step, Cost>> &moves) const;
  void addPermutes(const Layout &cur,
                   SmallVectorImpl<std::pair<Step, Cost>> &moves) const;
  static std::vector<int> key(const Layout &layout, int lastKind);

  const ReshardProblem &p;
  int64_t meshProduct;
  int64_t globalBytes;
  std::vector<Node> nodes;
};
} // namespace

LogicalResult Planner::validate(const Layout &layout, StringRef which,
                                std::string *error) const {
  auto fail = [&](const std::string &why) {
    if (error)
      *error = which.str() + " layout " + why;
    return failure();
  };
  if (layout.dims.size() != p.shape.size())
    return fail("has " + std::to_string(layout.dims.size()) +
                " dimensions for a tensor of rank " +
                std::to_string(p.shape.size()));
  SmallVector<bool> seen(p.axisSizes.size(), false);
  auto check = [&](AxisId axis) {
    if (axis < 0 || axis >= static_cast<AxisId>(seen.size()) || seen[axis])
      return false;
    return seen[axis] = true;
  };
  for (const AxisList &dim : layout.dims)
    if (!llvm::all_of(dim, check))
      return fail("names an axis out of range or twice");
  if (!llvm::all_of(layout.unreduced, check))
    return fail("names an axis out of range or twice");
  for (auto [dim, axes] : llvm::enumerate(layout.dims))
    if (p.shape[dim] % product(axes) != 0)
      return fail("splits dimension " + std::to_string(dim) + " of size " +
                  std::to_string(p.shape[dim]) + " over axes of total size " +
                  std::to_string(product(axes)));
  return success();
}

std::vector<int> Planner::key(const Layout &layout, int lastKind) {
  std::vector<int> key{lastKind};
  for (const AxisList &dim : layout.dims) {
    key.push_back(-1);
    key.insert(key.end(), dim.begin(), dim.end());
  }
  key.push_back(-2);
  key.insert(key.end(), layout.unreduced.begin(), layout.unreduced.end());
  return key;
}

void Planner::expand(int node,
                     SmallVectorImpl<std::pair<Step, Cost>> &moves) const {
  const Layout &cur = nodes[node].layout;
  const Layout &tgt = p.target;
  int64_t rank = cur.dims.size();
  int64_t bytes = localBytes(cur);
  AxisList toReduce;
  for (AxisId axis : cur.unreduced)
    if (!llvm::is_contained(tgt.unreduced, axis))
      toReduce.push_back(axis);
  auto perDim = [&](StepKind kind, int64_t dim, ArrayRef<AxisId> axes) {
    Step step{kind, SmallVector<AxisList>(rank), {}, -1, -1};
    step.dimAxes[dim].assign(axes.begin(), axes.end());
    return step;
  };
  // What dimension `dim` still needs, when its axes are a prefix of the
  // target's (it is "ready"); null otherwise.
  auto next = [&](int64_t dim) -> std::optional<ArrayRef<AxisId>> {
    ArrayRef<AxisId> have = cur.dims[dim], want = tgt.dims[dim];
    if (have.size() > want.size() || want.take_front(have.size()) != have)
      return std::nullopt;
    return want.drop_front(have.size());
  };
  auto commonPrefix = [&](int64_t dim) {
    size_t n = 0;
    while (n < cur.dims[dim].size() && n < tgt.dims[dim].size() &&
           cur.dims[dim][n] == tgt.dims[dim][n])
      ++n;
    return n;
  };

  for (int64_t d = 0; d < rank; ++d) {
    std::optional<ArrayRef<AxisId>> want = next(d);
    if (!want)
      continue;
    // Slicing free axes costs nothing and shrinks what follows: take as
    // many as the target wants next.
    size_t free = 0;
    while (free < want->size() && !isUsed(cur, (*want)[free]))
      ++free;
    if (free)
      moves.push_back(
          {perDim(StepKind::AllSlice, d, want->take_front(free)), Cost{0, 1}});
    size_t partial = 0;
    while (partial < want->size() &&
           llvm::is_contained(toReduce, (*want)[partial]))
      ++partial;
    for (size_t k = 1; k <= partial; ++k)
      moves.push_back({perDim(StepKind::ReduceScatter, d, want->take_front(k)),
                       Cost{ringCost(bytes, product(want->take_front(k))), 1}});
    // Axes at the minor end of another dimension that this one wants next
    // move over with an all-to-all.
    for (int64_t s = 0; s < rank; ++s) {
      if (s == d)
        continue;
      ArrayRef<AxisId> src = cur.dims[s];
      for (size_t k = 1; k <= src.size() - commonPrefix(s); ++k) {
        ArrayRef<AxisId> moved = src.take_back(k);
        if (k > want->size() || want->take_front(k) != moved)
          continue;
        moves.push_back({Step{StepKind::AllToAll, {}, AxisList(moved), s, d},
                         Cost{ringCost(bytes, product(moved)), 1}});
      }
    }
  }
  // All-reduce any non-empty subset of the partial-sum axes to resolve.
  if (!toReduce.empty() && toReduce.size() <= 8) {
    for (unsigned mask = 1; mask < (1u << toReduce.size()); ++mask) {
      AxisList axes;
      for (auto [i, axis] : llvm::enumerate(toReduce))
        if (mask & (1u << i))
          axes.push_back(axis);
      moves.push_back({Step{StepKind::AllReduce, {}, axes, -1, -1},
                       Cost{2 * ringCost(bytes, product(axes)), 1}});
    }
  } else if (!toReduce.empty()) {
    moves.push_back({Step{StepKind::AllReduce, {}, toReduce, -1, -1},
                     Cost{2 * ringCost(bytes, product(toReduce)), 1}});
  }
  // Gather axes the target does not keep, from the minor end.
  for (int64_t d = 0; d < rank; ++d) {
    ArrayRef<AxisId> have = cur.dims[d];
    for (size_t k = 1; k <= have.size() - commonPrefix(d); ++k) {
      int64_t n = product(have.take_back(k));
      moves.push_back({perDim(StepKind::AllGather, d, have.take_back(k)),
                       Cost{ringCost(bytes * n, n), 1}});
    }
  }
  if (p.allowPermute)
    addPermutes(cur, moves);
}

void Planner::addPermutes(const Layout &cur,
                          SmallVectorImpl<std::pair<Step, Cost>> &moves) const {
  // Per dimension, the axes a permute may give it, each of the product of
  // its current axes: its own, or a prefix of its target followed by some of
  // its own axes in their order (those a later gather removes).
  int64_t rank = cur.dims.size();
  SmallVector<SmallVector<AxisList>> options(rank);
  for (int64_t d = 0; d < rank; ++d) {
    ArrayRef<AxisId> have = cur.dims[d], want = p.target.dims[d];
    int64_t n = product(have);
    options[d].push_back(AxisList(have));
    for (size_t k = 1; k <= want.size(); ++k) {
      ArrayRef<AxisId> prefix = want.take_front(k);
      // Longer prefixes have larger products that do not divide either.
      if (n % product(prefix) != 0)
        break;
      AxisList rest;
      for (AxisId axis : have)
        if (!llvm::is_contained(prefix, axis))
          rest.push_back(axis);
      if (rest.size() > 8)
        continue;
      for (unsigned mask = 0; mask < (1u << rest.size()); ++mask) {
        AxisList option(prefix);
        for (auto [i, axis] : llvm::enumerate(rest))
          if (mask & (1u << i))
            option.push_back(axis);
        if (product(option) == n && !llvm::is_contained(options[d], option))
          options[d].push_back(std::move(option));
      }
    }
  }
  // Every combination but the first (the current layout) whose dimensions
  // do not share axes.
  constexpr int64_t kMaxCombinations = 4096;
  int64_t combinations = 1;
  for (const SmallVector<AxisList> &dimOptions : options)
    combinations =
        std::min(combinations * static_cast<int64_t>(dimOptions.size()),
                 kMaxCombinations);
  int64_t bytes = localBytes(cur);
  for (int64_t c = 1; c < combinations; ++c) {
    Step step{StepKind::Permute, SmallVector<AxisList>(rank), {}, -1, -1};
    for (int64_t d = rank - 1, rem = c; d >= 0; --d) {
      int64_t size = options[d].size();
      step.dimAxes[d] = options[d][rem % size];
      rem /= size;
    }
    FailureOr<Layout> next = applyStep(cur, step);
    if (failed(next))
      continue;
    FailureOr<Permutation> perm = getPermutation(p.axisSizes, cur, *next);
    if (failed(perm))
      continue;
    // Devices that keep their block send nothing; a layout that moves no
    // block at all (size-1 axes) costs nothing.
    moves.push_back(
        {step, Cost{perm->pairs.empty() ? 0 : bytes * meshProduct, 1}});
  }
}

/// Whether consecutive steps of `kind` merge into one collective.
static bool merges(StepKind kind) {
  return kind != StepKind::AllToAll && kind != StepKind::Permute;
}

/// Folds `step` into `last` when both are of a kind that merges; false
/// otherwise.
static bool mergeInto(Step &last, const Step &step) {
  if (last.kind != step.kind || !merges(step.kind))
    return false;
  if (step.kind == StepKind::AllReduce) {
    last.axes.append(step.axes.begin(), step.axes.end());
    llvm::sort(last.axes);
    return true;
  }
  for (auto [mine, theirs] : llvm::zip_equal(last.dimAxes, step.dimAxes)) {
    // A later gather removes more major axes; a later slice or
    // reduce-scatter appends more minor ones.
    if (step.kind == StepKind::AllGather)
      mine.insert(mine.begin(), theirs.begin(), theirs.end());
    else
      mine.append(theirs.begin(), theirs.end());
  }
  return true;
}

FailureOr<ReshardPlan> Planner::run(std::string *error) {
  for (AxisId axis : p.target.unreduced)
    if (!llvm::is_contained(p.source.unreduced, axis)) {
      if (error)
        *error = "the target is a partial sum over mesh axis #" +
                 std::to_string(axis) + ", which the source is not";
      return failure();
    }

  using Entry = std::tuple<int64_t, int64_t, int>; // bytes, ops, node
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  std::map<std::vector<int>, Cost> best;
  nodes.push_back(Node{p.source, -1, Cost{}, -1, Step{}});
  best[key(p.source, -1)] = Cost{};
  queue.push({0, 0, 0});
  constexpr size_t kMaxNodes = 200000;
  int goal = -1;
  while (!queue.empty() && nodes.size() < kMaxNodes) {
    auto [bytes, ops, node] = queue.top();
    queue.pop();
    Cost cost = nodes[node].cost;
    if (best[key(nodes[node].layout, nodes[node].lastKind)] < cost)
      continue; // A cheaper way here was found after this entry was queued.
    if (nodes[node].layout == p.target) {
      goal = node;
      break;
    }
    SmallVector<std::pair<Step, Cost>> moves;
    expand(node, moves);
    for (auto &[step, stepCost] : moves) {
      FailureOr<Layout> layout = applyStep(nodes[node].layout, step);
      if (failed(layout) || !fits(*layout))
        continue;
      int kind = static_cast<int>(step.kind);
      bool merged = kind == nodes[node].lastKind && merges(step.kind);
      Cost total{cost.bytes + stepCost.bytes, cost.ops + (merged ? 0 : 1)};
      std::vector<int> k = key(*layout, kind);
      auto it = best.find(k);
      if (it != best.end() && !(total < it->second))
        continue;
      best[k] = total;
      nodes.push_back(Node{std::move(*layout), kind, total, node, step});
      queue.push({total.bytes, total.ops, static_cast<int>(nodes.size() - 1)});
    }
  }

  ReshardPlan plan;
  SmallVector<Step> reversed;
  if (goal >= 0) {
    for (int n = goal; nodes[n].parent >= 0; n = nodes[n].parent)
      reversed.push_back(nodes[n].step);
    plan.bytes = static_cast<double>(nodes[goal].cost.bytes) / meshProduct;
  } else {
    // The search gave up (a huge mesh): gather what the target does not
    // keep, reduce, then slice.
    Layout cur = p.source;
    int64_t rank = cur.dims.size();
    Step gather{StepKind::AllGather, SmallVector<AxisList>(rank), {}, -1, -1};
    Step slice{StepKind::AllSlice, SmallVector<AxisList>(rank), {}, -1, -1};
    Step reduce{StepKind::AllReduce, {}, {}, -1, -1};
    for (int64_t d = 0; d < rank; ++d) {
      size_t n = 0;
      while (n < cur.dims[d].size() && n < p.target.dims[d].size() &&
             cur.dims[d][n] == p.target.dims[d][n])
        ++n;
      gather.dimAxes[d].append(cur.dims[d].begin() + n, cur.dims[d].end());
      slice.dimAxes[d].append(p.target.dims[d].begin() + n,
                              p.target.dims[d].end());
    }
    for (AxisId axis : cur.unreduced)
      if (!llvm::is_contained(p.target.unreduced, axis))
        reduce.axes.push_back(axis);
    auto nonEmpty = [](const Step &s) {
      return !s.axes.empty() || llvm::any_of(s.dimAxes, [](const AxisList &a) {
        return !a.empty();
      });
    };
    // Pushed last first: reduce, then gather, then slice.
    for (const Step &s : {slice, gather, reduce})
      if (nonEmpty(s))
        reversed.push_back(s);
  }
  for (Step &step : llvm::reverse(reversed))
    if (plan.steps.empty() || !mergeInto(plan.steps.back(), step))
      plan.steps.push_back(std::move(step));
  LLVM_DEBUG(DBGS() << "plan after " << nodes.size() << " layouts"
                    << (goal >= 0 ? "" : " (search abandoned)") << ": "
                    << toString(plan, p.axisNames) << ", "
                    << llvm::format("%.6g", plan.bytes)
                    << " bytes sent per device\n");
  return plan;
}

FailureOr<ReshardPlan>
mlir::sd::reshard::planReshard(const ReshardProblem &problem,
                               std::string *error) {
  LLVM_DEBUG({
    DBGS() << "tensor [";
    llvm::interleaveComma(problem.shape, llvm::dbgs());
    llvm::dbgs() << "] from " << toString(problem.source, problem.axisNames)
                 << " to " << toString(problem.target, problem.axisNames)
                 << "\n";
  });
  Planner planner(problem);
  if (failed(planner.validate(problem.source, "source", error)) ||
      failed(planner.validate(problem.target, "target", error)))
    return failure();
  ReshardProblem sorted = problem;
  llvm::sort(sorted.source.unreduced);
  llvm::sort(sorted.target.unreduced);
  Planner sortedPlanner(sorted);
  return sortedPlanner.run(error);
}

//===----------------------------------------------------------------------===//
// Printing
//===----------------------------------------------------------------------===//

static std::string axesToString(ArrayRef<AxisId> axes,
                                ArrayRef<std::string> names) {
  std::string text;
  for (auto [i, axis] : llvm::enumerate(axes))
    text += (i ? ", " : "") + (axis < static_cast<AxisId>(names.size())
                                   ? names[axis]
                                   : "#" + std::to_string(axis));
  return text;
}

std::string mlir::sd::reshard::toString(const Layout &layout,
                                        ArrayRef<std::string> names) {
  std::string text = "[";
  for (auto [i, axes] : llvm::enumerate(layout.dims))
    text += (i ? ", {" : "{") + axesToString(axes, names) + "}";
  text += "]";
  if (!layout.unreduced.empty())
    text += ", unreduced [" + axesToString(layout.unreduced, names) + "]";
  return text;
}

std::string mlir::sd::reshard::toString(const Step &step,
                                        ArrayRef<std::string> names) {
  auto perDim = [&](StringRef kind) {
    std::string text = kind.str() + " [";
    for (auto [i, axes] : llvm::enumerate(step.dimAxes))
      text += (i ? ", {" : "{") + axesToString(axes, names) + "}";
    return text + "]";
  };
  switch (step.kind) {
  case StepKind::AllGather:
    return perDim("all_gather");
  case StepKind::AllSlice:
    return perDim("all_slice");
  case StepKind::ReduceScatter:
    return perDim("reduce_scatter");
  case StepKind::Permute:
    return perDim("collective_permute");
  case StepKind::AllReduce:
    return "all_reduce [" + axesToString(step.axes, names) + "]";
  case StepKind::AllToAll:
    return "all_to_all [" + axesToString(step.axes, names) + "] " +
           std::to_string(step.srcDim) + "->" + std::to_string(step.tgtDim);
  }
  return "";
}

std::string mlir::sd::reshard::toString(const ReshardPlan &plan,
                                        ArrayRef<std::string> names) {
  if (plan.steps.empty())
    return "none";
  std::string text;
  for (auto [i, step] : llvm::enumerate(plan.steps))
    text += (i ? "; " : "") + toString(step, names);
  return text;
}
