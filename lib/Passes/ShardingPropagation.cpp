//===- ShardingPropagation.cpp - factor-based sharding propagation --------===//
//
// The per-factor merge with its conflict rules and the fixed point over a
// program's nodes (see ShardingPropagation.h; the plain shardings, rules and
// projections are in ShardingFactors.cpp). Nothing here touches the IR.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ShardingPropagation.h"
#include "sd/Support/Debug.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>
#include <numeric>

#define DEBUG_TYPE "sd-propagate"
#define DBGS() (llvm::dbgs() << "[" DEBUG_TYPE "] ")

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::propagation;

static constexpr int64_t kUnprioritized = std::numeric_limits<int64_t>::max();

/// The dimension of `mapping` that has `factor`, or -1.
static int64_t dimOfFactor(const FactorRule::TensorMapping &mapping,
                           int64_t factor) {
  for (auto [dim, factors] : llvm::enumerate(mapping))
    if (llvm::is_contained(factors, factor))
      return dim;
  return -1;
}

//===----------------------------------------------------------------------===//
// Merge and conflicts
//===----------------------------------------------------------------------===//

/// Sorts `items` by `less`, keeping the order of equal items, as
/// llvm::stable_sort does, but without its temporary buffer: the lists
/// sorted here (a node's tensors or factors) are short and sorted at every
/// visit.
template <typename T, typename LessFn>
static void stableSortShort(MutableArrayRef<T> items, LessFn less) {
  for (size_t i = 1; i < items.size(); ++i) {
    T item = items[i];
    size_t j = i;
    for (; j > 0 && less(item, items[j - 1]); --j)
      items[j] = items[j - 1];
    items[j] = item;
  }
}

/// True when `prefix` is a prefix of `axes` (or equal).
static bool isPrefix(ArrayRef<AxisId> prefix, ArrayRef<AxisId> axes) {
  return prefix.size() <= axes.size() &&
         prefix == axes.take_front(prefix.size());
}

static size_t commonPrefixLength(ArrayRef<AxisId> a, ArrayRef<AxisId> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

MergeResult propagation::mergeFactorAxes(ArrayRef<MergeCandidate> candidates) {
  // Larger tensors first; ties keep the candidates' order (determinism).
  SmallVector<int> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  stableSortShort<int>(order, [&](int a, int b) {
    return candidates[a].bytes > candidates[b].bytes;
  });
  MergeResult result;
  int64_t winnerBytes = 0;
  bool frozen = false;
  // Expanding candidates build the result; the others can only cut it.
  for (bool expanding : {true, false}) {
    for (int index : order) {
      const MergeCandidate &candidate = candidates[index];
      ArrayRef<AxisId> axes = candidate.axes;
      if (candidate.canExpand != expanding || axes.empty())
        continue;
      if (isPrefix(axes, result.axes))
        continue;
      if (isPrefix(result.axes, axes)) {
        if (expanding && !frozen) {
          result.axes.assign(axes.begin(), axes.end());
          result.winner = index;
          winnerBytes = candidate.bytes;
        }
        continue;
      }
      // A conflict. A smaller expanding tensor yields to the larger one.
      if (expanding && candidate.bytes < winnerBytes)
        continue;
      result.axes.truncate(commonPrefixLength(result.axes, axes));
      frozen = true;
    }
  }
  if (result.axes.empty())
    result.winner = -1;
  return result;
}

/// Cuts `axes` to the longest prefix whose product divides `size`, or, for
/// a factor that may be padded, whose product is at most `size` (each device
/// then holds at least one valid element of a dimension that factor alone
/// makes).
static void truncateToFit(AxisList &axes, int64_t size, bool paddable,
                          const MeshShape &mesh) {
  for (size_t i = 0; i < axes.size(); ++i) {
    ArrayRef<AxisId> prefix = ArrayRef<AxisId>(axes).take_front(i + 1);
    if (paddable ? !mesh.fitsIn(prefix, size) : !mesh.divides(prefix, size)) {
      axes.truncate(i);
      return;
    }
  }
}

namespace {
/// Who holds a mesh axis in one tensor while factors claim axes.
constexpr int kFree = -1;
constexpr int kOther = -2;
constexpr int kUnreduced = -3;

/// Makes the factors' axes disjoint within every tensor: factors in `order`
/// keep the longest prefix of their axes that no earlier factor (and no
/// axis held outside the factors, in `owners`) uses in a tensor they share.
/// A reduction factor counts as part of every result (whose unreduced axes
/// it defines).
void resolveClaims(const FactorRule &rule,
                   ArrayRef<TensorFactorShardings> projections,
                   SmallVectorImpl<SmallVector<int, 4>> &owners,
                   MutableArrayRef<AxisList> axesPerFactor,
                   ArrayRef<int64_t> order) {
  auto contains = [&](int64_t t, int64_t factor) {
    return projections[t].factors[factor].present ||
           (rule.isResult(t) &&
            rule.factorKinds[factor] == FactorKind::Reduction);
  };
  for (int64_t factor : order) {
    bool isReduction = rule.factorKinds[factor] == FactorKind::Reduction;
    AxisList &axes = axesPerFactor[factor];
    size_t keep = axes.size();
    for (size_t i = 0; i < keep; ++i)
      for (int64_t t = 0, e = rule.numTensors(); t < e; ++t) {
        if (!contains(t, factor))
          continue;
        int owner = owners[t][axes[i]];
        if (owner != kFree && owner != factor &&
            !(owner == kUnreduced && isReduction)) {
          keep = i;
          break;
        }
      }
    axes.truncate(keep);
    for (int64_t t = 0, e = rule.numTensors(); t < e; ++t)
      if (contains(t, factor))
        for (AxisId axis : axes)
          owners[t][axis] = factor;
  }
}

/// Factors ordered by weight (descending), then index.
SmallVector<int64_t> orderByWeight(ArrayRef<int64_t> weights) {
  SmallVector<int64_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  stableSortShort<int64_t>(
      order, [&](int64_t a, int64_t b) { return weights[a] > weights[b]; });
  return order;
}
} // namespace

//===----------------------------------------------------------------------===//
// Propagator
//===----------------------------------------------------------------------===//

Propagator::Propagator(MeshShape mesh, SmallVector<ValueInfo> values,
                       std::vector<Node> nodes, bool recordProvenance)
    : mesh(std::move(mesh)), values(std::move(values)), nodes(std::move(nodes)),
      recordProvenance(recordProvenance) {
  producers.assign(this->values.size(), -1);
  users.resize(this->values.size());
  for (auto [index, node] : llvm::enumerate(this->nodes)) {
    passThroughOps.push_back(node.rule->isPassThroughOp());
    broadcastLike.push_back(node.rule->isBroadcastLike());
    for (int value : node.results)
      producers[value] = index;
    for (int value : node.operands)
      if (!llvm::is_contained(users[value], (int)index))
        users[value].push_back(index);
  }
  annotations.resize(this->values.size());
  for (auto [index, value] : llvm::enumerate(this->values)) {
    if (!value.isSource)
      continue;
    annotations[index] = value.sharding;
    for (const DimSharding &dim : value.sharding.dims)
      levels.push_back(dim.priority.value_or(kUnprioritized));
  }
  levels.push_back(kUnprioritized);
  llvm::sort(levels);
  levels.erase(llvm::unique(levels), levels.end());
  if (recordProvenance) {
    provenance.resize(this->values.size());
    for (auto [index, value] : llvm::enumerate(this->values))
      provenance[index].resize(value.sharding.dims.size());
  }
}

Provenance Propagator::getProvenance(int value, int dim) const {
  if (!recordProvenance)
    return {};
  return provenance[value][dim];
}

void Propagator::applyLevel(size_t level) {
  int64_t limit = levels[level];
  int64_t previous = level == 0 ? -1 : levels[level - 1];
  for (auto [index, annotation] : llvm::enumerate(annotations)) {
    if (!annotation)
      continue;
    TensorSharding &current = values[index].sharding;
    for (auto [dim, dimSharding] : llvm::enumerate(annotation->dims)) {
      int64_t priority = dimSharding.priority.value_or(kUnprioritized);
      if (priority > limit) {
        // Not yet: closed and empty, its axes kept from other dimensions.
        if (level == 0) {
          current.dims[dim] = DimSharding{{}, /*closed=*/true, std::nullopt};
          current.replicated.append(dimSharding.axes.begin(),
                                    dimSharding.axes.end());
        }
        continue;
      }
      if (level != 0 && priority <= previous)
        continue;
      current.dims[dim] = dimSharding;
      if (level != 0)
        llvm::erase_if(current.replicated, [&](AxisId axis) {
          return llvm::is_contained(dimSharding.axes, axis) &&
                 !llvm::is_contained(annotation->replicated, axis);
        });
      if (recordProvenance && !dimSharding.axes.empty())
        provenance[index][dim] = Provenance{(int)index, -1, -1, -1};
    }
  }
}

std::string Propagator::describeNode(int node) const {
  const std::string &label = nodes[node].label;
  return label.empty() ? "node #" + std::to_string(node) : label;
}

std::string Propagator::describeValue(int value) const {
  const std::string &label = values[value].label;
  return label.empty() ? "value #" + std::to_string(value) : label;
}

void Propagator::run() {
  for (size_t level = 0; level < levels.size(); ++level) {
    LLVM_DEBUG({
      DBGS() << "user priority ";
      if (levels[level] == kUnprioritized)
        llvm::dbgs() << "none (unprioritized annotations)\n";
      else
        llvm::dbgs() << "p" << levels[level] << "\n";
    });
    applyLevel(level);
    std::optional<Phase> previous;
    for (Phase phase :
         {Phase::PassThroughOps, Phase::PassThroughFactors, Phase::All}) {
      runPhase(phase, previous);
      previous = phase;
    }
  }
}

/// The name of `phase` in debug output.
static StringRef getPhaseName(int phase) {
  static const char *const names[] = {"pass-through ops",
                                      "pass-through factors", "all factors"};
  return names[phase];
}

void Propagator::runPhase(Phase phase, std::optional<Phase> previous) {
  LLVM_DEBUG(DBGS() << "phase: " << getPhaseName(static_cast<int>(phase))
                    << "\n");
  // After a phase every node is at its fixed point: visiting it again with
  // the same directions would change nothing. So a node starts dirty only
  // where its directions differ from the previous phase's (pass-through ops
  // propagate the same way in every phase).
  dirty.resize(nodes.size());
  for (int n = 0, e = nodes.size(); n < e; ++n) {
    dirty[n] = true;
    if (!previous)
      continue;
    int64_t numFactors = nodes[n].rule->numFactors();
    bool same = true;
    for (int64_t f = 0; f < numFactors && same; ++f)
      same = getDirection(n, f, phase) == getDirection(n, f, *previous);
    dirty[n] = !same;
  }
  bool changed = true;
  while (changed) {
    changed = false;
    // Forward then backward, so that both directions settle quickly
    // without recursion along use-def chains.
    for (int n = 0, e = nodes.size(); n < e; ++n)
      if (dirty[n]) {
        dirty[n] = false;
        changed |= visit(n, phase);
      }
    for (int n = nodes.size() - 1; n >= 0; --n)
      if (dirty[n]) {
        dirty[n] = false;
        changed |= visit(n, phase);
      }
  }
}

void Propagator::markNeighborsDirty(int value) {
  if (producers[value] >= 0)
    dirty[producers[value]] = true;
  for (int user : users[value])
    dirty[user] = true;
}

Direction Propagator::getDirection(int node, int64_t factor,
                                   Phase phase) const {
  switch (phase) {
  case Phase::PassThroughOps:
    return passThroughOps[node] ? Direction::Both : Direction::None;
  case Phase::PassThroughFactors:
    if (passThroughOps[node])
      return Direction::Both;
    if (nodes[node].rule->factorKinds[factor] != FactorKind::PassThrough)
      return Direction::None;
    return broadcastLike[node] ? Direction::Backward : Direction::Both;
  case Phase::All:
    return Direction::Both;
  }
  return Direction::None;
}

//===----------------------------------------------------------------------===//
// One node
//===----------------------------------------------------------------------===//

/// The value of `node`'s tensor `t` (operands, then results).
static int valueOf(const Node &node, int64_t t) {
  int64_t numOperands = node.operands.size();
  return t < numOperands ? node.operands[t] : node.results[t - numOperands];
}

namespace {
/// The current shardings of a node's tensors (operands, then results)
/// projected onto its rule's factors.
struct NodeView {
  const Node &node;
  const FactorRule &rule;
  SmallVector<TensorFactorShardings, 4> projections;

  NodeView(const Node &node, ArrayRef<ValueInfo> values, const MeshShape &mesh)
      : node(node), rule(*node.rule) {
    for (int64_t t = 0, e = rule.numTensors(); t < e; ++t)
      projections.push_back(projectToFactors(
          values[valueOf(t)].sharding, rule.tensor(t), rule.factorSizes, mesh));
  }

  int valueOf(int64_t t) const { return ::valueOf(node, t); }

  /// Merges factor `factor` over the tensors `include` accepts.
  /// `canExpand(t)` says which may lengthen it. Returns the merged axes
  /// (cut to a divisor of the factor size) and the winning tensor.
  template <typename IncludeFn, typename ExpandFn>
  std::pair<AxisList, int64_t> merge(int64_t factor, ArrayRef<ValueInfo> values,
                                     const MeshShape &mesh, IncludeFn include,
                                     ExpandFn canExpand) const {
    SmallVector<MergeCandidate, 4> candidates;
    SmallVector<int64_t, 4> tensors;
    for (int64_t t = 0, e = rule.numTensors(); t < e; ++t) {
      const FactorSharding &sharding = projections[t].factors[factor];
      if (!sharding.present || !include(t))
        continue;
      candidates.push_back(MergeCandidate{
          sharding.axes, values[valueOf(t)].bytes, canExpand(t)});
      tensors.push_back(t);
    }
    MergeResult merged = mergeFactorAxes(candidates);
    // Padding a factor pads the dimensions it is part of, which is exact
    // only where it is their minor-most factor.
    bool paddable = true;
    for (int64_t t = 0, e = rule.numTensors(); t < e && paddable; ++t)
      for (ArrayRef<int64_t> dimFactors : rule.tensor(t))
        for (auto [position, f] : llvm::enumerate(dimFactors))
          if (f == factor &&
              !isMinorMost(dimFactors, position, rule.factorSizes))
            paddable = false;
    truncateToFit(merged.axes, rule.factorSizes[factor], paddable, mesh);
    int64_t winner = merged.winner >= 0 ? tensors[merged.winner] : -1;
    return {std::move(merged.axes), winner};
  }
};
} // namespace

void mlir::sd::propagation::appendKey(const TensorSharding &sharding,
                                      SmallVectorImpl<int64_t> &key) {
  // Sized once and written in place: the propagation's memos build a key
  // for every node they look up.
  size_t size = 3 + sharding.replicated.size() + sharding.unreduced.size();
  for (const DimSharding &dim : sharding.dims)
    size += 4 + dim.axes.size();
  size_t start = key.size();
  key.resize_for_overwrite(start + size);
  int64_t *out = key.data() + start;
  *out++ = static_cast<int64_t>(sharding.dims.size());
  for (const DimSharding &dim : sharding.dims) {
    *out++ = dim.closed;
    *out++ = dim.priority.has_value();
    *out++ = dim.priority.value_or(0);
    *out++ = static_cast<int64_t>(dim.axes.size());
    out = std::copy(dim.axes.begin(), dim.axes.end(), out);
  }
  *out++ = static_cast<int64_t>(sharding.replicated.size());
  out = std::copy(sharding.replicated.begin(), sharding.replicated.end(), out);
  *out++ = static_cast<int64_t>(sharding.unreduced.size());
  out = std::copy(sharding.unreduced.begin(), sharding.unreduced.end(), out);
  assert(out == key.data() + key.size() && "appendKey's size");
}

bool Propagator::visit(int n, Phase phase) {
  const Node &node = nodes[n];
  const FactorRule &rule = *node.rule;
  int64_t numFactors = rule.numFactors(), numTensors = rule.numTensors();
  SmallVector<Direction> directions;
  for (int64_t f = 0; f < numFactors; ++f)
    directions.push_back(getDirection(n, f, phase));
  if (llvm::all_of(directions,
                   [](Direction d) { return d == Direction::None; }))
    return false;
  ++numVisits;
  // A visit reads the node's rule, the phase and its tensors' shardings and
  // sizes: nodes of one rule whose tensors match (a block's elementwise
  // chains, the optimizer's update of each parameter) assign the same.
  // Not while recording provenance or printing each step, which name the
  // values the axes came from.
  bool reuse = node.ruleId >= 0 && !recordProvenance;
  LLVM_DEBUG(reuse = false);
  SmallVector<std::pair<int, TensorSharding>, 1> *assigned = nullptr;
  if (reuse) {
    auto [cached, inserted] = visits.try_emplace(keyBytes(nodeKey(n, phase)));
    if (!inserted)
      return replayVisit(n, cached->second);
    assigned = &cached->second;
  }
  NodeView view(node, values, mesh);

  // Merge each factor that propagates in this phase.
  SmallVector<AxisList, 6> merged(numFactors);
  SmallVector<int64_t> winners(numFactors, -1), weights(numFactors, 0);
  for (int64_t f = 0; f < numFactors; ++f) {
    Direction direction = directions[f];
    if (direction == Direction::None ||
        rule.factorKinds[f] == FactorKind::NeedReplication)
      continue;
    auto canExpand = [&](int64_t t) {
      return direction == Direction::Both ||
             (direction == Direction::Backward) == rule.isResult(t);
    };
    std::tie(merged[f], winners[f]) = view.merge(
        f, values, mesh, [](int64_t) { return true; }, canExpand);
    if (winners[f] >= 0)
      weights[f] = values[view.valueOf(winners[f])].bytes;
  }

  // An axis is used once per tensor: what the tensors hold now stays, and
  // new axes go to the factor with the larger source first.
  SmallVector<SmallVector<int, 4>, 4> owners(
      numTensors, SmallVector<int, 4>(mesh.numAxes(), kFree));
  for (int64_t t = 0; t < numTensors; ++t) {
    for (auto [f, sharding] : llvm::enumerate(view.projections[t].factors))
      for (AxisId axis : sharding.axes)
        owners[t][axis] = f;
    for (AxisId axis : view.projections[t].otherAxes)
      owners[t][axis] = kOther;
    for (AxisId axis : values[view.valueOf(t)].sharding.unreduced)
      owners[t][axis] = rule.isResult(t) ? kUnreduced : kOther;
  }
  resolveClaims(rule, view.projections, owners, merged, orderByWeight(weights));

  // Extend every open factor sharding that the merge extends.
  bool changed = false;
  for (int64_t t = 0; t < numTensors; ++t) {
    TensorFactorShardings &projection = view.projections[t];
    const FactorRule::TensorMapping &mapping = rule.tensor(t);
    int value = view.valueOf(t);
    SmallVector<std::pair<int64_t, int64_t>> updated; // (dim, factor)
    for (auto [dim, factors] : llvm::enumerate(mapping)) {
      if (!projection.dimFits[dim])
        continue;
      bool full = true;
      for (int64_t f : factors) {
        FactorSharding &sharding = projection.factors[f];
        if (full && directions[f] != Direction::None && !sharding.closed &&
            sharding.axes.size() < merged[f].size() &&
            isPrefix(sharding.axes, merged[f])) {
          sharding.axes = merged[f];
          updated.emplace_back(dim, f);
        }
        full = full && mesh.fills(sharding.axes, rule.factorSizes[f]);
      }
    }
    const TensorSharding &current = values[value].sharding;
    // The new sharding, made only where something may change (most visits
    // change nothing).
    std::optional<TensorSharding> next;
    if (!updated.empty())
      next = projectFromFactors(projection, mapping, rule.factorSizes, mesh,
                                current);
    // A sharded reduction factor leaves the results partial sums.
    if (rule.isResult(t))
      for (int64_t f = 0; f < numFactors; ++f)
        if (rule.factorKinds[f] == FactorKind::Reduction)
          for (AxisId axis : merged[f])
            if (!llvm::is_contained(next ? next->unreduced : current.unreduced,
                                    axis)) {
              if (!next)
                next = current;
              next->unreduced.push_back(axis);
            }
    if (!next || *next == current)
      continue;
    values[value].sharding = std::move(*next);
    changed = true;
    markNeighborsDirty(value);
    if (assigned)
      assigned->emplace_back(t, values[value].sharding);
    LLVM_DEBUG({
      DBGS() << describeNode(n) << " sets " << describeValue(value) << " to "
             << toString(values[value].sharding, mesh);
      for (auto [i, update] : llvm::enumerate(updated)) {
        int64_t winner = winners[update.second];
        llvm::dbgs() << (i ? ", " : " (") << "factor "
                     << getFactorName(update.second) << " from "
                     << (winner >= 0 ? describeValue(view.valueOf(winner))
                                     : std::string("the merge"));
      }
      llvm::dbgs() << (updated.empty() ? " (partial sum)\n" : ")\n");
    });
    if (!recordProvenance)
      continue;
    for (auto [dim, f] : updated) {
      int64_t winner = winners[f];
      if (winner < 0)
        continue;
      int fromValue = view.valueOf(winner);
      int fromDim = dimOfFactor(rule.tensor(winner), f);
      provenance[value][dim] = Provenance{provenance[fromValue][fromDim].source,
                                          n, fromValue, fromDim};
    }
  }
  return changed;
}

SmallVector<int64_t, 64> Propagator::nodeKey(int n,
                                             std::optional<Phase> phase) const {
  const Node &node = nodes[n];
  SmallVector<int64_t, 64> key = {
      node.ruleId, phase ? static_cast<int64_t>(*phase) : int64_t(-1)};
  for (int64_t t = 0, e = node.rule->numTensors(); t < e; ++t) {
    const ValueInfo &value = values[valueOf(node, t)];
    key.push_back(value.bytes);
    appendKey(value.sharding, key);
  }
  return key;
}

bool Propagator::replayVisit(
    int n, ArrayRef<std::pair<int, TensorSharding>> assigned) {
  ++numReusedVisits;
  for (const auto &[t, sharding] : assigned) {
    int value = valueOf(nodes[n], t);
    values[value].sharding = sharding;
    markNeighborsDirty(value);
  }
  return !assigned.empty();
}

NodeLayout Propagator::getConsistentLayout(int n) const {
  if (nodes[n].ruleId < 0)
    return makeConsistentLayout(n);
  auto [cached, inserted] = layouts.try_emplace(keyBytes(nodeKey(n, {})));
  if (inserted)
    cached->second = makeConsistentLayout(n);
  return cached->second;
}

NodeLayout Propagator::makeConsistentLayout(int n) const {
  const Node &node = nodes[n];
  const FactorRule &rule = *node.rule;
  int64_t numFactors = rule.numFactors(), numTensors = rule.numTensors();
  NodeView view(node, values, mesh);

  // Results keep their shardings where they can: a factor in a result takes
  // the results' axes, an operand-only factor the operands' merge.
  SmallVector<AxisList, 6> axes(numFactors);
  SmallVector<int64_t> weights(numFactors, 0);
  SmallVector<int64_t> resultFactors, operandFactors;
  for (int64_t f = 0; f < numFactors; ++f) {
    if (rule.factorKinds[f] == FactorKind::NeedReplication)
      continue;
    bool inResult = false;
    for (int64_t t = 0; t < numTensors; ++t)
      inResult |= rule.isResult(t) && view.projections[t].factors[f].present;
    int64_t winner;
    std::tie(axes[f], winner) = view.merge(
        f, values, mesh,
        [&](int64_t t) { return rule.isResult(t) == inResult; },
        [](int64_t) { return true; });
    if (winner >= 0)
      weights[f] = values[view.valueOf(winner)].bytes;
    (inResult ? resultFactors : operandFactors).push_back(f);
  }
  stableSortShort<int64_t>(operandFactors, [&](int64_t a, int64_t b) {
    return weights[a] > weights[b];
  });
  // Results keep their axes first, except where a result factor's axes are
  // held by the results alone (they came from the results' users, no
  // operand has them) and the operands holding the same axes on a reduction
  // factor are larger: then the reduction factor keeps the axes and the
  // results become partial sums, reduced after the op, so that the smaller
  // side moves. In FSDP training this is the weight gradient dW = x^T dy,
  // which contracts the batch that x and dy hold and whose result got the
  // parameter's sharding from the optimizer update: the small dW is
  // reduce-scattered instead of x and dy being gathered. Where an operand
  // shares the results' axes (x in y = x W), the operands holding the
  // reduction factor (W) move, as before.
  auto overlaps = [](ArrayRef<AxisId> a, ArrayRef<AxisId> b) {
    return llvm::any_of(
        a, [&](AxisId axis) { return llvm::is_contained(b, axis); });
  };
  SmallVector<int64_t> order;
  for (int64_t f : operandFactors) {
    if (rule.factorKinds[f] != FactorKind::Reduction || axes[f].empty())
      continue;
    bool contested = false, resultOnly = true;
    int64_t operandBytes = 0, resultBytes = 0;
    for (int64_t t = 0; t < numTensors; ++t) {
      ArrayRef<FactorSharding> held = view.projections[t].factors;
      bool holdsResultFactor = llvm::any_of(resultFactors, [&](int64_t g) {
        return overlaps(axes[g], axes[f]) && overlaps(held[g].axes, axes[f]);
      });
      int64_t bytes = values[view.valueOf(t)].bytes;
      if (rule.isResult(t)) {
        contested |= holdsResultFactor;
        resultBytes += holdsResultFactor ? bytes : 0;
        continue;
      }
      resultOnly &= !holdsResultFactor;
      operandBytes += overlaps(held[f].axes, axes[f]) ? bytes : 0;
    }
    if (contested && resultOnly && operandBytes > resultBytes)
      order.push_back(f);
  }
  order.append(resultFactors.begin(), resultFactors.end());
  for (int64_t f : operandFactors)
    if (!llvm::is_contained(order, f))
      order.push_back(f);
  SmallVector<SmallVector<int, 4>, 4> owners(
      numTensors, SmallVector<int, 4>(mesh.numAxes(), kFree));
  resolveClaims(rule, view.projections, owners, axes, order);

  // Within a dimension, a factor after one that is not full stays whole.
  bool changed = true;
  while (changed) {
    changed = false;
    for (int64_t t = 0; t < numTensors; ++t)
      for (const SmallVector<int64_t, 2> &factors : rule.tensor(t)) {
        bool full = true;
        for (int64_t f : factors) {
          if (!full && !axes[f].empty()) {
            axes[f].clear();
            changed = true;
          }
          full = full && mesh.fills(axes[f], rule.factorSizes[f]);
        }
      }
  }

  NodeLayout layout;
  for (int64_t t = 0; t < numTensors; ++t) {
    TensorSharding sharding = values[view.valueOf(t)].sharding;
    sharding.replicated.clear();
    sharding.unreduced.clear();
    for (auto [dim, factors] : llvm::enumerate(rule.tensor(t))) {
      AxisList dimAxes;
      for (int64_t f : factors) {
        dimAxes.append(axes[f].begin(), axes[f].end());
        if (!mesh.fills(axes[f], rule.factorSizes[f]))
          break;
      }
      sharding.dims[dim].axes = std::move(dimAxes);
    }
    if (rule.isResult(t)) {
      for (int64_t f = 0; f < numFactors; ++f)
        if (rule.factorKinds[f] == FactorKind::Reduction)
          sharding.unreduced.append(axes[f].begin(), axes[f].end());
      layout.results.push_back(std::move(sharding));
    } else {
      layout.operands.push_back(std::move(sharding));
    }
  }
  return layout;
}
