//===- SampleBlocks.h - The blocks of the planner's sample ------*- C++ -*-===//
//
// The planner prices a model whose blocks repeat (a chain of calls to one
// block function) from one sample program that keeps three calls of each
// chain. The middle call's ops, backward and parameter updates included,
// are what each further block adds; the program without them is the model
// with two blocks of each chain. The sample's calls carry their place
// (SDDialect::kSampleBlockAttrName); sd-differentiate moves it into the
// location of every op it inlines from them, and the ops later passes make
// for an op (its VJP, the reshards and collectives of its operands, a
// parameter's update) take that op's location, so the mark survives
// inlining, canonicalization and partitioning without changing what CSE
// merges (it ignores locations).
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_SAMPLEBLOCKS_H
#define SD_ANALYSIS_SAMPLEBLOCKS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir::sd {

/// A call of a repeated block in the sample program: its chain and its
/// place in the chain.
struct SampleBlock {
  int64_t chain = 0;
  int64_t position = 0;
  bool operator==(const SampleBlock &other) const {
    return chain == other.chain && position == other.position;
  }
};

/// The place in its chain of the call the base leaves out.
inline constexpr int64_t kMiddleBlockPosition = 1;

/// `loc`, marked as coming from `block`'s call.
Location markSampleBlock(Location loc, SampleBlock block);

/// The block `loc` is marked with: none when it is not marked, or when it
/// fuses locations that are not all marked with one block (an op made of
/// several).
std::optional<SampleBlock> sampleBlockOf(Location loc);

/// The middle blocks of a call-free sample function: the ops marked with a
/// middle position; of the other ops (what later passes made from an
/// unmarked location: collectives, reshards, constants), those whose every
/// user is in one chain's middle block, and those only the return reads
/// (through such ops) whose every operand one chain's middle block made;
/// the arguments whose every user but the return is in one. Ops marked
/// with another position are never in a middle block, even where only a
/// middle block reads them (the block before it: the base's next block
/// reads them).
struct MiddleBlocks {
  /// The chain of each op (of the body) in a middle block.
  llvm::DenseMap<Operation *, int64_t> ops;
  /// The chain of each argument in one, -1 for the others.
  llvm::SmallVector<int64_t> arguments;
  /// Whether any op is marked with a block at all.
  bool marked = false;
};
MiddleBlocks findMiddleBlocks(func::FuncOp func);

} // namespace mlir::sd

#endif // SD_ANALYSIS_SAMPLEBLOCKS_H
