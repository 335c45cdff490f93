//===- PlanBlocks.cpp - Repeated blocks priced once -----------------------===//

#include "PlanBlocks.h"

#include "sd/Analysis/SampleBlocks.h"
#include "sd/IR/SDDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::sd;

namespace {
/// A chain's calls, in order, in the function holding them.
struct CallChain {
  func::FuncOp function;
  SmallVector<func::CallOp> calls;
};
} // namespace

/// `next` takes `prev`'s results as its first operands, and nothing else
/// uses them.
static bool follows(func::CallOp prev, func::CallOp next) {
  unsigned results = prev.getNumResults();
  if (results == 0 || next.getNumOperands() < results)
    return false;
  for (unsigned r = 0; r < results; ++r)
    if (next.getOperand(r) != prev.getResult(r) ||
        !prev.getResult(r).hasOneUse())
      return false;
  return true;
}

/// Every chain of at least three calls, in module order.
static std::vector<CallChain> callChains(ModuleOp module) {
  std::vector<CallChain> chains;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    for (Block &block : function.getBody()) {
      llvm::MapVector<StringRef, SmallVector<func::CallOp>> byCallee;
      for (auto call : block.getOps<func::CallOp>())
        byCallee[call.getCallee()].push_back(call);
      for (auto &entry : byCallee) {
        ArrayRef<func::CallOp> calls = entry.second;
        size_t start = 0;
        for (size_t i = 1; i <= calls.size(); ++i) {
          if (i < calls.size() && follows(calls[i - 1], calls[i]))
            continue;
          if (int64_t(i - start) >= kBaseBlocks + 2)
            chains.push_back({function, SmallVector<func::CallOp>(
                                            calls.slice(start, i - start))});
          start = i;
        }
      }
    }
  }
  return chains;
}

std::vector<BlockChain> mlir::sd::findBlockChains(ModuleOp module) {
  std::vector<BlockChain> result;
  for (CallChain &chain : callChains(module))
    result.push_back({chain.function.getSymName().str(),
                      chain.calls.front().getCallee().str(),
                      int64_t(chain.calls.size())});
  return result;
}

void mlir::sd::keepBlocks(ModuleOp module, ArrayRef<BlockChain> expected,
                          ArrayRef<int64_t> keep) {
  std::vector<CallChain> chains = callChains(module);
  assert(chains.size() == expected.size() && keep.size() == chains.size() &&
         "keepBlocks needs the module's own chains");
  (void)expected;
  // The arguments the erased calls read, by function.
  llvm::MapVector<func::FuncOp, llvm::SmallPtrSet<BlockArgument, 16>> read;
  for (auto [chain, count] : llvm::zip(chains, keep)) {
    assert(count >= 1 && size_t(count) < chain.calls.size());
    func::CallOp last = chain.calls.back();
    func::CallOp kept = chain.calls[count - 1];
    last->replaceAllUsesWith(kept->getResults());
    // What only the erased calls read goes with them (ops that computed
    // their operands, and those ops' own operands in turn). A set: an op
    // feeding two erased calls is visited (and erased) once.
    llvm::SmallPtrSet<Operation *, 8> erasing;
    for (size_t i = count; i < chain.calls.size(); ++i)
      erasing.insert(chain.calls[i]);
    llvm::SetVector<Operation *> producers;
    for (size_t i = chain.calls.size(); i-- > size_t(count);) {
      func::CallOp call = chain.calls[i];
      for (Value operand : call->getOperands()) {
        if (auto arg = dyn_cast<BlockArgument>(operand)) {
          if (arg.getOwner()->isEntryBlock() &&
              arg.getOwner()->getParentOp() == chain.function)
            read[chain.function].insert(arg);
        } else if (Operation *def = operand.getDefiningOp();
                   def && !erasing.contains(def)) {
          producers.insert(def);
        }
      }
      call->erase();
    }
    while (!producers.empty()) {
      Operation *op = producers.pop_back_val();
      if (!isOpTriviallyDead(op))
        continue;
      for (Value operand : op->getOperands()) {
        if (auto arg = dyn_cast<BlockArgument>(operand)) {
          if (arg.getOwner()->isEntryBlock() &&
              arg.getOwner()->getParentOp() == chain.function)
            read[chain.function].insert(arg);
        } else if (Operation *def = operand.getDefiningOp()) {
          producers.insert(def);
        }
      }
      op->erase();
    }
  }
  // Their parameters go with them, unless something calls the function
  // (its signature is then fixed).
  for (auto &[function, args] : read) {
    if (!SymbolTable::symbolKnownUseEmpty(function, module))
      continue;
    llvm::BitVector erase(function.getNumArguments());
    for (BlockArgument arg : args)
      if (arg.use_empty())
        erase.set(arg.getArgNumber());
    (void)function.eraseArguments(erase);
  }
}

void mlir::sd::keepSampleBlocks(ModuleOp module, ArrayRef<BlockChain> chains) {
  std::vector<CallChain> calls = callChains(module);
  assert(calls.size() == chains.size() &&
         "keepSampleBlocks needs the module's own chains");
  Builder builder(module.getContext());
  for (auto [index, chain] : llvm::enumerate(calls))
    for (int64_t position = 0; position <= kBaseBlocks; ++position)
      chain.calls[position]->setAttr(
          SDDialect::kSampleBlockAttrName,
          builder.getDenseI64ArrayAttr({int64_t(index), position}));
  keepBlocks(module, chains,
             std::vector<int64_t>(chains.size(), kBaseBlocks + 1));
}

namespace {
/// The counts of a report that grow with its blocks.
constexpr int64_t CostReport::*kCounts[] = {
    &CostReport::numParameters,
    &CostReport::parameterElements,
    &CostReport::parameterBytes,
    &CostReport::numFrozen,
    &CostReport::frozenElements,
    &CostReport::numInputs,
    &CostReport::inputBytes,
    &CostReport::numOptimizerStates,
    &CostReport::optimizerStateBytes,
    &CostReport::peakActivationBytes,
    &CostReport::peakGradientSumBytes,
    &CostReport::numValues,
    &CostReport::numValuesWithoutSharding,
    &CostReport::peakHostBytes,
    &CostReport::hostTransferBytes,
    &CostReport::flops,
    &CostReport::recomputeFlops,
    &CostReport::bytesAccessed,
    &CostReport::matmulFlopsF32,
    &CostReport::matmulFlopsF32Small,
    &CostReport::matmulFlopsF32Medium,
    &CostReport::attentionFlopsF32,
    &CostReport::matmulFlopsF32TransposedLhs,
    &CostReport::matmulFlopsBf16,
    &CostReport::matmulBytes,
    &CostReport::otherBytes,
    &CostReport::otherMemoryBytes,
    &CostReport::numPaddedTensors,
    &CostReport::paddingBytes,
    &CostReport::paddedElements,
    &CostReport::computedElements,
    &CostReport::numOpsWithoutSharding,
    &CostReport::numReshards,
    &CostReport::collectiveBytesPerDevice,
};

constexpr int64_t CollectiveSummary::*kCollectiveCounts[] = {
    &CollectiveSummary::count,
    &CollectiveSummary::asyncCount,
    &CollectiveSummary::tensorBytes,
    &CollectiveSummary::bytesPerDevice,
};

using CollectiveKey = std::pair<std::string, std::vector<std::string>>;
} // namespace

CostReport mlir::sd::extrapolateBlocks(const CostReport &base,
                                       ArrayRef<CostReport> samples,
                                       ArrayRef<BlockChain> chains) {
  assert(samples.size() == chains.size());
  CostReport whole = base;
  std::map<CollectiveKey, CollectiveSummary> collectives;
  for (const CollectiveSummary &summary : base.collectives)
    collectives[{summary.kind, summary.axes}] = summary;
  for (auto [sample, chain] : llvm::zip(samples, chains)) {
    int64_t more = chain.calls - kBaseBlocks;
    for (int64_t CostReport::*count : kCounts)
      whole.*count += more * (sample.*count - base.*count);
    // A collective of the sample's block the base may not have, and the
    // other way round.
    std::map<CollectiveKey, CollectiveSummary> sampled;
    for (const CollectiveSummary &summary : sample.collectives)
      sampled[{summary.kind, summary.axes}] = summary;
    for (const CollectiveSummary &summary : base.collectives)
      sampled.try_emplace(
          {summary.kind, summary.axes},
          CollectiveSummary{summary.kind, summary.axes, summary.groupSize});
    for (auto &[key, summary] : sampled) {
      CollectiveSummary &into =
          collectives
              .try_emplace(key, CollectiveSummary{summary.kind, summary.axes,
                                                  summary.groupSize})
              .first->second;
      CollectiveSummary zero;
      auto found = llvm::find_if(base.collectives, [&](const auto &b) {
        return b.kind == key.first && b.axes == key.second;
      });
      const CollectiveSummary &before =
          found == base.collectives.end() ? zero : *found;
      for (int64_t CollectiveSummary::*count : kCollectiveCounts)
        into.*count += more * (summary.*count - before.*count);
    }
  }
  for (int64_t CostReport::*count : kCounts)
    whole.*count = std::max<int64_t>(whole.*count, 0);
  whole.collectives.clear();
  for (auto &[key, summary] : collectives) {
    for (int64_t CollectiveSummary::*count : kCollectiveCounts)
      summary.*count = std::max<int64_t>(summary.*count, 0);
    if (summary.count > 0)
      whole.collectives.push_back(summary);
  }
  return whole;
}

CostReport mlir::sd::extrapolateSample(const SampleReports &sample,
                                       ArrayRef<BlockChain> chains) {
  CostReport whole = extrapolateBlocks(sample.base, sample.samples, chains);
  std::vector<int64_t> copies;
  for (const BlockChain &chain : chains)
    copies.push_back(chain.calls - kBaseBlocks);
  // Extrapolated, a peak that moves as blocks are added comes out low;
  // the copies' liveness outside the middle blocks is exact there.
  SampleLiveness::Peaks peaks = sample.liveness.peaksFor(copies);
  if (peaks.activationBytes > whole.peakActivationBytes) {
    whole.peakActivationBytes = peaks.activationBytes;
    whole.peakGradientSumBytes = peaks.gradientSumBytes;
  }
  whole.peakHostBytes = std::max(whole.peakHostBytes, peaks.hostBytes);
  return whole;
}
