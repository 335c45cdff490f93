//===- CostModel.h - per-device memory, FLOPs and communication -*- C++ -*-===//
//
// The one cost model behind every number sdopt prints (`sdopt --report`):
// what one device of the mesh holds, computes and sends when it runs a
// function. Ops state their own costs through CostOpInterface; this file
// adds them up, runs a liveness scan for the activation peak, and applies
// the ring convention to the collectives.
//
// Programs are costed as they are:
// * partitioned (the function has collectives): types are local, so every
//   number is per device as written;
// * global with shardings (after the logical axis rules, and after
//   sd-propagate-sharding for activations): parameters, inputs and values
//   that carry a sharding count their per-device block; values without one
//   count whole, and the report says how many;
// * neither: one device runs the whole program.
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_COSTMODEL_H
#define SD_ANALYSIS_COSTMODEL_H

#include "sd/IR/SDCost.h"
#include "sd/Sharding/Mesh.h"
#include "sd/Sharding/Network.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sd {

//===----------------------------------------------------------------------===//
// Pure parts
//===----------------------------------------------------------------------===//

/// A value's lifetime in program order: alive from the position of its
/// defining op to the position of its last use, both included (an op needs
/// its operands and its results at once).
struct LiveRange {
  int64_t bytes = 0;
  int64_t start = 0;
  int64_t end = 0;
};

/// The largest sum of live bytes at one position, and the first position
/// where it occurs (-1 when there are no positions).
struct LivePeak {
  int64_t bytes = 0;
  int64_t position = -1;
};

/// The peak over positions [0, numPositions) of the bytes of the ranges
/// alive there plus `extra[p]` (memory an op needs only while it runs, such
/// as a callee's own activations; may be empty). Linear in the number of
/// ranges and positions.
LivePeak computeLivePeak(llvm::ArrayRef<LiveRange> ranges,
                         llvm::ArrayRef<int64_t> extra, int64_t numPositions);

/// Bytes one device sends under the ring convention, for a tensor of S
/// bytes (CommunicationInfo::tensorBytes) and a group of N devices, in N
/// chunks of ⌈S/N⌉ bytes: all_gather, reduce_scatter and all_to_all send
/// N−1 chunks (S(N−1)/N), all_reduce 2(N−1) chunks (2S(N−1)/N, a
/// reduce-scatter then an all-gather), collective_permute S, all_slice 0.
/// A group of one device sends nothing.
int64_t getRingBytesPerDevice(CommunicationPattern pattern, int64_t tensorBytes,
                              int64_t groupSize);

//===----------------------------------------------------------------------===//
// The report of a function
//===----------------------------------------------------------------------===//

/// How the types of a program relate to devices.
enum class ProgramLayout {
  /// Local types: each value's type is what one device holds.
  Partitioned,
  /// Global types: a value's block on one device follows from its
  /// sharding.
  Global,
  /// No shardings and no collectives: one device runs everything.
  Unsharded,
};

/// How to decide the layout: from the program (collectives → partitioned,
/// else shardings → global, else unsharded) or as forced.
enum class LayoutChoice { Auto, Local, Global };

/// The collectives of one kind over one set of mesh axes.
struct CollectiveSummary {
  /// The op's name without the dialect (`all_gather`), or `halo_exchange`
  /// for the permutes that move a spatially sharded convolution's halo rows.
  std::string kind;
  /// The group's mesh axes, in mesh order.
  std::vector<std::string> axes;
  /// N: devices per group.
  int64_t groupSize = 1;
  /// How many such ops run (calls counted), and how many of them are
  /// issued asynchronously (sd-async-collectives' `_start` ops), which may
  /// overlap compute.
  int64_t count = 0;
  int64_t asyncCount = 0;
  /// Sum of the tensor sizes S the ring formula applies to.
  int64_t tensorBytes = 0;
  /// Sum of the bytes each device sends.
  int64_t bytesPerDevice = 0;
};

/// How often each parameter is all-gathered, against ZeRO's bound. An
/// all_gather counts for a parameter when its operand is the parameter's
/// argument, through reshape, convert, slice and transpose, and through
/// calls (a callee's argument is the call's operand). Counts are of the
/// sharded parameters (split over at least one mesh axis of size > 1),
/// the only ones an all_gather can apply to, and are zero unless the
/// program is partitioned (before, there are no collectives).
struct ParameterGathers {
  /// Parameters, and those sharded.
  int64_t numParameters = 0, numSharded = 0;
  /// Sharded parameters gathered once, more than once and never.
  int64_t numGatheredOnce = 0, numGatheredMoreThanOnce = 0,
          numNeverGathered = 0;
  /// A sharded parameter not gathered exactly once: its number of
  /// all_gathers and its global bytes.
  struct Exception {
    std::string name;
    int64_t gathers = 0;
    int64_t bytes = 0;
  };
  /// In argument order.
  std::vector<Exception> exceptions;
  /// The all_gathers of parameters (calls counted) and the bytes each
  /// device sends in them.
  int64_t numGathers = 0, gatherBytes = 0;
  /// Ψ: the global bytes of the sharded parameters.
  int64_t shardedBytes = 0;
  /// N: devices per gather group when every sharded parameter has the same
  /// (the product of the sizes of the axes it is split over); 0 otherwise.
  int64_t groupSize = 0;
  /// ZeRO-3's forward volume, each sharded parameter gathered once:
  /// Σ S(N−1)/N under the ring convention, Ψ(N−1)/N for one N.
  int64_t zeroBoundBytes = 0;
};

/// What one device holds, computes and sends when it runs a function.
struct CostReport {
  std::string function;
  /// The module's mesh: symbol, `data:2,fsdp:4`, device count; empty name
  /// and one device without a mesh.
  std::string meshName;
  std::string meshSpec;
  int64_t numDevices = 1;
  /// The mesh itself (one `data:1` axis without a mesh).
  ::sd::MeshSpec mesh;
  ProgramLayout layout = ProgramLayout::Unsharded;

  /// Arguments with `#sd.param`; the others (inputs, and arguments without
  /// a role) are inputs.
  int64_t numParameters = 0;
  int64_t parameterElements = 0;
  int64_t parameterBytes = 0;
  /// Of them, the frozen ones (`sd.frozen`: no gradient, no optimizer
  /// state, no gradient reduction).
  int64_t numFrozen = 0;
  int64_t frozenElements = 0;
  int64_t numInputs = 0;
  int64_t inputBytes = 0;
  /// Arguments with `#sd.optimizer_state` (AdamW's moments in a training
  /// step).
  int64_t numOptimizerStates = 0;
  int64_t optimizerStateBytes = 0;

  /// The activation peak: op results only, arguments excluded.
  int64_t peakActivationBytes = 0;
  /// Of the activation peak, the f32 sums of the parameters' gradients
  /// across microbatches (a step with gradient accumulation: the first
  /// operands and the results of the `sd.gradient_sum` adds) alive there. They
  /// are gradient memory rather than activations, and do not grow with the
  /// microbatch.
  int64_t peakGradientSumBytes = 0;
  /// The op running at the peak (`sd.attention "attn_output"`), through
  /// calls (`func.call @dit_block > sd.attention`).
  std::string peakOp;
  /// Op results, through calls, and (global layout) how many of them count
  /// whole for lack of a sharding.
  int64_t numValues = 0;
  int64_t numValuesWithoutSharding = 0;

  /// Values held in host memory (results of sd.offload): the peak of
  /// their live bytes, and the bytes moved between device and host memory
  /// (offloads plus reloads).
  int64_t peakHostBytes = 0;
  int64_t hostTransferBytes = 0;

  int64_t flops = 0;
  /// The part of `flops` spent recomputing forward values for the backward
  /// pass (ops marked `sd.recompute`).
  int64_t recomputeFlops = 0;
  int64_t bytesAccessed = 0;
  /// The FLOPs and bytes of matrix products (dot_general, convolutions and
  /// attention, the FLOPs by the element type they compute in), and the
  /// bytes of every other op: the step-time model's op classes.
  int64_t matmulFlopsF32 = 0;
  int64_t matmulFlopsBf16 = 0;
  int64_t matmulBytes = 0;
  int64_t otherBytes = 0;
  /// Of otherBytes, those that touch memory once fusible ops (elementwise
  /// arithmetic, broadcasts, views: CostOpInterface::isFusible) run inside
  /// their readers' loops: the step-time model's bytes for those ops.
  int64_t otherMemoryBytes = 0;
  /// Of matmulFlopsF32, those of small and of medium products (by each
  /// op's FLOPs, sd::productSize), which a profile may rate apart.
  int64_t matmulFlopsF32Small = 0;
  int64_t matmulFlopsF32Medium = 0;
  /// Of matmulFlopsF32, those of the flash-attention kernels (forward, dQ
  /// and dK/dV; in no size class), which a profile may rate apart. The
  /// untiled attention op runs as GEMMs and counts by size class.
  int64_t attentionFlopsF32 = 0;
  /// Of matmulFlopsF32, those of dot_generals in the Aᵀ·B form (a transposed
  /// lhs, an untransposed rhs: DotGeneralOp::getGemmOperands; the weight
  /// gradients' form; in no size class), which a profile may rate apart.
  int64_t matmulFlopsF32TransposedLhs = 0;
  /// Uneven shards (partitioned layout): the arguments with padded blocks,
  /// their padding's bytes per device (on average over the devices), and
  /// the elements the ops compute per device with those that are padding
  /// (sd-partition's `sd.padding`).
  int64_t numPaddedTensors = 0;
  int64_t paddingBytes = 0;
  int64_t paddedElements = 0;
  int64_t computedElements = 0;
  /// (global layout) Ops with FLOPs counted whole for lack of a sharding.
  int64_t numOpsWithoutSharding = 0;

  /// (global layout) `sd.reshard` ops: communication that sd-partition
  /// will turn into collectives, not costed before.
  int64_t numReshards = 0;

  /// Callees costed through their calls, with the number of calls.
  std::vector<std::pair<std::string, int64_t>> calls;

  /// By (kind, axes), sorted.
  std::vector<CollectiveSummary> collectives;
  int64_t collectiveBytesPerDevice = 0;

  ParameterGathers parameterGathers;

  /// Device memory at the peak: parameters, optimizer state, inputs and
  /// the activation peak (host-resident values excluded).
  int64_t totalBytes() const {
    return parameterBytes + optimizerStateBytes + inputBytes +
           peakActivationBytes;
  }
};

/// The collectives of a report over one set of mesh axes, with the time a
/// network model predicts for them.
struct AxisCommunication {
  /// In mesh order.
  std::vector<std::string> axes;
  ::sd::Link link = ::sd::Link::None;
  int64_t groupSize = 1;
  int64_t count = 0;
  int64_t bytesPerDevice = 0;
  double predictedSeconds = 0;
};

/// The indices in `report.mesh` of the axes `summary`'s collectives run
/// over, as the network model takes them.
std::vector<int> collectiveAxes(const CostReport &report,
                                const CollectiveSummary &summary);

/// `report`'s collectives grouped by their mesh axes (in the order of the
/// report's rows) and priced by `network` (sd/Sharding/Network.h).
std::vector<AxisCommunication>
predictCommunication(const CostReport &report,
                     const ::sd::NetworkModel &network);

/// The function to report on: `name` when given, else `@loss`, else the
/// only public function. Null after an error on `module`.
func::FuncOp findReportFunction(ModuleOp module, llvm::StringRef name);

/// Costs `func` per device (see the file comment). Calls are costed through
/// their callees, once per call. Fails, after an error on the op, on ops
/// without CostOpInterface, dynamic shapes, functions with more than one
/// block and recursive calls.
FailureOr<CostReport> computeCostReport(func::FuncOp func, LayoutChoice layout);

/// The reports of a call-free sample program (sd/Analysis/SampleBlocks.h)
/// with `numChains` chains: the base, costed without any chain's middle
/// block, and per chain the base with that chain's middle block. Each
/// counts what remains (ops, the arguments only they read); the activation
/// peak is rescanned, each value of the block before a left-out middle
/// block living as long as the middle block's value that takes its place
/// in the next block (paired in program order by size). The uneven-shard
/// padding (`sd.padding`, counted by sd-partition for the whole function)
/// is the sample's in each.
///
/// The activation, gradient-sum and host peaks are not linear in the
/// blocks where the peak moves from one op to another as blocks are added
/// (the base's peak at one op, the sample's at another), so `liveness`
/// keeps the sample's live ranges, each with the chain whose middle block
/// made its value (`peaksFor`): the planner takes the larger of the
/// extrapolated peak and that.
struct SampleLiveness {
  /// Device-resident and host-resident (offloaded) ranges, over
  /// `numPositions` positions (one per op of the sample).
  std::vector<LiveRange> device, host;
  /// Per range: the chain whose middle block made the value, or -1.
  std::vector<int64_t> deviceChain, hostChain;
  /// Per device range: whether it holds a gradient summed across
  /// microbatches.
  std::vector<bool> gradientSum;
  /// Per device range: whether it is a middle block's output (a value the
  /// block after it reads), and the chain whose middle block reads it of
  /// the block before (-1: none).
  std::vector<bool> deviceLink;
  std::vector<int64_t> deviceInLink;
  /// Per position: memory its op needs only while it runs, and the chain
  /// whose middle block the op is in (-1: none).
  std::vector<int64_t> extra, positionChain;
  int64_t numPositions = 0;

  struct Peaks {
    int64_t activationBytes = 0;
    int64_t gradientSumBytes = 0;
    int64_t hostBytes = 0;
  };
  /// The peaks of the model with `copies[c]` copies of chain c's middle
  /// block (its calls less the 2 around the middle one; the sample has 1).
  /// Where an op outside chain c's middle block runs, each copy holds what
  /// the middle block holds there; where one of the block's own ops runs,
  /// it is one copy at work, and each other copy holds what the block holds
  /// next to it (at the nearest op outside it before or after, the larger:
  /// the copies before it have run that far, the ones after it have not).
  /// The chain's links are not each copy's: the backward's cotangent into
  /// the block before the middle one, which each copy hands to the next at
  /// once, counts once; the middle block's output counts once more per
  /// copy only where the block before it still holds what it handed the
  /// middle block (each copy keeps its input for its backward, or not).
  Peaks peaksFor(llvm::ArrayRef<int64_t> copies) const;
};
struct SampleReports {
  CostReport base;
  std::vector<CostReport> samples;
  SampleLiveness liveness;
};
FailureOr<SampleReports>
computeSampleReports(func::FuncOp func, LayoutChoice layout, int64_t numChains);

/// The FLOPs of a function's matrix products (dot_general, convolutions,
/// attention), by the element type they compute in.
struct ProductFlops {
  int64_t f32 = 0;
  int64_t bf16 = 0;
};

/// The matrix products' FLOPs one device runs in `func`, a call-free global
/// program with shardings (after sd-propagate-sharding), on a mesh with the
/// axis sizes of `mesh` (which may differ from the program's mesh op): each
/// op's work split as computeCostReport's global layout splits it, by its
/// result's sharded dimensions and unreduced axes. No partitioning of the
/// program computes less in them, so this bounds the partitioned program's
/// product FLOPs from below. Fails on calls and on ops that cannot be
/// costed.
FailureOr<ProductFlops> computeShardedProductFlops(func::FuncOp func,
                                                   const ::sd::MeshSpec &mesh);

/// The same of a sample program with `numChains` chains: the FLOPs outside
/// every middle block, and those of each chain's middle block.
struct SampleProductFlops {
  ProductFlops base;
  std::vector<ProductFlops> middle;
};
FailureOr<SampleProductFlops>
computeSampleProductFlops(func::FuncOp func, const ::sd::MeshSpec &mesh,
                          int64_t numChains);

} // namespace mlir::sd

#endif // SD_ANALYSIS_COSTMODEL_H
