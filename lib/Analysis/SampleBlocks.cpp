//===- SampleBlocks.cpp - The blocks of the planner's sample --------------===//

#include "sd/Analysis/SampleBlocks.h"

#include "sd/IR/SDDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::sd;

namespace {
/// What a location says of its block: nothing, one block, or several
/// (or some parts marked and some not).
struct Mark {
  enum Kind { Unmarked, One, Mixed } kind = Unmarked;
  SampleBlock block;
};
} // namespace

/// The block a fused location's metadata names, if it is a mark.
static std::optional<SampleBlock> blockOfMetadata(Attribute metadata) {
  auto dict = dyn_cast_or_null<DictionaryAttr>(metadata);
  if (!dict)
    return std::nullopt;
  auto pair = dict.getAs<DenseI64ArrayAttr>(SDDialect::kSampleBlockAttrName);
  if (!pair || pair.size() != 2)
    return std::nullopt;
  return SampleBlock{pair[0], pair[1]};
}

static Mark markOf(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (std::optional<SampleBlock> block = blockOfMetadata(fused.getMetadata()))
      return {Mark::One, *block};
    std::optional<Mark> all;
    for (Location part : fused.getLocations()) {
      Mark mark = markOf(part);
      if (!all)
        all = mark;
      else if (mark.kind != all->kind ||
               (mark.kind == Mark::One && !(mark.block == all->block)))
        return {Mark::Mixed, {}};
      if (mark.kind == Mark::Mixed)
        return mark;
    }
    return all.value_or(Mark{});
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return markOf(name.getChildLoc());
  if (auto site = dyn_cast<CallSiteLoc>(loc))
    return markOf(site.getCallee());
  return {};
}

Location mlir::sd::markSampleBlock(Location loc, SampleBlock block) {
  MLIRContext *context = loc.getContext();
  auto metadata = DictionaryAttr::get(
      context,
      {NamedAttribute(
          StringAttr::get(context, SDDialect::kSampleBlockAttrName),
          DenseI64ArrayAttr::get(context, {block.chain, block.position}))});
  // A location marked already (a call inside a block) keeps its mark.
  if (markOf(loc).kind != Mark::Unmarked)
    return loc;
  return FusedLoc::get(context, {loc}, metadata);
}

std::optional<SampleBlock> mlir::sd::sampleBlockOf(Location loc) {
  Mark mark = markOf(loc);
  if (mark.kind != Mark::One)
    return std::nullopt;
  return mark.block;
}

MiddleBlocks mlir::sd::findMiddleBlocks(func::FuncOp func) {
  MiddleBlocks result;
  result.arguments.assign(func.getNumArguments(), -1);
  if (func.isExternal())
    return result;
  Block &body = func.getBody().front();
  // The chain every user of `value` (the return aside) is in a middle block
  // of, if there is one: -1 otherwise, and with no such user.
  auto chainOfUsers = [&](Value value) -> int64_t {
    std::optional<int64_t> chain;
    for (Operation *user : value.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top || top->hasTrait<OpTrait::IsTerminator>())
        continue;
      auto found = result.ops.find(top);
      if (found == result.ops.end() || (chain && *chain != found->second))
        return -1;
      chain = found->second;
    }
    return chain.value_or(-1);
  };
  // Users come after their operands' definitions: in reverse order each op
  // sees its users decided.
  for (Operation &op : llvm::reverse(body)) {
    Mark mark = markOf(op.getLoc());
    if (mark.kind != Mark::Unmarked) {
      result.marked = true;
      if (mark.kind == Mark::One && mark.block.position == kMiddleBlockPosition)
        result.ops[&op] = mark.block.chain;
      continue;
    }
    if (op.getNumResults() == 0)
      continue;
    std::optional<int64_t> chain;
    for (Value value : op.getResults()) {
      int64_t of = chainOfUsers(value);
      if (of < 0 || (chain && *chain != of)) {
        chain.reset();
        break;
      }
      chain = of;
    }
    if (chain)
      result.ops[&op] = *chain;
  }
  // What only the return reads (a new parameter's reshard to the result's
  // sharding) goes with the middle block it is made of: in program order,
  // an unmarked op whose operands a middle block made and whose users are
  // the return or such ops.
  for (Operation &op : body) {
    if (op.getNumOperands() == 0 || result.ops.count(&op) ||
        markOf(op.getLoc()).kind != Mark::Unmarked)
      continue;
    bool sink = llvm::all_of(op.getUsers(), [&](Operation *user) {
      Operation *top = body.findAncestorOpInBlock(*user);
      return top && (top->hasTrait<OpTrait::IsTerminator>() ||
                     markOf(top->getLoc()).kind == Mark::Unmarked);
    });
    if (!sink)
      continue;
    std::optional<int64_t> chain;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      auto found = def ? result.ops.find(def) : result.ops.end();
      if (found == result.ops.end() || (chain && *chain != found->second)) {
        chain.reset();
        break;
      }
      chain = found->second;
    }
    if (chain)
      result.ops[&op] = *chain;
  }
  for (BlockArgument arg : func.getArguments())
    result.arguments[arg.getArgNumber()] = chainOfUsers(arg);
  return result;
}
