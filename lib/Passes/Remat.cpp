//===- Remat.cpp - keep, offload or recompute for the backward pass -------===//
//
// The remat policy applied to a gradient function from sd-differentiate:
// each backward VJP group gets, just before its first op, what it uses of
// the forward program, as the policy says: the value itself, a reload of
// its offloaded copy, or a recomputation. The groups are walked in order
// and recomputations are post-order walks with an explicit stack; nothing
// recurses along use-def chains.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Autodiff.h"
#include "sd/Passes/Passes.h"
#include "sd/Passes/RematPolicy.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::sd {
#define GEN_PASS_DEF_REMAT
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::autodiff;

namespace {

/// A VJP group of the backward program: its number and its ops, in order.
struct VjpGroup {
  int64_t number;
  SmallVector<Operation *> ops;
};

class Rematerializer {
public:
  Rematerializer(func::FuncOp func, const RematPolicy &policy)
      : func(func), policy(policy), builder(func.getContext()) {}

  void run();

  int64_t numRecomputed = 0;
  int64_t numOffloaded = 0;

private:
  void rematGroup(const VjpGroup &group);
  Residency residency(Value value);
  Value available(Value value);
  Value offloaded(Value value);
  Operation *recompute(Operation *original, ArrayRef<Value> operands);
  /// The layer (from 1) `op` came from; 0 outside layers.
  static int64_t layerOf(Operation *op) {
    auto layer = op->getAttrOfType<IntegerAttr>(SDDialect::kLayerAttrName);
    return layer ? layer.getInt() : 0;
  }
  /// Whether `value` is computed by the forward program.
  bool isForward(Value value) const {
    Operation *def = value.getDefiningOp();
    return def && forwardOps.contains(def);
  }

  func::FuncOp func;
  const RematPolicy &policy;
  OpBuilder builder;
  ArrayAttr layerNames;
  DenseSet<Operation *> forwardOps;
  DenseMap<int64_t, Operation *> forwardOfGroup;
  /// The group being served: what is inserted joins it.
  IntegerAttr currentGroup;

  DenseMap<Value, Residency> residencies;
  DenseMap<Value, Value> availableValues;
  DenseMap<Value, Value> offloadedValues;
};

Residency Rematerializer::residency(Value value) {
  // Asked for every forward value a group uses: decided once.
  if (auto it = residencies.find(value); it != residencies.end())
    return it->second;
  Residency &decided = residencies[value];
  decided = Residency::Keep;
  Operation *def = value.getDefiningOp();
  int64_t layer = def ? layerOf(def) : 0;
  // Outside layers everything is kept, as outside jax.checkpoint.
  if (layer == 0 || !layerNames || layer > int64_t(layerNames.size()))
    return decided;
  decided =
      policy.decide(value, cast<StringAttr>(layerNames[layer - 1]).getValue());
  if (decided != Residency::Recompute)
    return decided;
  // A layer's outputs are the next layer's inputs: kept, unless offloaded.
  bool leavesLayer = llvm::any_of(value.getUsers(), [&](Operation *user) {
    return !isBackward(user) && layerOf(user) != layer;
  });
  if (leavesLayer)
    decided = Residency::Keep;
  return decided;
}

// The offload and its reloads take the location of the first forward op
// that reads the value, as a partitioned op's reshards of its operands take
// the op's: a sample block's mark (sd.sample_block) then prices a block's
// input's transfers with that block, as the program without the block
// between would move them.
Value Rematerializer::offloaded(Value value) {
  Value &copy = offloadedValues[value];
  if (!copy) {
    Operation *reader = nullptr;
    for (Operation *user : value.getUsers())
      if (forwardOps.contains(user) &&
          (!reader || (user->getBlock() == reader->getBlock() &&
                       user->isBeforeInBlock(reader))))
        reader = user;
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(value);
    copy = OffloadOp::create(builder,
                             reader ? reader->getLoc() : value.getLoc(), value);
    ++numOffloaded;
  }
  return copy;
}

/// A copy of `original` in the backward program, in the current group, on
/// `operands`, marked as a recomputation.
Operation *Rematerializer::recompute(Operation *original,
                                     ArrayRef<Value> operands) {
  IRMapping mapping;
  mapping.map(original->getOperands(), operands);
  Operation *clone = builder.clone(*original, mapping);
  clone->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
  clone->setAttr(SDDialect::kRecomputeAttrName, builder.getUnitAttr());
  clone->setAttr(SDDialect::kVjpGroupAttrName, currentGroup);
  clone->removeAttr(SDDialect::kLayerAttrName);
  ++numRecomputed;
  return clone;
}

/// What the backward pass uses for forward value `value`, created at the
/// builder's insertion point: the value, a reload, or a recomputation (a
/// post-order walk with an explicit stack over the values to recompute).
Value Rematerializer::available(Value value) {
  if (Value known = availableValues.lookup(value))
    return known;
  switch (residency(value)) {
  case Residency::Keep:
    return value;
  case Residency::Offload: {
    Value host = offloaded(value);
    Operation *reload = ReloadOp::create(builder, host.getLoc(), host);
    reload->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    reload->setAttr(SDDialect::kVjpGroupAttrName, currentGroup);
    availableValues[value] = reload->getResult(0);
    return reload->getResult(0);
  }
  case Residency::Recompute:
    break;
  }
  auto needsRecompute = [&](Value v) {
    return v.getDefiningOp() && !availableValues.contains(v) &&
           residency(v) == Residency::Recompute;
  };
  SmallVector<std::pair<Operation *, bool>> stack = {
      {value.getDefiningOp(), false}};
  while (!stack.empty()) {
    auto &[op, expanded] = stack.back();
    if (availableValues.contains(op->getResult(0))) {
      stack.pop_back();
      continue;
    }
    if (!expanded) {
      expanded = true;
      // A copy: pushing may move the stack entry `op` refers to.
      Operation *current = op;
      for (Value operand : current->getOperands())
        if (needsRecompute(operand))
          stack.push_back({operand.getDefiningOp(), false});
      continue;
    }
    Operation *original = op;
    stack.pop_back();
    auto operands = llvm::map_to_vector(original->getOperands(),
                                        [&](Value v) { return available(v); });
    Operation *clone = recompute(original, operands);
    for (auto [result, recomputed] :
         llvm::zip_equal(original->getResults(), clone->getResults()))
      availableValues[result] = recomputed;
  }
  return availableValues.lookup(value);
}

/// Makes available, before the group's first op, what the group uses: the
/// operands of its forward op (and other forward values) in order of use,
/// then the forward op's own results, recomputed by one clone of the op
/// where the policy does not keep them.
void Rematerializer::rematGroup(const VjpGroup &group) {
  currentGroup = builder.getI64IntegerAttr(group.number);
  builder.setInsertionPoint(group.ops.front());
  Operation *forward = forwardOfGroup.lookup(group.number);
  DenseSet<Operation *> members(group.ops.begin(), group.ops.end());
  auto inGroup = [&](OpOperand &use) {
    return members.contains(use.getOwner());
  };
  for (Operation *op : group.ops)
    for (OpOperand &operand : op->getOpOperands()) {
      Value value = operand.get();
      if (isForward(value) && value.getDefiningOp() != forward)
        operand.set(available(value));
    }
  if (!forward)
    return;
  SmallVector<Value> recomputed;
  for (Value result : forward->getResults()) {
    if (llvm::none_of(result.getUses(), inGroup))
      continue;
    if (residency(result) == Residency::Recompute &&
        !availableValues.contains(result)) {
      recomputed.push_back(result);
      continue;
    }
    result.replaceUsesWithIf(available(result), inGroup);
  }
  if (recomputed.empty())
    return;
  auto operands = llvm::map_to_vector(forward->getOperands(), [&](Value v) {
    return isForward(v) ? available(v) : v;
  });
  Operation *clone = recompute(forward, operands);
  for (Value result : recomputed) {
    Value copy = clone->getResult(cast<OpResult>(result).getResultNumber());
    availableValues[result] = copy;
    result.replaceUsesWithIf(copy, inGroup);
  }
}

void Rematerializer::run() {
  layerNames = func->getAttrOfType<ArrayAttr>(SDDialect::kLayersAttrName);
  // The forward ops by group, and the backward groups, read before any
  // insertion.
  SmallVector<VjpGroup> groups;
  for (Operation &op : func.getBody().front()) {
    std::optional<int64_t> number = getVjpGroup(&op);
    if (!isBackward(&op)) {
      forwardOps.insert(&op);
      if (number)
        forwardOfGroup[*number] = &op;
      continue;
    }
    if (!number)
      continue;
    if (groups.empty() || groups.back().number != *number)
      groups.push_back({*number, {}});
    groups.back().ops.push_back(&op);
  }
  for (const VjpGroup &group : groups)
    rematGroup(group);
  // The layers have served their purpose.
  func->removeAttr(SDDialect::kLayersAttrName);
  func.walk([](Operation *op) { op->removeAttr(SDDialect::kLayerAttrName); });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class RematPass : public mlir::sd::impl::RematBase<RematPass> {
public:
  using RematBase::RematBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    RematBase::getDependentDialects(registry);
    registerRematOpInterfaceModels(registry);
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Only gradient functions have a backward program.
    bool hasBackward = false;
    func.walk([&](Operation *op) {
      hasBackward |= isBackward(op) && getVjpGroup(op).has_value();
    });
    if (!hasBackward)
      return;
    FailureOr<RematPolicy> remat =
        RematPolicy::get(policy, namesSaved, namesOffloaded,
                         [&] { return emitError(func.getLoc()); });
    if (failed(remat) || failed(checkNames(func, *remat)))
      return signalPassFailure();
    Rematerializer rematerializer(func, *remat);
    rematerializer.run();
    numRecomputed = rematerializer.numRecomputed;
    numOffloaded = rematerializer.numOffloaded;
  }

private:
  /// CUSTOM's names must each name a value of the program.
  LogicalResult checkNames(func::FuncOp func, const RematPolicy &remat) {
    if (remat.getKind() != ::sd::RematPolicyKind::Custom)
      return success();
    llvm::StringSet<> present;
    func.walk([&](Operation *op) {
      if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
        present.insert(name.getValue());
    });
    for (const llvm::StringSet<> *names :
         {&remat.getSavedNames(), &remat.getOffloadedNames()})
      for (const auto &entry : *names)
        if (!present.contains(entry.getKey()))
          return emitError(func.getLoc())
                 << "remat policy CUSTOM names '" << entry.getKey()
                 << "', but no value of @" << func.getSymName()
                 << " is named so (sd.name)";
    return success();
  }
};

} // namespace
