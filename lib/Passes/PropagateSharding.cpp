//===- PropagateSharding.cpp - sharding propagation over a function -------===//
//
// The thin shell around propagation::Propagator: turns a static, call-free
// function into nodes and values, runs the fixed point, then writes each op
// result's sharding (`sd.sharding`), inserts `sd.reshard` where an operand
// disagrees with its op's rule, and optionally records and explains where
// each sharding came from.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"
#include "sd/Passes/ShardingPropagation.h"
#include "sd/Passes/ShardingRuleAnalysis.h"
#include "sd/Support/Debug.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

namespace mlir::sd {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

#define DEBUG_TYPE "sd-propagate"
#define DBGS() (llvm::dbgs() << "[" DEBUG_TYPE "] ")

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::propagation;

namespace {
constexpr StringLiteral kRerunHint =
    "run --inline and sd-specialize-batch first";

/// What the pass knows about each value of the propagation graph, besides
/// its sharding: where it lives in the IR and how to name it.
struct ValueSite {
  /// The IR value (null for a function result).
  Value value;
  /// Function argument or result index, or -1.
  int argument = -1;
  int funcResult = -1;
};

/// A node of the graph in the IR: an op, or (null) the return of a
/// function result.
struct NodeSite {
  Operation *op = nullptr;
  int funcResult = -1;
};

class ShardingPropagationDriver {
public:
  ShardingPropagationDriver(func::FuncOp func, MeshAttr mesh,
                            FlatSymbolRefAttr meshRef,
                            ShardingRuleAnalysis &rules)
      : func(func), meshAttr(mesh), meshRef(meshRef), rules(rules) {
    for (MeshAxisAttr axis : mesh.getAxes())
      meshShape.axisSizes.push_back(axis.getSize());
  }

  /// Checks the preconditions and builds the graph; fails after an error.
  LogicalResult build();
  /// Writes the shardings and inserts reshards; returns their number.
  FailureOr<int64_t> apply(const Propagator &propagator);
  void recordProvenance(const Propagator &propagator);
  /// Names values, nodes and mesh axes for debug output: values as the
  /// printed function names them (`%3`, `%arg0`), ops by their results.
  void setDebugLabels();
  /// Emits remarks on the values named `name`; false when there is none.
  bool explain(const Propagator &propagator, StringRef name);

  /// The graph build() makes, moved into the Propagator afterwards (apply
  /// and the others read it from there).
  SmallVector<ValueInfo> values;
  std::vector<Node> nodes;
  MeshShape meshShape;

private:
  FailureOr<TensorSharding> toPlain(ShardingAttr sharding,
                                    function_ref<InFlightDiagnostic()> emit);
  ShardingAttr toAttr(const TensorSharding &sharding, bool closeAll) const;
  ShardingAttr makeAttr(const TensorSharding &sharding, bool closeAll) const;
  int addValue(Value value, Type type);
  /// Makes value `id` a source of `sharding`; fails after an error through
  /// `emit` when the sharding does not fit the mesh.
  LogicalResult setSource(int id, ShardingAttr sharding,
                          function_ref<InFlightDiagnostic()> emit);
  /// Adds a function argument or result (`value` null) of `type`, a source
  /// when the function gives it a sharding.
  FailureOr<int> addBoundaryValue(Value value, Type type,
                                  ShardingAttr sharding);
  void
  setBoundaryShardings(ArrayRef<std::pair<unsigned, ShardingAttr>> args,
                       ArrayRef<std::pair<unsigned, ShardingAttr>> results);
  std::string describeSource(int value) const;
  std::string describeNode(int node) const;
  std::string describeAxes(ArrayRef<AxisId> axes) const;

  mutable func::FuncOp func;
  MeshAttr meshAttr;
  FlatSymbolRefAttr meshRef;
  SmallVector<ValueSite> sites;
  SmallVector<NodeSite> nodeSites;
  /// A number per distinct rule attribute (Node::ruleId).
  DenseMap<Attribute, int> ruleIds;
  DenseMap<Value, int> valueIds;
  /// The ops' rules, kept for sd-partition.
  ShardingRuleAnalysis &rules;
  /// toAttr's attributes, by the sharding's fields.
  mutable llvm::StringMap<ShardingAttr> attrs;
  /// The plain form of each rule attribute, made once by build().
  DenseMap<OpShardingRuleAttr, std::shared_ptr<const FactorRule>> factorRules;
};
} // namespace

//===----------------------------------------------------------------------===//
// Attributes <-> plain shardings
//===----------------------------------------------------------------------===//

FailureOr<TensorSharding>
ShardingPropagationDriver::toPlain(ShardingAttr sharding,
                                   function_ref<InFlightDiagnostic()> emit) {
  if (sharding.getMeshName() != meshRef)
    return emit() << "sharding refers to " << sharding.getMeshName()
                  << ", but propagation works on mesh " << meshRef;
  auto axisId = [&](StringAttr name) -> AxisId {
    for (auto [index, axis] : llvm::enumerate(meshAttr.getAxes()))
      if (axis.getName() == name)
        return index;
    return -1;
  };
  TensorSharding result;
  auto convert = [&](ArrayRef<StringAttr> names, AxisList &axes) {
    for (StringAttr name : names) {
      AxisId id = axisId(name);
      if (id < 0)
        return false;
      axes.push_back(id);
    }
    return true;
  };
  bool ok = true;
  for (DimShardingAttr dim : sharding.getDimShardings()) {
    DimSharding plain;
    ok &= convert(dim.getAxes(), plain.axes);
    plain.closed = dim.getIsClosed();
    plain.priority = dim.getPriority();
    result.dims.push_back(std::move(plain));
  }
  ok &= convert(sharding.getReplicatedAxes(), result.replicated);
  ok &= convert(sharding.getUnreducedAxes(), result.unreduced);
  if (!ok) // The verifier reports unknown axes; this is defensive.
    return emit() << "sharding names an axis that mesh " << meshRef
                  << " does not have";
  return result;
}

ShardingAttr ShardingPropagationDriver::toAttr(const TensorSharding &sharding,
                                               bool closeAll) const {
  // Values share few shardings: each attribute is made once, found again
  // by the sharding's fields written out as integers.
  SmallVector<int64_t, 24> key = {closeAll};
  propagation::appendKey(sharding, key);
  auto [cached, inserted] = attrs.try_emplace(propagation::keyBytes(key));
  if (!inserted)
    return cached->second;
  cached->second = makeAttr(sharding, closeAll);
  return cached->second;
}

ShardingAttr ShardingPropagationDriver::makeAttr(const TensorSharding &sharding,
                                                 bool closeAll) const {
  MLIRContext *ctx = func.getContext();
  auto names = [&](ArrayRef<AxisId> axes) {
    SmallVector<StringAttr> result;
    for (AxisId axis : axes)
      result.push_back(meshAttr.getAxes()[axis].getName());
    return result;
  };
  SmallVector<DimShardingAttr> dims;
  for (const DimSharding &dim : sharding.dims)
    dims.push_back(
        DimShardingAttr::get(ctx, names(dim.axes), closeAll || dim.closed,
                             closeAll ? std::nullopt : dim.priority));
  return ShardingAttr::get(ctx, meshRef, dims, names(sharding.replicated),
                           names(sharding.unreduced));
}

//===----------------------------------------------------------------------===//
// Building the graph
//===----------------------------------------------------------------------===//

int ShardingPropagationDriver::addValue(Value value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  int64_t bits = tensorType.getElementTypeBitWidth();
  ValueInfo info;
  info.bytes = tensorType.getNumElements() * std::max<int64_t>(bits / 8, 1);
  info.sharding = TensorSharding::open(tensorType.getRank());
  values.push_back(std::move(info));
  sites.push_back(ValueSite{value});
  if (value)
    valueIds[value] = values.size() - 1;
  return values.size() - 1;
}

LogicalResult
ShardingPropagationDriver::setSource(int id, ShardingAttr sharding,
                                     function_ref<InFlightDiagnostic()> emit) {
  FailureOr<TensorSharding> plain = toPlain(sharding, emit);
  if (failed(plain))
    return failure();
  values[id].sharding = std::move(*plain);
  values[id].isSource = true;
  return success();
}

FailureOr<int>
ShardingPropagationDriver::addBoundaryValue(Value value, Type type,
                                            ShardingAttr sharding) {
  int id = addValue(value, type);
  if (sharding &&
      failed(setSource(id, sharding, [&] { return func.emitError(); })))
    return failure();
  return id;
}

/// True for a ranked tensor type with a static shape.
static bool isStaticTensor(Type type) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  return tensorType && tensorType.hasStaticShape();
}

/// The identity rule on a tensor of `rank`: one shared factor per dimension.
static FactorRule identityRule(ArrayRef<int64_t> shape) {
  FactorRule rule;
  FactorRule::TensorMapping mapping;
  for (auto [dim, size] : llvm::enumerate(shape)) {
    rule.factorSizes.push_back(size);
    rule.factorKinds.push_back(FactorKind::PassThrough);
    mapping.push_back({static_cast<int64_t>(dim)});
  }
  rule.operands.push_back(mapping);
  rule.results.push_back(mapping);
  return rule;
}

/// A rule that shares no factor between operand and result: a reshard
/// already in the program decides its result's layout on its own.
static FactorRule barrierRule(ArrayRef<int64_t> shape) {
  FactorRule rule = identityRule(shape);
  for (SmallVector<int64_t, 2> &factors : rule.results[0]) {
    rule.factorSizes.push_back(rule.factorSizes[factors[0]]);
    rule.factorKinds.push_back(FactorKind::PassThrough);
    factors[0] = rule.factorSizes.size() - 1;
  }
  return rule;
}

LogicalResult ShardingPropagationDriver::build() {
  if (!func.getBody().hasOneBlock())
    return func.emitError("sharding propagation needs a function body of one "
                          "block");
  Block &body = func.getBody().front();
  // Reserved up front: a Node is copied, not moved, when the vector grows.
  size_t numOps = body.getOperations().size();
  size_t numResults = func.getNumResults();
  nodes.reserve(numOps + numResults);
  nodeSites.reserve(numOps + numResults);
  size_t numValues = body.getNumArguments() + numResults;
  for (Operation &op : body)
    numValues += op.getNumResults();
  values.reserve(numValues);
  sites.reserve(numValues);
  valueIds.reserve(numValues);
  for (auto [index, arg] : llvm::enumerate(body.getArguments())) {
    if (!isStaticTensor(arg.getType()))
      return func.emitError()
             << "argument #" << index << " has type " << arg.getType()
             << "; sharding propagation needs static tensor "
                "shapes ("
             << kRerunHint << ")";
    FailureOr<int> id =
        addBoundaryValue(arg, arg.getType(),
                         func.getArgAttrOfType<ShardingAttr>(
                             index, SDDialect::kShardingAttrName));
    if (failed(id))
      return failure();
    sites[*id].argument = index;
  }

  for (Operation &op : body) {
    if (isa<CallOpInterface>(op))
      return op.emitError("sharding propagation needs a program without "
                          "calls (a call that --inline leaves is to a "
                          "recursive function); ")
             << kRerunHint;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      // Each function result is a value of its own, joined to the returned
      // value by an identity node.
      for (auto [index, operand] : llvm::enumerate(ret.getOperands())) {
        if (!isStaticTensor(operand.getType()))
          return ret.emitOpError("returns a value of type ")
                 << operand.getType()
                 << "; sharding propagation needs static tensor shapes ("
                 << kRerunHint << ")";
        FailureOr<int> id =
            addBoundaryValue(Value(), operand.getType(),
                             func.getResultAttrOfType<ShardingAttr>(
                                 index, SDDialect::kShardingAttrName));
        if (failed(id))
          return failure();
        sites[*id].funcResult = index;
        Node node;
        node.rule = std::make_shared<const FactorRule>(
            identityRule(cast<RankedTensorType>(operand.getType()).getShape()));
        node.operands.push_back(valueIds.lookup(operand));
        node.results.push_back(*id);
        nodes.push_back(std::move(node));
        nodeSites.push_back(NodeSite{nullptr, static_cast<int>(index)});
      }
      continue;
    }
    for (Type type :
         llvm::concat<const Type>(op.getOperandTypes(), op.getResultTypes()))
      if (!isStaticTensor(type))
        return op.emitOpError("has type ")
               << type << "; sharding propagation needs static tensor shapes ("
               << kRerunHint << ")";
    if (op.getNumRegions() != 0)
      return op.emitOpError("has regions, which sharding propagation does "
                            "not handle");
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruleOp)
      return op.emitOpError("has no sharding rule (ShardingRuleOpInterface); "
                            "sharding propagation cannot pass through it");
    Node node;
    OpShardingRuleAttr rule;
    if (auto reshard = dyn_cast<ReshardOp>(op)) {
      node.rule = std::make_shared<const FactorRule>(
          barrierRule(reshard.getType().getShape()));
    } else {
      rule = rules.getRule(ruleOp);
      if (!rule)
        return failure();
      // Ops share rules (those of elementwise ops of one shape are the
      // same attribute): each is converted once.
      auto [cached, inserted] = factorRules.try_emplace(rule);
      if (inserted)
        cached->second =
            std::make_shared<const FactorRule>(FactorRule::fromAttr(rule));
      node.rule = cached->second;
    }
    for (Value operand : op.getOperands())
      node.operands.push_back(valueIds.lookup(operand));
    // Annotated results: an existing per-value sharding, a constraint's or
    // a reshard's sharding.
    auto perValue =
        op.getAttrOfType<ShardingPerValueAttr>(SDDialect::kShardingAttrName);
    for (OpResult result : op.getResults()) {
      int id = addValue(result, result.getType());
      node.results.push_back(id);
      ShardingAttr sharding;
      if (auto constraint = dyn_cast<ShardingConstraintOp>(op)) {
        sharding = constraint.getShardingAttr();
        if (!sharding)
          return op.emitOpError("has logical axes but no sharding; run "
                                "sd-apply-logical-rules first");
      } else if (auto reshard = dyn_cast<ReshardOp>(op)) {
        sharding = reshard.getSharding();
      } else if (perValue) {
        sharding = perValue.getShardings()[result.getResultNumber()];
      }
      if (sharding &&
          failed(setSource(id, sharding, [&] { return op.emitOpError(); })))
        return failure();
    }
    if (rule)
      node.ruleId = ruleIds.try_emplace(rule, static_cast<int>(ruleIds.size()))
                        .first->second;
    nodes.push_back(std::move(node));
    nodeSites.push_back(NodeSite{&op});
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Writing the result back
//===----------------------------------------------------------------------===//

FailureOr<int64_t>
ShardingPropagationDriver::apply(const Propagator &propagator) {
  // The graph moved into the propagator.
  ArrayRef<ValueInfo> values = propagator.getValues();
  ArrayRef<Node> nodes = propagator.getNodes();
  SmallVector<ReshardOp> created;
  // Reshards of one value to one sharding are shared by later ops (all in
  // one block, in order, so the first dominates the others) of the same
  // pass: the backward pass makes its own, so that under FSDP a parameter
  // is gathered again for backward instead of being kept gathered from the
  // forward pass (ZeRO-3, PyTorch FSDP's reshard_after_forward).
  DenseMap<std::tuple<Value, Attribute, int>, Value> reshards;
  OpBuilder builder(func.getContext());
  // Made once: setAttr by a string makes the name's attribute per call.
  auto shardingName =
      StringAttr::get(func.getContext(), SDDialect::kShardingAttrName);
  // `node` and `value` name the user and the operand in debug output.
  auto reshardBefore = [&](int node, int value, Operation *user,
                           OpOperand &operand,
                           const TensorSharding &required) -> LogicalResult {
    if (!isa<FloatType>(getElementTypeOrSelf(operand.get().getType())))
      return user->emitOpError("needs operand #")
             << operand.getOperandNumber() << " resharded, but "
             << operand.get().getType() << " cannot be resharded";
    ShardingAttr sharding = toAttr(required, /*closeAll=*/true);
    bool backward = user->hasAttr(SDDialect::kBackwardAttrName);
    Value &reshard = reshards[{operand.get(), sharding, backward ? 1 : 0}];
    if (!reshard) {
      builder.setInsertionPoint(user);
      auto op =
          ReshardOp::create(builder, user->getLoc(), operand.get(), sharding);
      if (backward)
        op->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
      op->setAttr(SDDialect::kShardingAttrName,
                  ShardingPerValueAttr::get(func.getContext(), {sharding}));
      reshard = op.getResult();
      created.push_back(op);
      LLVM_DEBUG(DBGS() << "reshard " << values[value].label << " for operand #"
                        << operand.getOperandNumber() << " of "
                        << nodes[node].label << " to " << sharding << "\n");
    }
    operand.set(reshard);
    return success();
  };

  // The function's results that get a sharding; set together at the end.
  SmallVector<std::pair<unsigned, ShardingAttr>> resultShardings;
  for (auto [n, site] : llvm::enumerate(nodeSites)) {
    NodeLayout layout = propagator.getConsistentLayout(n);
    const Node &node = nodes[n];
    Operation *op = site.op;
    if (!op) {
      // A function result: the returned value must have its sharding.
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      OpOperand &operand = ret->getOpOperand(site.funcResult);
      if (!propagator.getSharding(node.operands[0])
               .sameLayout(layout.operands[0]) &&
          failed(reshardBefore(n, node.operands[0], ret, operand,
                               layout.operands[0])))
        return failure();
      const TensorSharding &sharding = propagator.getSharding(node.results[0]);
      if (values[node.results[0]].isSource ||
          !toAttr(sharding, false).isFullyReplicated() ||
          !sharding.unreduced.empty())
        resultShardings.emplace_back(site.funcResult,
                                     toAttr(sharding, /*closeAll=*/false));
      continue;
    }
    // A reshard already in the program takes any operand, partial sums
    // included, and produces its own sharding.
    if (auto reshard = dyn_cast<ReshardOp>(op)) {
      reshard->setAttr(SDDialect::kShardingAttrName,
                       ShardingPerValueAttr::get(func.getContext(),
                                                 {reshard.getSharding()}));
      continue;
    }
    for (auto [index, value] : llvm::enumerate(node.operands))
      if (!propagator.getSharding(value).sameLayout(layout.operands[index]) &&
          failed(reshardBefore(n, value, op, op->getOpOperand(index),
                               layout.operands[index])))
        return failure();
    SmallVector<ShardingAttr> produced;
    for (auto [index, value] : llvm::enumerate(node.results)) {
      const TensorSharding &sharding = propagator.getSharding(value);
      if (sharding.sameLayout(layout.results[index])) {
        produced.push_back(toAttr(sharding, /*closeAll=*/false));
        continue;
      }
      // The op cannot produce what its users were given: it produces what
      // its rule allows, and a reshard after it makes the rest.
      produced.push_back(toAttr(layout.results[index], /*closeAll=*/false));
      OpResult result = op->getResult(index);
      if (!isa<FloatType>(getElementTypeOrSelf(result.getType())))
        return op->emitOpError("needs result #")
               << index << " resharded, but " << result.getType()
               << " cannot be resharded";
      builder.setInsertionPointAfter(op);
      ShardingAttr target = toAttr(sharding, /*closeAll=*/true);
      auto reshard = ReshardOp::create(builder, op->getLoc(), result, target);
      // It belongs to its producer's pass (a gradient's reduction).
      if (op->hasAttr(SDDialect::kBackwardAttrName))
        reshard->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
      reshard->setAttr(SDDialect::kShardingAttrName,
                       ShardingPerValueAttr::get(func.getContext(), {target}));
      result.replaceAllUsesExcept(reshard.getResult(), reshard);
      created.push_back(reshard);
      LLVM_DEBUG(DBGS() << "reshard " << values[value].label << " after "
                        << nodes[n].label << " from "
                        << toAttr(layout.results[index], /*closeAll=*/true)
                        << " to " << target << "\n");
    }
    op->setAttr(shardingName,
                ShardingPerValueAttr::get(func.getContext(), produced));
  }

  // A reshard after an op that only feeds a reshard before another op is
  // folded into it: one layout change instead of two.
  llvm::SmallPtrSet<Operation *, 16> live;
  for (ReshardOp op : created)
    live.insert(op);
  for (ReshardOp op : created) {
    auto producer = op.getInput().getDefiningOp<ReshardOp>();
    if (!producer || !live.contains(producer) || !producer->hasOneUse())
      continue;
    op.getInputMutable().assign(producer.getInput());
    live.erase(producer);
    producer->erase();
  }
  int64_t numReshards = live.size();

  // Arguments keep their annotations; unannotated ones that gained axes
  // record them.
  SmallVector<std::pair<unsigned, ShardingAttr>> argShardings;
  for (auto [id, site] : llvm::enumerate(sites)) {
    if (site.argument < 0)
      continue;
    const TensorSharding &sharding = propagator.getSharding(id);
    ShardingAttr attr = toAttr(sharding, /*closeAll=*/false);
    if (values[id].isSource || !attr.isFullyReplicated())
      argShardings.emplace_back(site.argument, attr);
  }
  setBoundaryShardings(argShardings, resultShardings);
  return numReshards;
}

/// Sets the sharding attribute of the given arguments and results, each
/// array of attribute dictionaries rebuilt once: setArgAttr per argument
/// would rebuild the whole array each time, quadratic in their count.
void ShardingPropagationDriver::setBoundaryShardings(
    ArrayRef<std::pair<unsigned, ShardingAttr>> args,
    ArrayRef<std::pair<unsigned, ShardingAttr>> results) {
  MLIRContext *context = func.getContext();
  auto update = [&](ArrayRef<std::pair<unsigned, ShardingAttr>> shardings,
                    ArrayRef<DictionaryAttr> old, auto setAll) {
    if (shardings.empty())
      return;
    SmallVector<NamedAttrList> attrs(old.begin(), old.end());
    for (auto [index, sharding] : shardings)
      attrs[index].set(SDDialect::kShardingAttrName, sharding);
    setAll(llvm::map_to_vector(attrs, [&](const NamedAttrList &list) {
      return list.getDictionary(context);
    }));
  };
  SmallVector<DictionaryAttr> oldArgs, oldResults;
  func.getAllArgAttrs(oldArgs);
  func.getAllResultAttrs(oldResults);
  update(args, oldArgs,
         [&](ArrayRef<DictionaryAttr> dicts) { func.setAllArgAttrs(dicts); });
  update(results, oldResults, [&](ArrayRef<DictionaryAttr> dicts) {
    func.setAllResultAttrs(dicts);
  });
}

//===----------------------------------------------------------------------===//
// Debug output
//===----------------------------------------------------------------------===//

void ShardingPropagationDriver::setDebugLabels() {
  AsmState state(func);
  auto print = [&](Value value) {
    std::string text;
    llvm::raw_string_ostream os(text);
    value.printAsOperand(os, state);
    return text;
  };
  for (auto [id, site] : llvm::enumerate(sites))
    values[id].label = site.value
                           ? print(site.value)
                           : "result #" + std::to_string(site.funcResult) +
                                 " of @" + func.getSymName().str();
  for (auto [n, site] : llvm::enumerate(nodeSites)) {
    if (!site.op) {
      nodes[n].label = "return #" + std::to_string(site.funcResult) + " of @" +
                       func.getSymName().str();
      continue;
    }
    std::string label;
    for (auto [i, result] : llvm::enumerate(site.op->getResults()))
      label += (i ? ", " : "") + print(result);
    label += " = " + site.op->getName().getStringRef().str();
    if (auto name =
            site.op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
      label += " \"" + name.str() + "\"";
    nodes[n].label = std::move(label);
  }
  for (MeshAxisAttr axis : meshAttr.getAxes())
    meshShape.axisNames.push_back(axis.getName().str());
}

//===----------------------------------------------------------------------===//
// Provenance
//===----------------------------------------------------------------------===//

/// `model.mlir:120` for a location with a file, else empty.
static std::string describeLoc(Location loc) {
  auto fileLoc = loc->findInstanceOf<FileLineColLoc>();
  if (!fileLoc)
    return "";
  return (llvm::sys::path::filename(fileLoc.getFilename().getValue()) + ":" +
          Twine(fileLoc.getLine()))
      .str();
}

/// `<what> at <loc>`, or just `<what>` without a file location.
static std::string withLoc(std::string what, Location loc) {
  std::string at = describeLoc(loc);
  return at.empty() ? what : what + " at " + at;
}

std::string
ShardingPropagationDriver::describeAxes(ArrayRef<AxisId> axes) const {
  std::string text;
  for (auto [i, axis] : llvm::enumerate(axes))
    text += (i ? "," : "") + meshAttr.getAxes()[axis].getName().str();
  return text;
}

std::string ShardingPropagationDriver::describeSource(int value) const {
  const ValueSite &site = sites[value];
  if (site.argument >= 0) {
    Attribute role = func.getArgAttr(site.argument, SDDialect::kRoleAttrName);
    if (auto param = dyn_cast_or_null<ParamAttr>(role))
      return "parameter " + param.getName().str();
    if (auto input = dyn_cast_or_null<InputAttr>(role))
      return "input " + stringifyInputKind(input.getKind()).str();
    return "argument #" + std::to_string(site.argument);
  }
  if (site.funcResult >= 0)
    return "result #" + std::to_string(site.funcResult) + " of @" +
           func.getSymName().str();
  Operation *op = site.value.getDefiningOp();
  std::string what = op->getName().getStringRef().str();
  if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
    what += " \"" + name.str() + "\"";
  return withLoc(what, op->getLoc());
}

std::string ShardingPropagationDriver::describeNode(int node) const {
  const NodeSite &site = nodeSites[node];
  if (!site.op)
    return "the return of @" + func.getSymName().str();
  return withLoc(site.op->getName().getStringRef().str(), site.op->getLoc());
}

void ShardingPropagationDriver::recordProvenance(const Propagator &propagator) {
  ArrayRef<Node> nodes = propagator.getNodes();
  for (auto [n, site] : llvm::enumerate(nodeSites)) {
    if (!site.op)
      continue;
    SmallVector<Attribute> lines;
    const Node &node = nodes[n];
    for (auto [index, value] : llvm::enumerate(node.results)) {
      std::string prefix = node.results.size() > 1
                               ? "result #" + std::to_string(index) + ": "
                               : "";
      const TensorSharding &sharding = propagator.getSharding(value);
      for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
        if (dimSharding.axes.empty())
          continue;
        Provenance from = propagator.getProvenance(value, dim);
        std::string line = prefix + describeAxes(dimSharding.axes) +
                           " on dim " + std::to_string(dim);
        if (from.source >= 0)
          line += " from " + describeSource(from.source);
        if (from.node >= 0)
          line += " via " + describeNode(from.node);
        lines.push_back(StringAttr::get(func.getContext(), line));
      }
      if (!sharding.unreduced.empty())
        lines.push_back(StringAttr::get(func.getContext(),
                                        prefix + "partial sum over " +
                                            describeAxes(sharding.unreduced)));
    }
    if (!lines.empty())
      site.op->setAttr(SDDialect::kProvenanceAttrName,
                       ArrayAttr::get(func.getContext(), lines));
  }
}

bool ShardingPropagationDriver::explain(const Propagator &propagator,
                                        StringRef name) {
  bool found = false;
  for (auto [id, site] : llvm::enumerate(sites)) {
    Location loc = func.getLoc();
    bool matches = false;
    if (site.argument >= 0) {
      loc = func.getArgument(site.argument).getLoc();
      Attribute role = func.getArgAttr(site.argument, SDDialect::kRoleAttrName);
      if (auto param = dyn_cast_or_null<ParamAttr>(role))
        matches = param.getName() == name;
      else if (auto input = dyn_cast_or_null<InputAttr>(role))
        matches = stringifyInputKind(input.getKind()) == name;
    } else if (site.value) {
      Operation *op = site.value.getDefiningOp();
      loc = op->getLoc();
      auto named = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName);
      matches = named && named.getValue() == name;
    }
    if (!matches)
      continue;
    found = true;
    const TensorSharding &sharding = propagator.getSharding(id);
    InFlightDiagnostic remark = emitRemark(loc);
    remark << "'" << name << "' is sharded "
           << toAttr(sharding, /*closeAll=*/false);
    for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
      if (dimSharding.axes.empty())
        continue;
      remark << "; dim " << dim << " (" << describeAxes(dimSharding.axes)
             << ")";
      // Follow the chain back to its annotation; a chain never needs more
      // hops than there are values.
      int value = id, d = dim;
      for (size_t hop = 0; hop <= propagator.getValues().size(); ++hop) {
        Provenance from = propagator.getProvenance(value, d);
        if (from.node < 0) {
          remark << (from.source >= 0 ? " from " + describeSource(from.source)
                                      : std::string(" from its annotation"));
          break;
        }
        remark << " via " << describeNode(from.node);
        value = from.fromValue;
        d = from.fromDim;
      }
    }
    if (!sharding.unreduced.empty())
      remark << "; partial sum over " << describeAxes(sharding.unreduced);
  }
  return found;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct PropagateShardingPass
    : public mlir::sd::impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    auto meshRef = FlatSymbolRefAttr::get(&getContext(), meshName);
    auto meshOp = SymbolTable::lookupNearestSymbolFrom<MeshOp>(func, meshRef);
    if (!meshOp) {
      func.emitError() << "no sd.mesh @" << meshName
                       << " to propagate shardings over; pass --mesh or run "
                          "sd-materialize-mesh";
      return signalPassFailure();
    }
    ShardingPropagationDriver driver(func, meshOp.getMesh(), meshRef,
                                     getAnalysis<ShardingRuleAnalysis>());
    if (failed(driver.build()))
      return signalPassFailure();
    LLVM_DEBUG({
      DBGS() << "propagating over @" << func.getSymName() << "\n";
      driver.setDebugLabels();
    });
    llvm::DenseSet<uint64_t> queries;
    if (recordSizeQueries)
      driver.meshShape.queries = &queries;
    Propagator propagator(driver.meshShape, std::move(driver.values),
                          std::move(driver.nodes),
                          recordProvenance || !explain.empty());
    propagator.run();
    numVisits += propagator.getNumVisits();
    if (!explain.empty() && !driver.explain(propagator, explain))
      emitWarning(func.getLoc()) << "no value named '" << explain
                                 << "' to explain in @" << func.getSymName();
    FailureOr<int64_t> reshards = driver.apply(propagator);
    if (failed(reshards))
      return signalPassFailure();
    numReshards += *reshards;
    if (recordProvenance)
      driver.recordProvenance(propagator);
    if (recordSizeQueries) {
      SmallVector<int64_t> sorted(queries.begin(), queries.end());
      llvm::sort(sorted);
      func->setAttr(SDDialect::kSizeQueriesAttrName,
                    DenseI64ArrayAttr::get(&getContext(), sorted));
    }
    // Ops only gained shardings and operands of their types (reshards):
    // their rules hold.
    markAnalysesPreserved<ShardingRuleAnalysis>();
  }
};
} // namespace
