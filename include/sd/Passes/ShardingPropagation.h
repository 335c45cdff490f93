//===- ShardingPropagation.h - factor-based propagation ---------*- C++ -*-===//
//
// The algorithm behind sd-propagate-sharding, kept apart from the IR so that
// it can be tested on hand-made rules: a program is a list of nodes (ops)
// over values (tensors); each node has a factor rule (#sd.sharding_rule in
// plain form). Shardings are projected onto the factors, merged per factor
// and projected back, in the order of Shardy's user-priority and
// op-priority propagation, until nothing changes. Mesh axes are small
// integers (their position in the mesh).
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_SHARDINGPROPAGATION_H
#define SD_PASSES_SHARDINGPROPAGATION_H

#include "sd/IR/SDAttrs.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sd::propagation {

/// A mesh axis, by its position in the mesh (0 is the most major).
using AxisId = int;
/// Mesh axes, major to minor.
using AxisList = SmallVector<AxisId, 4>;

/// The sizes of a mesh's axes, indexed by AxisId.
struct MeshShape {
  SmallVector<int64_t> axisSizes;
  /// The axes' names, for debug output only (may be empty: `#0`, `#1`, ...).
  SmallVector<std::string> axisNames;

  int64_t numAxes() const { return axisSizes.size(); }
  /// The product of the sizes of `axes`.
  int64_t product(ArrayRef<AxisId> axes) const;

  /// The propagation reads the sizes through these three comparisons of
  /// the product of some axes' sizes with a factor's size, and nothing
  /// else: a mesh of the same axes that answers each comparison a
  /// propagation made (`queries`) alike propagates the same program alike.
  enum class Query : uint64_t { Divides, FitsIn, Fills };
  /// `size` splits evenly over `axes`.
  bool divides(ArrayRef<AxisId> axes, int64_t size) const {
    return ask(Query::Divides, axes, size);
  }
  /// `axes` give each device at least one element of `size` (padded).
  bool fitsIn(ArrayRef<AxisId> axes, int64_t size) const {
    return ask(Query::FitsIn, axes, size);
  }
  /// `axes` split `size` into blocks of one element.
  bool fills(ArrayRef<AxisId> axes, int64_t size) const {
    return ask(Query::Fills, axes, size);
  }
  /// Where non-null, every comparison made, encoded (`answer` decodes; one
  /// that does not encode, over a repeated axis or more than 16, records
  /// a query no mesh answers alike).
  llvm::DenseSet<uint64_t> *queries = nullptr;
  /// The answer on this mesh to an encoded comparison.
  bool answer(uint64_t query) const;
  /// Whether `a` and `b` answer each of `queries` alike (and each encodes).
  static bool answerAlike(const MeshShape &a, const MeshShape &b,
                          ArrayRef<uint64_t> queries);

private:
  bool ask(Query query, ArrayRef<AxisId> axes, int64_t size) const;
};

/// The axes one tensor dimension is split over. An open dimension may gain
/// axes (appended at the minor end); a closed one never changes.
struct DimSharding {
  AxisList axes;
  bool closed = false;
  std::optional<int64_t> priority;

  bool operator==(const DimSharding &other) const {
    return axes == other.axes && closed == other.closed &&
           priority == other.priority;
  }
};

/// The plain form of #sd.sharding.
struct TensorSharding {
  SmallVector<DimSharding> dims;
  AxisList replicated;
  /// Partial-sum axes: the value is the sum over the devices along them.
  AxisList unreduced;

  /// A sharding of `rank` open, unsharded dimensions: unannotated values.
  static TensorSharding open(int64_t rank);
  /// Same axes on every dimension and same unreduced axes: the same data on
  /// every device (closedness, priorities and replicated marks aside).
  bool sameLayout(const TensorSharding &other) const;
  bool operator==(const TensorSharding &other) const {
    return dims == other.dims && replicated == other.replicated &&
           unreduced == other.unreduced;
  }
};

/// Appends `sharding`'s fields to `key` as integers: equal keys, equal
/// shardings (for maps of results computed from shardings).
void appendKey(const TensorSharding &sharding, SmallVectorImpl<int64_t> &key);
/// A key's integers as the bytes a StringMap takes.
inline StringRef keyBytes(ArrayRef<int64_t> key) {
  return StringRef(reinterpret_cast<const char *>(key.data()),
                   key.size() * sizeof(int64_t));
}

/// `[{"data"}, {"fsdp", ?}p1], unreduced = ["tensor"]`: the #sd.sharding
/// syntax without the mesh, for debug output.
std::string toString(const TensorSharding &sharding, const MeshShape &mesh);

/// The plain form of #sd.sharding_rule.
struct FactorRule {
  /// Per dimension, its factors major to minor.
  using TensorMapping = SmallVector<SmallVector<int64_t, 2>>;

  SmallVector<int64_t> factorSizes;
  SmallVector<FactorKind> factorKinds;
  SmallVector<TensorMapping> operands;
  SmallVector<TensorMapping> results;

  static FactorRule fromAttr(OpShardingRuleAttr rule);
  int64_t numFactors() const { return factorSizes.size(); }
  int64_t numTensors() const { return operands.size() + results.size(); }
  /// Tensor `t`: operands first, then results.
  const TensorMapping &tensor(int64_t t) const;
  bool isResult(int64_t t) const { return t >= (int64_t)operands.size(); }
  /// True when every factor is pass-through and in every tensor (elementwise
  /// ops, reshapes, transposes): Shardy propagates these first.
  bool isPassThroughOp() const;
  /// True when some pass-through factor is in a result but in no operand
  /// (broadcast_in_dim, upsampling): propagated only backward at first, so
  /// that a small operand does not decide the layout of a large result.
  bool isBroadcastLike() const;
};

/// One tensor's sharding along one factor.
struct FactorSharding {
  AxisList axes;
  /// The tensor has the factor.
  bool present = false;
  /// The axes may not change: a closed dimension, or a dimension whose axes
  /// do not fit its factors.
  bool closed = false;
};

/// A tensor sharding projected onto the factors of a rule.
struct TensorFactorShardings {
  /// Indexed by factor (inline for the usual few: propagation projects
  /// every tensor of a node at each visit).
  SmallVector<FactorSharding, 6> factors;
  /// Axes the tensor uses outside its factors: replicated, unreduced, and
  /// axes of dimensions that do not fit their factors. No factor may take
  /// them.
  AxisList otherAxes;
  /// Per dimension: false when its axes could not be split over its factors
  /// (an axis size that does not divide what is left of a factor); such a
  /// dimension keeps its sharding as it is.
  SmallVector<bool> dimFits;
};

/// True when the factors after `position` of a dimension made of
/// `dimFactors` all have size 1: padding that factor pads the dimension by
/// the same blocks (sd::blockExtent of either), so it may take axes that do
/// not divide it.
bool isMinorMost(ArrayRef<int64_t> dimFactors, size_t position,
                 ArrayRef<int64_t> factorSizes);

/// Splits each dimension's axes over its factors, major to minor: a factor
/// takes axes while their product divides its size, and the next factor
/// starts once it is full. The minor-most factor (isMinorMost) also takes
/// the axes that do not divide it: a padded dimension.
TensorFactorShardings projectToFactors(const TensorSharding &sharding,
                                       const FactorRule::TensorMapping &mapping,
                                       ArrayRef<int64_t> factorSizes,
                                       const MeshShape &mesh);

/// The inverse of projectToFactors: a dimension's axes are its factors' axes,
/// up to the first factor that is not full. Closedness, priorities and
/// replicated and unreduced axes come from `original`, and so do dimensions
/// that did not fit.
TensorSharding projectFromFactors(const TensorFactorShardings &factors,
                                  const FactorRule::TensorMapping &mapping,
                                  ArrayRef<int64_t> factorSizes,
                                  const MeshShape &mesh,
                                  const TensorSharding &original);

/// One tensor's axes along a factor, as input to a merge.
struct MergeCandidate {
  ArrayRef<AxisId> axes;
  /// The tensor's size: on a conflict the larger tensor's axes win.
  int64_t bytes = 0;
  /// Whether the candidate may lengthen the result (its side propagates in
  /// the current direction); otherwise it can only cut it short.
  bool canExpand = true;
};

struct MergeResult {
  AxisList axes;
  /// The candidate whose axes the result is (a prefix of), or -1.
  int winner = -1;
};

/// Merges the candidates' axes along one factor. Candidates are taken
/// larger tensor first (then in order); a compatible candidate (one list a
/// prefix of the other) lengthens the result; on a conflict with a tensor of
/// the same size the result is cut to the longest common prefix and stops
/// growing; a smaller tensor never overrides a larger one.
MergeResult mergeFactorAxes(ArrayRef<MergeCandidate> candidates);

/// Which way a node propagates along a factor.
enum class Direction { None, Forward, Backward, Both };

/// A value of the program.
struct ValueInfo {
  int64_t bytes = 0;
  /// The current sharding; for an annotated value (a source), initially its
  /// annotation with priorities.
  TensorSharding sharding;
  /// True for an annotated value: an argument, a constraint's result, a
  /// function result, an op result that carried a sharding.
  bool isSource = false;
  /// How debug output names the value (`%3`); may be empty.
  std::string label;
};

/// An op of the program: its rule and the values it reads and defines.
struct Node {
  /// Shared by the nodes of one rule (a program's elementwise ops of one
  /// shape have one).
  std::shared_ptr<const FactorRule> rule;
  SmallVector<int> operands;
  SmallVector<int> results;
  /// How debug output names the op (`%3 = sd.add`); may be empty.
  std::string label;
  /// Nodes of one rule id have the same rule: a visit may reuse the result
  /// of an earlier one whose tensors had the same shardings and sizes. -1:
  /// never.
  int ruleId = -1;
};

/// Where a value dimension's axes came from (record-provenance).
struct Provenance {
  /// The source value whose annotation they come from, or -1.
  int source = -1;
  /// The node that last gave them to this dimension, or -1 for the source.
  int node = -1;
  /// The value and dimension that node took them from.
  int fromValue = -1;
  int fromDim = -1;
};

/// The shardings a node's operands must have and its results get so that
/// the node is consistent with its rule.
struct NodeLayout {
  SmallVector<TensorSharding> operands;
  SmallVector<TensorSharding> results;
};

class Propagator {
public:
  Propagator(MeshShape mesh, SmallVector<ValueInfo> values,
             std::vector<Node> nodes, bool recordProvenance);

  /// Propagates to a fixed point: for each user priority (p0 first, then
  /// p1, ..., then unprioritized annotations), the three op-priority phases
  /// (pass-through ops; pass-through factors of every op with broadcasts
  /// backward only; everything), each with forward and backward sweeps
  /// over the nodes in order until nothing changes.
  void run();

  const TensorSharding &getSharding(int value) const {
    return values[value].sharding;
  }
  /// Provenance of dimension `dim` of `value` (empty unless recorded).
  Provenance getProvenance(int value, int dim) const;
  /// The layout that makes `node` consistent with its rule: results keep
  /// their shardings where the rule allows, operand-only factors are merged
  /// from the operands, need_replication factors are unsharded, and sharded
  /// reduction factors make the results unreduced. A reduction factor
  /// takes an axis from the results when only the results hold it (on a
  /// result factor) and its operands holding the axis are larger: the
  /// smaller results are then reduced after the op instead of the operands
  /// being resharded before it.
  /// Nodes of one rule id whose tensors have the same shardings and sizes
  /// share one layout, made once.
  NodeLayout getConsistentLayout(int node) const;
  /// Number of node visits, for statistics and tests.
  int64_t getNumVisits() const { return numVisits; }
  /// Of those, the visits that took an earlier visit's result (Node::ruleId).
  int64_t getNumReusedVisits() const { return numReusedVisits; }
  /// The program as given (shardings as propagated so far).
  ArrayRef<ValueInfo> getValues() const { return values; }
  ArrayRef<Node> getNodes() const { return nodes; }

private:
  enum class Phase { PassThroughOps, PassThroughFactors, All };

  Direction getDirection(int node, int64_t factor, Phase phase) const;
  /// Propagates through one node; true when a value changed.
  bool visit(int node, Phase phase);
  /// The key under which `node`'s visits in `phase` (or its layout, with
  /// no phase) are kept: its rule id, the phase, and its tensors' sizes and
  /// shardings (Node::ruleId).
  SmallVector<int64_t, 64> nodeKey(int node, std::optional<Phase> phase) const;
  /// Assigns what an earlier visit of a node of the same key assigned;
  /// true when it assigned something.
  bool replayVisit(int node, ArrayRef<std::pair<int, TensorSharding>> assigned);
  /// The layout getConsistentLayout returns, made without its key's map.
  NodeLayout makeConsistentLayout(int node) const;
  /// Sweeps to a fixed point in one phase, after `previous` (none at the
  /// start of a user-priority level).
  void runPhase(Phase phase, std::optional<Phase> previous);
  /// Sets the shardings of sources for user-priority level `level` (an
  /// index into `levels`): dimensions of a later level are closed and empty,
  /// their axes marked replicated so that no other dimension takes them.
  void applyLevel(size_t level);
  void markNeighborsDirty(int value);
  /// The labels of debug output: given, or `node #n` and `value #v`.
  std::string describeNode(int node) const;
  std::string describeValue(int value) const;

  MeshShape mesh;
  SmallVector<ValueInfo> values;
  std::vector<Node> nodes;
  /// The annotations of the sources, with priorities.
  SmallVector<std::optional<TensorSharding>> annotations;
  /// Distinct user priorities, ascending; unprioritized is INT64_MAX.
  SmallVector<int64_t> levels;
  /// Per value: producer node (-1 for arguments) and users.
  SmallVector<int> producers;
  SmallVector<SmallVector<int, 2>> users;
  SmallVector<bool> dirty;
  /// What a visit of a node with a rule id set, by the rule id, the phase
  /// and its tensors' shardings and sizes: the (tensor, sharding) pairs it
  /// assigned, in order.
  llvm::StringMap<SmallVector<std::pair<int, TensorSharding>, 1>> visits;
  /// getConsistentLayout's layouts, by nodeKey without a phase.
  mutable llvm::StringMap<NodeLayout> layouts;
  /// Per node: FactorRule::isPassThroughOp and isBroadcastLike.
  SmallVector<bool> passThroughOps, broadcastLike;
  bool recordProvenance;
  /// Per value, per dimension (only when recording).
  SmallVector<SmallVector<Provenance>> provenance;
  int64_t numVisits = 0, numReusedVisits = 0;
};

} // namespace mlir::sd::propagation

#endif // SD_PASSES_SHARDINGPROPAGATION_H
