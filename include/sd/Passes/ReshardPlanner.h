//===- ReshardPlanner.h - collectives that change a sharding ----*- C++ -*-===//
//
// The algorithm behind the reshards of sd-partition, kept apart from the IR
// so that it can be tested on plain shardings: given one tensor's global
// shape, its source layout and its target layout on a mesh, find the
// cheapest sequence of collectives (all_gather, all_slice, all_to_all,
// all_reduce, reduce_scatter and, where the caller allows it, a permute)
// that turns one into the other.
//
// The search is Dijkstra over layouts. A move is one collective on one
// dimension (or one pair of dimensions for all_to_all, a set of axes for
// all_reduce, every dimension for a permute); its cost is what the device
// sends under the usual ring formulas, with N the group size and L the
// local bytes:
//
//   all_gather      L_result · (N-1)/N
//   all_slice       0
//   all_to_all      L · (N-1)/N
//   reduce_scatter  L_operand · (N-1)/N
//   all_reduce      2 · L · (N-1)/N
//   permute         L
//
// A permute moves whole blocks between devices: it applies when every
// dimension keeps the product of its axes' sizes, so that each device's new
// block is exactly the old block of some device (an axis replaced by another
// of the same size, the axes of a dimension reordered, axes trading
// dimensions). Each device sends its block at most once (0 for devices that
// keep theirs, the Permute pattern of CommunicationInfo): `[a] -> [b]` costs
// L where all_gather + all_slice costs L · (N-1), and `[a, b] -> [b, a]`
// costs L where gathering both costs L · (N_a·N_b - 1). Permutes are also
// tried towards layouts from which a gather, slice or all_to_all reaches the
// target (`[a, b] -> [b]`: permute to `[b, a]`, gather `a`).
//
// Ties go to fewer collectives (consecutive gathers, slices, reduce-scatters
// or all-reduces merge into one op). So an all_to_all beats an all_gather +
// all_slice, a permute beats them where both send L, axes are sliced before
// others are gathered, partial sums are reduced before gathers grow the
// data, and a partial sum whose axis the target shards is reduce-scattered.
// Every intermediate layout keeps each dimension divisible by its axes.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_RESHARDPLANNER_H
#define SD_PASSES_RESHARDPLANNER_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <utility>

namespace mlir::sd::reshard {

/// A mesh axis by its position in the mesh (0 is the most major).
using AxisId = int;
/// Mesh axes, major to minor.
using AxisList = SmallVector<AxisId, 4>;

/// How a tensor is laid out: the axes of each dimension (major to minor) and
/// the axes over which it is a partial sum. Replicated axes play no part.
struct Layout {
  SmallVector<AxisList> dims;
  /// Kept sorted: the order of a partial sum's axes does not matter.
  AxisList unreduced;

  /// `rank` whole dimensions, no partial sum.
  static Layout replicated(int64_t rank);
  bool operator==(const Layout &other) const {
    return dims == other.dims && unreduced == other.unreduced;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
};

enum class StepKind {
  AllGather,
  AllSlice,
  AllToAll,
  AllReduce,
  ReduceScatter,
  Permute
};

/// One collective of a plan.
struct Step {
  StepKind kind;
  /// all_gather, all_slice, reduce_scatter: the axes of each dimension;
  /// permute: the new axes of every dimension (see getPermutation).
  SmallVector<AxisList> dimAxes;
  /// all_to_all (major to minor) and all_reduce (sorted).
  AxisList axes;
  /// all_to_all: the dimension that loses `axes` and the one that gains them.
  int64_t srcDim = -1;
  int64_t tgtDim = -1;
};

/// A tensor to reshard.
struct ReshardProblem {
  /// The global shape and the bytes of one element.
  SmallVector<int64_t> shape;
  int64_t elementBytes = 4;
  /// Sizes of the mesh axes, by AxisId.
  SmallVector<int64_t> axisSizes;
  Layout source;
  Layout target;
  /// Whether the plan may contain permute steps: only where the caller can
  /// express an arbitrary permutation of blocks among a group's devices
  /// (sd-partition can: sd.collective_permute takes getPermutation's pairs).
  bool allowPermute = false;
  /// The axes' names, for debug output only (may be empty: `#0`, `#1`, ...).
  SmallVector<std::string> axisNames;
};

struct ReshardPlan {
  /// In order; consecutive steps of one kind that can merge are merged.
  SmallVector<Step> steps;
  /// Bytes each device sends in total (the cost model above).
  double bytes = 0;
};

/// The cheapest plan. Fails, with the reason in `error`, when no sequence of
/// collectives exists: a target partial sum over axes the source is not a
/// partial sum over, layouts that do not fit the shape or the mesh (an axis
/// out of range or used twice, a dimension not divisible by its axes).
FailureOr<ReshardPlan> planReshard(const ReshardProblem &problem,
                                   std::string *error = nullptr);

/// Which devices a permute from `from` to `to` makes send their block to
/// which: within every group of devices that differ only on `axes` (sorted,
/// major to minor), the member whose row-major coordinate index on `axes` is
/// `first` sends its block to the member with index `second`; a member that
/// is no pair's target keeps its block. Each member is at most one pair's
/// source and one pair's target, and the pairs are sorted.
struct Permutation {
  AxisList axes;
  SmallVector<std::pair<int64_t, int64_t>> pairs;
};

/// The permutation of blocks that turns layout `from` into layout `to` on
/// a mesh of `axisSizes`: devices that already hold their new block keep
/// it, the others receive it from a holder, lowest indices first. Axes that
/// affect both layouts alike (same dimension, same place) stay out of the
/// groups. Fails when some dimension's axes change their product or the
/// partial-sum axes differ, where no permutation exists.
FailureOr<Permutation> getPermutation(ArrayRef<int64_t> axisSizes,
                                      const Layout &from, const Layout &to);

/// `layout` after `step`; fails when the step does not apply (an axis to
/// remove is not at the minor end, an axis to add is in use, ...).
FailureOr<Layout> applyStep(const Layout &layout, const Step &step);

/// Readable form for tests and debugging: `all_gather [{x}, {}]`,
/// `all_to_all [x] 0->1`, `all_reduce [x, y]`, `collective_permute [{y}, {}]`
/// (the new layout), with `axisNames[id]` (or `#id` past its end).
std::string toString(const Step &step, ArrayRef<std::string> axisNames);
/// The steps joined by "; ", or "none".
std::string toString(const ReshardPlan &plan, ArrayRef<std::string> axisNames);
/// `[{x}, {}], unreduced [y]`, with `axisNames[id]` (or `#id`).
std::string toString(const Layout &layout, ArrayRef<std::string> axisNames);

} // namespace mlir::sd::reshard

#endif // SD_PASSES_RESHARDPLANNER_H
