//===- ReshardPlanner.cpp - collectives that change a sharding ------------===//
//
// Dijkstra over layouts (see ReshardPlanner.h). Moves are restricted to
// those that can be part of a cheapest plan: axes are only appended where
// the target wants them next, and only axes outside the common prefix of a
// dimension and its target are gathered, so the search stays small (a few
// hundred layouts for four axes).
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ReshardPlanner.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <queue>
#include <tuple>
#include <vector>

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
  bool perDim = step.kind == StepKind::AllGather ||
                step.kind == StepKind::AllSlice ||
                step.kind == StepKind::ReduceScatter;
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
  }
  return failure();
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
}

/// Folds `step` into `last` when both are of a kind that merges; false
/// otherwise.
static bool mergeInto(Step &last, const Step &step) {
  if (last.kind != step.kind || step.kind == StepKind::AllToAll)
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
      bool merges =
          kind == nodes[node].lastKind && step.kind != StepKind::AllToAll;
      Cost total{cost.bytes + stepCost.bytes, cost.ops + (merges ? 0 : 1)};
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
  return plan;
}

FailureOr<ReshardPlan>
mlir::sd::reshard::planReshard(const ReshardProblem &problem,
                               std::string *error) {
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
    text += (i ? ", " : "") + names[axis];
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
