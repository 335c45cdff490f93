//===- PlanBlocks.h - Repeated blocks priced once ---------------*- C++ -*-===//
//
// A diffusion transformer is a chain of calls to one block function (DiT's
// 28 `@dit_block`s, Wan's 40, Flux's 19 double- and 38 single-stream
// blocks), each call taking the previous one's results. Every count the
// cost model reports (FLOPs, bytes, collectives, parameters, optimizer
// state, the activation peak) grows by the same amount with each further
// block, so the whole model's report is that of the model with kBaseBlocks
// calls of each chain (the base) plus (calls - kBaseBlocks) times what one
// more block of each chain adds. The planner partitions one program for
// both, the sample: every chain cut to kBaseBlocks + 1 calls, the middle
// one marked (sd/Analysis/SampleBlocks.h); the cost model prices the
// sample without the middle blocks as the base, and with one chain's as
// that chain's one block more. With two blocks in the base, the activation
// peak already sits where it does in the whole model (with one, the peak
// of a short program can fall elsewhere: DiT-tiny's memory came out 5%
// high); `test/lit/Tools/sdopt-plan-blocks.mlir` checks the extrapolated
// table against the whole program's.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_PASSES_PLANBLOCKS_H
#define SD_LIB_PASSES_PLANBLOCKS_H

#include "sd/Analysis/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace mlir::sd {

/// The blocks of each chain the base program keeps; a sample keeps one more
/// of its chain. Chains shorter than kBaseBlocks + 2 are priced whole.
inline constexpr int64_t kBaseBlocks = 2;

/// One chain of calls to a block function, in a function's body.
struct BlockChain {
  /// The function holding the calls, and the callee.
  std::string function, callee;
  /// How many calls the chain has.
  int64_t calls = 0;
};

/// The chains of `module`: for each function, the calls of one callee that
/// follow each other in one block, each taking the previous call's results
/// as its first operands, whose results nothing else uses but the next call
/// (the last one's excepted); those of at least kBaseBlocks + 2 calls, in
/// module order.
std::vector<BlockChain> findBlockChains(ModuleOp module);

/// Cuts each chain of `module` to `keep[i]` calls (fewer than it has) in
/// place: the
/// last kept call's results replace the chain's, the others are erased with
/// the arguments only they used (a public function's, when nothing calls
/// it). `chains` must be findBlockChains(module) of the same module.
void keepBlocks(ModuleOp module, llvm::ArrayRef<BlockChain> chains,
                llvm::ArrayRef<int64_t> keep);

/// Cuts each chain of `module` (findBlockChains(module): `chains`) to
/// kBaseBlocks + 1 calls in place, as keepBlocks does, and marks the calls
/// kept with their chain and place (SDDialect::kSampleBlockAttrName).
void keepSampleBlocks(ModuleOp module, llvm::ArrayRef<BlockChain> chains);

/// The whole model's report from the base's (every chain cut to
/// kBaseBlocks calls) and, per chain, the report with that chain at one
/// more: base + sum over chains of (calls - kBaseBlocks) * (sample - base),
/// for every count of the report; names and the mesh are the base's.
CostReport extrapolateBlocks(const CostReport &base,
                             llvm::ArrayRef<CostReport> samples,
                             llvm::ArrayRef<BlockChain> chains);

/// The whole model's report from a sample's (computeSampleReports of the
/// program keepSampleBlocks made): extrapolateBlocks of its base and
/// samples, each peak (activation with its gradient sums, host) the larger
/// of that and its liveness with (calls - kBaseBlocks) copies of each
/// chain's middle block (SampleLiveness::peaksFor), which follows a peak
/// that moves outside the middle blocks as blocks are added.
CostReport extrapolateSample(const SampleReports &sample,
                             llvm::ArrayRef<BlockChain> chains);

} // namespace mlir::sd

#endif // SD_LIB_PASSES_PLANBLOCKS_H
