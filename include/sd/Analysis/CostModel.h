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
  /// The op's name without the dialect: `all_gather`.
  std::string kind;
  /// The group's mesh axes, in mesh order.
  std::vector<std::string> axes;
  /// N: devices per group.
  int64_t groupSize = 1;
  /// How many such ops run (calls counted).
  int64_t count = 0;
  /// Sum of the tensor sizes S the ring formula applies to.
  int64_t tensorBytes = 0;
  /// Sum of the bytes each device sends.
  int64_t bytesPerDevice = 0;
};

/// What one device holds, computes and sends when it runs a function.
struct CostReport {
  std::string function;
  /// The module's mesh: symbol, `data:2,fsdp:4`, device count; empty name
  /// and one device without a mesh.
  std::string meshName;
  std::string meshSpec;
  int64_t numDevices = 1;
  ProgramLayout layout = ProgramLayout::Unsharded;

  /// Arguments with `#sd.param`; the others (inputs, and arguments without
  /// a role) are inputs.
  int64_t numParameters = 0;
  int64_t parameterElements = 0;
  int64_t parameterBytes = 0;
  int64_t numInputs = 0;
  int64_t inputBytes = 0;

  /// The activation peak: op results only, arguments excluded.
  int64_t peakActivationBytes = 0;
  /// The op running at the peak (`sd.attention "attn_output"`), through
  /// calls (`func.call @dit_block > sd.attention`).
  std::string peakOp;
  /// Op results, through calls, and (global layout) how many of them count
  /// whole for lack of a sharding.
  int64_t numValues = 0;
  int64_t numValuesWithoutSharding = 0;

  int64_t flops = 0;
  int64_t bytesAccessed = 0;
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

  /// Parameters + inputs + the activation peak (no optimizer state yet).
  int64_t totalBytes() const {
    return parameterBytes + inputBytes + peakActivationBytes;
  }
};

/// The function to report on: `name` when given, else `@loss`, else the
/// only public function. Null after an error on `module`.
func::FuncOp findReportFunction(ModuleOp module, llvm::StringRef name);

/// Costs `func` per device (see the file comment). Calls are costed through
/// their callees, once per call. Fails, after an error on the op, on ops
/// without CostOpInterface, dynamic shapes, functions with more than one
/// block and recursive calls.
FailureOr<CostReport> computeCostReport(func::FuncOp func, LayoutChoice layout);

} // namespace mlir::sd

#endif // SD_ANALYSIS_COSTMODEL_H
