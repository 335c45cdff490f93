//===- Partition.cpp - global program to per-device program ---------------===//
//
// The shell of sd-partition: gives every value of a propagated function its
// local type, lets each op build its local form (PartitionOpInterface) after
// checking that its shardings agree with its sharding rule, and turns
// reshards (and returned values whose layout differs from the result's)
// into the collectives the reshard planner chooses.
//
//===----------------------------------------------------------------------===//

#include "PartitionHelpers.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/PartitionModels.h"
#include "sd/Passes/Passes.h"
#include "sd/Passes/ReshardPlanner.h"
#include "sd/Passes/ShardingPropagation.h"
#include "sd/Passes/ShardingRuleAnalysis.h"
#include "sd/Sharding/Mesh.h"
#include "sd/Support/Debug.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <map>
#include <unordered_map>

namespace mlir::sd {
#define GEN_PASS_DEF_PARTITION
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

#define DEBUG_TYPE "sd-partition"
#define DBGS() (llvm::dbgs() << "[" DEBUG_TYPE "] ")

using namespace mlir;
using namespace mlir::sd;

/// Names an op class as a value, for generic lambdas.
template <typename OpTy> struct OpKind {
  using type = OpTy;
};

namespace {
constexpr StringLiteral kRerunHint =
    "run --inline, sd-specialize-batch and sd-propagate-sharding first";

class FunctionPartitioner {
public:
  FunctionPartitioner(func::FuncOp func, ShardingRuleAnalysis &ruleAnalysis)
      : func(func), ruleAnalysis(ruleAnalysis) {}

  /// Partitions the function; fails after an error.
  LogicalResult run();
  int64_t getNumCollectives() const { return numCollectives; }

private:
  LogicalResult findMesh();
  LogicalResult checkProgram();
  /// The sharding of a value of rank `rank` as annotated, or replicated.
  ShardingAttr orReplicated(ShardingAttr sharding, int64_t rank) const;
  /// The plain forms of `sharding`, each made once per attribute (values
  /// share a few shardings; partitioning asks for them per op).
  const reshard::Layout &toLayout(ShardingAttr sharding) const;
  const propagation::TensorSharding &toPlain(ShardingAttr sharding) const;
  /// The local type of a `global` value laid out as `sharding` (a dimension
  /// the devices do not divide padded, sd::blockExtent); an error naming
  /// `what()` when the sharding names an axis the mesh lacks. (Descriptions
  /// are made only for errors: partitioning visits every value.)
  FailureOr<RankedTensorType> localType(RankedTensorType global,
                                        ShardingAttr sharding,
                                        function_ref<std::string()> what,
                                        Location loc) const;
  RankedTensorType localType(RankedTensorType global,
                             const reshard::Layout &layout) const;
  /// Collectives that turn `value` (local, a block of a `global` tensor) from
  /// layout `from` to layout `to`.
  FailureOr<Value> reshardValue(OpBuilder &builder, Location loc, Value value,
                                RankedTensorType global, ShardingAttr from,
                                ShardingAttr to,
                                function_ref<std::string()> what);
  /// The reshard planner's collectives from `source` to `target`, layouts
  /// whose padded dimensions (if any) they share.
  FailureOr<Value> planReshard(OpBuilder &builder, Location loc, Value value,
                               RankedTensorType global,
                               const reshard::Layout &source,
                               const reshard::Layout &target, ShardingAttr from,
                               ShardingAttr to,
                               function_ref<std::string()> what);
  /// True when dimension `dim` of `global` laid out as `layout` is padded.
  bool isPadded(RankedTensorType global, const reshard::Layout &layout,
                int64_t dim) const {
    return global.getDimSize(dim) % meshShape.product(layout.dims[dim]) != 0;
  }
  /// Zeroes the padding that `op` would sum: the padded dimensions of its
  /// operands that hold a sharded reduction factor.
  LogicalResult maskReducedPadding(Operation *op, OpBuilder &builder,
                                   MutableArrayRef<Value> localOperands,
                                   ArrayRef<ShardingAttr> operandShardings);
  /// Checks that `op`'s shardings agree with its sharding rule.
  LogicalResult checkRule(Operation *op, ArrayRef<ShardingAttr> operands,
                          ArrayRef<ShardingAttr> results) const;
  LogicalResult partitionOp(Operation *op);
  std::string describe(Value value) const;

  /// Mutable: const queries of an op handle are not const methods.
  mutable func::FuncOp func;
  FlatSymbolRefAttr meshRef;
  MeshAttr mesh;
  propagation::MeshShape meshShape;
  /// Global value -> its local value and its layout.
  DenseMap<Value, Value> locals;
  DenseMap<Value, ShardingAttr> shardings;
  /// The local types of the arguments.
  SmallVector<Type> localArgs;
  /// Each op's sharding rule, taken while its operands are still global
  /// (from sd-propagate-sharding where it ran just before).
  ShardingRuleAnalysis &ruleAnalysis;
  DenseMap<Operation *, OpShardingRuleAttr> rules;
  /// Node-based: a reference stays valid while more are made.
  mutable std::unordered_map<const void *, reshard::Layout> layouts;
  mutable std::unordered_map<const void *, propagation::TensorSharding> plains;
  /// The plain form of each rule, made by checkRule.
  mutable DenseMap<OpShardingRuleAttr, propagation::FactorRule> factorRules;
  /// The reshard planner's plans, by padded shape, element bytes and
  /// layouts (planReshard).
  struct PlannedReshard {
    FailureOr<reshard::ReshardPlan> plan = failure();
    std::string error;
  };
  std::map<SmallVector<int64_t>, PlannedReshard> plans;
  int64_t numCollectives = 0;
  /// The elements the ops compute per device, and (on average over the
  /// devices) how many are padding.
  double computedElements = 0, paddedElements = 0;
};
} // namespace

//===----------------------------------------------------------------------===//
// Shardings and layouts
//===----------------------------------------------------------------------===//

LogicalResult FunctionPartitioner::findMesh() {
  auto consider = [&](ShardingAttr sharding, Operation *at) -> LogicalResult {
    if (!sharding)
      return success();
    if (!meshRef) {
      meshRef = sharding.getMeshName();
      return success();
    }
    if (sharding.getMeshName() == meshRef)
      return success();
    return at->emitError("sd-partition works on one mesh, but the function "
                         "uses ")
           << meshRef << " and " << sharding.getMeshName();
  };
  StringRef key = SDDialect::kShardingAttrName;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (failed(consider(func.getArgAttrOfType<ShardingAttr>(i, key), func)))
      return failure();
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (failed(consider(func.getResultAttrOfType<ShardingAttr>(i, key), func)))
      return failure();
  for (Operation &op : func.getBody().front()) {
    if (auto perValue = op.getAttrOfType<ShardingPerValueAttr>(key))
      for (ShardingAttr sharding : perValue.getShardings())
        if (failed(consider(sharding, &op)))
          return failure();
    if (auto reshard = dyn_cast<ReshardOp>(op))
      if (failed(consider(reshard.getSharding(), &op)))
        return failure();
  }
  if (!meshRef)
    return success();
  mesh = lookupMesh(func, meshRef, [&] { return func.emitError(); });
  if (!mesh)
    return failure();
  for (MeshAxisAttr axis : mesh.getAxes())
    meshShape.axisSizes.push_back(axis.getSize());
  return success();
}

ShardingAttr FunctionPartitioner::orReplicated(ShardingAttr sharding,
                                               int64_t rank) const {
  if (sharding)
    return sharding;
  MLIRContext *ctx = func.getContext();
  SmallVector<DimShardingAttr> dims(
      rank, DimShardingAttr::get(ctx, {}, /*is_closed=*/true, std::nullopt));
  return ShardingAttr::get(ctx, meshRef, dims);
}

const reshard::Layout &
FunctionPartitioner::toLayout(ShardingAttr sharding) const {
  auto [it, inserted] = layouts.try_emplace(sharding.getAsOpaquePointer());
  if (!inserted)
    return it->second;
  const propagation::TensorSharding &plain = toPlain(sharding);
  reshard::Layout &layout = it->second;
  for (const propagation::DimSharding &dim : plain.dims)
    layout.dims.emplace_back(dim.axes.begin(), dim.axes.end());
  layout.unreduced.assign(plain.unreduced.begin(), plain.unreduced.end());
  llvm::sort(layout.unreduced);
  return layout;
}

const propagation::TensorSharding &
FunctionPartitioner::toPlain(ShardingAttr sharding) const {
  auto [it, inserted] = plains.try_emplace(sharding.getAsOpaquePointer());
  if (!inserted)
    return it->second;
  auto ids = [&](ArrayRef<StringAttr> names) {
    propagation::AxisList axes;
    for (StringAttr name : names)
      for (auto [index, axis] : llvm::enumerate(mesh.getAxes()))
        if (axis.getName() == name)
          axes.push_back(index);
    return axes;
  };
  propagation::TensorSharding &plain = it->second;
  for (DimShardingAttr dim : sharding.getDimShardings())
    plain.dims.push_back({ids(dim.getAxes()), true, std::nullopt});
  plain.replicated = ids(sharding.getReplicatedAxes());
  plain.unreduced = ids(sharding.getUnreducedAxes());
  return plain;
}

FailureOr<RankedTensorType>
FunctionPartitioner::localType(RankedTensorType global, ShardingAttr sharding,
                               function_ref<std::string()> what,
                               Location loc) const {
  SmallVector<int64_t> shape(global.getShape());
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings())) {
    int64_t product = 1;
    for (StringAttr name : dimSharding.getAxes()) {
      MeshAxisAttr axis = mesh.getAxis(name);
      if (!axis)
        return emitError(loc)
               << "the sharding of " << what() << " names mesh axis " << name
               << ", which " << meshRef << " does not have";
      product *= axis.getSize();
    }
    shape[dim] = ::sd::blockExtent(shape[dim], product);
  }
  return global.clone(shape);
}

RankedTensorType
FunctionPartitioner::localType(RankedTensorType global,
                               const reshard::Layout &layout) const {
  SmallVector<int64_t> shape(global.getShape());
  for (auto [dim, axes] : llvm::enumerate(layout.dims))
    shape[dim] = ::sd::blockExtent(shape[dim], meshShape.product(axes));
  return global.clone(shape);
}

std::string FunctionPartitioner::describe(Value value) const {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    std::string text = "argument #" + std::to_string(arg.getArgNumber());
    if (auto param = func.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                      SDDialect::kRoleAttrName))
      text += " (\"" + param.getName().str() + "\")";
    return text;
  }
  auto result = cast<OpResult>(value);
  Operation *op = result.getOwner();
  std::string text = "result #" + std::to_string(result.getResultNumber()) +
                     " of " + op->getName().getStringRef().str();
  if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
    text += " \"" + name.str() + "\"";
  return text;
}

//===----------------------------------------------------------------------===//
// Reshards
//===----------------------------------------------------------------------===//

/// `[{"data"}, {}]`: per-dimension axes for the collectives.
static ArrayAttr dimAxesAttr(MLIRContext *ctx, MeshAttr mesh,
                             ArrayRef<reshard::AxisList> dims) {
  SmallVector<Attribute> result;
  for (const reshard::AxisList &axes : dims) {
    SmallVector<Attribute> names;
    for (reshard::AxisId axis : axes)
      names.push_back(mesh.getAxes()[axis].getName());
    result.push_back(ArrayAttr::get(ctx, names));
  }
  return ArrayAttr::get(ctx, result);
}

static ArrayAttr axesAttr(MLIRContext *ctx, MeshAttr mesh,
                          ArrayRef<reshard::AxisId> axes) {
  SmallVector<Attribute> names;
  for (reshard::AxisId axis : axes)
    names.push_back(mesh.getAxes()[axis].getName());
  return ArrayAttr::get(ctx, names);
}

FailureOr<Value> FunctionPartitioner::reshardValue(
    OpBuilder &builder, Location loc, Value value, RankedTensorType global,
    ShardingAttr from, ShardingAttr to, function_ref<std::string()> what) {
  reshard::Layout source = toLayout(from), target = toLayout(to);
  if (source == target)
    return value;
  if (!isa<FloatType>(global.getElementType()))
    return emitError(loc) << "cannot reshard " << what() << " of type "
                          << global
                          << ": collectives move f32 and bf16 tensors only";
  // A padded dimension whose layout changes goes through whole: gathered
  // and cut to its size, resharded with the others, then padded and sliced.
  // (The planner's collectives move blocks of equal size.)
  MLIRContext *ctx = func.getContext();
  SmallVector<int64_t> throughWhole;
  for (int64_t dim = 0; dim < global.getRank(); ++dim)
    if (source.dims[dim] != target.dims[dim] &&
        (isPadded(global, source, dim) || isPadded(global, target, dim)))
      throughWhole.push_back(dim);
  for (int64_t dim : throughWhole) {
    if (source.dims[dim].empty())
      continue;
    SmallVector<reshard::AxisList> dimAxes(global.getRank());
    dimAxes[dim] = source.dims[dim];
    RankedTensorType block = localType(global, source);
    SmallVector<int64_t> shape(block.getShape());
    shape[dim] *= meshShape.product(source.dims[dim]);
    value = AllGatherOp::create(builder, loc, block.clone(shape), value,
                                meshRef, dimAxesAttr(ctx, mesh, dimAxes));
    ++numCollectives;
    SmallVector<int64_t> start(shape.size(), 0), limit(shape),
        strides(shape.size(), 1);
    limit[dim] = shape[dim] = global.getDimSize(dim);
    value = SliceOp::create(builder, loc, block.clone(shape), value, start,
                            limit, strides);
    source.dims[dim].clear();
  }
  reshard::Layout middle = target;
  for (int64_t dim : throughWhole)
    middle.dims[dim].clear();
  FailureOr<Value> moved =
      planReshard(builder, loc, value, global, source, middle, from, to, what);
  if (failed(moved))
    return failure();
  value = *moved;
  for (int64_t dim : throughWhole) {
    if (target.dims[dim].empty())
      continue;
    RankedTensorType whole = localType(global, middle);
    int64_t shards = meshShape.product(target.dims[dim]);
    int64_t extent = ::sd::blockExtent(global.getDimSize(dim), shards);
    SmallVector<int64_t> lows(global.getRank(), 0), highs(global.getRank(), 0);
    highs[dim] = extent * shards - global.getDimSize(dim);
    if (highs[dim] != 0)
      value = PadOp::create(builder, loc, value, lows, highs, APFloat(0.0));
    SmallVector<reshard::AxisList> dimAxes(global.getRank());
    dimAxes[dim] = target.dims[dim];
    middle.dims[dim] = target.dims[dim];
    SmallVector<int64_t> shape(whole.getShape());
    shape[dim] = extent;
    value = AllSliceOp::create(builder, loc, whole.clone(shape), value, meshRef,
                               dimAxesAttr(ctx, mesh, dimAxes));
    ++numCollectives;
  }
  return value;
}

FailureOr<Value> FunctionPartitioner::planReshard(
    OpBuilder &builder, Location loc, Value value, RankedTensorType global,
    const reshard::Layout &source, const reshard::Layout &target,
    ShardingAttr from, ShardingAttr to, function_ref<std::string()> what) {
  if (source == target)
    return value;
  // The padded dimensions that keep their layout are moved as they are: the
  // planner sees their padded sizes, which the axes divide.
  SmallVector<int64_t> padded(global.getShape());
  for (int64_t dim = 0; dim < global.getRank(); ++dim) {
    int64_t shards = meshShape.product(source.dims[dim]);
    padded[dim] = ::sd::blockExtent(padded[dim], shards) * shards;
  }
  global = global.clone(padded);
  reshard::ReshardProblem problem;
  problem.shape.assign(global.getShape().begin(), global.getShape().end());
  problem.elementBytes =
      std::max<int64_t>(global.getElementTypeBitWidth() / 8, 1);
  problem.axisSizes = meshShape.axisSizes;
  problem.source = source;
  problem.target = target;
  // sd.collective_permute names its source/target pairs, so any permutation
  // of blocks the planner finds can be expressed.
  problem.allowPermute = true;
  // For debug output (sd-partition's and the planner's sd-reshard).
  for (MeshAxisAttr axis : mesh.getAxes())
    problem.axisNames.push_back(axis.getName().str());
  // Planned once per shape and layouts: a program reshards the same
  // tensors alike in every block.
  SmallVector<int64_t> key(problem.shape);
  key.push_back(problem.elementBytes);
  for (const reshard::Layout *layout : {&source, &target}) {
    for (const reshard::AxisList &axes : layout->dims) {
      key.push_back(-1);
      key.append(axes.begin(), axes.end());
    }
    key.push_back(-2);
    key.append(layout->unreduced.begin(), layout->unreduced.end());
  }
  auto [cached, inserted] = plans.try_emplace(key);
  if (inserted)
    cached->second.plan = reshard::planReshard(problem, &cached->second.error);
  if (failed(cached->second.plan))
    return emitError(loc) << "cannot reshard " << what() << " from " << from
                          << " to " << to << ": " << cached->second.error;
  const reshard::ReshardPlan *plan = &*cached->second.plan;
  LLVM_DEBUG(DBGS() << "reshard " << what() << " from " << from << " to " << to
                    << ": " << reshard::toString(*plan, problem.axisNames)
                    << "\n");
  MLIRContext *ctx = func.getContext();
  reshard::Layout layout = problem.source;
  for (const reshard::Step &step : plan->steps) {
    reshard::Layout previous = layout;
    layout = *reshard::applyStep(layout, step);
    RankedTensorType type = localType(global, layout);
    // The collectives whose axes are listed per dimension.
    auto perDimension = [&](auto op) -> Value {
      return decltype(op)::type::create(builder, loc, type, value, meshRef,
                                        dimAxesAttr(ctx, mesh, step.dimAxes));
    };
    switch (step.kind) {
    case reshard::StepKind::AllGather:
      value = perDimension(OpKind<AllGatherOp>());
      break;
    case reshard::StepKind::AllSlice:
      value = perDimension(OpKind<AllSliceOp>());
      break;
    case reshard::StepKind::ReduceScatter:
      value = perDimension(OpKind<ReduceScatterOp>());
      break;
    case reshard::StepKind::AllReduce:
      value = AllReduceOp::create(builder, loc, type, value, meshRef,
                                  axesAttr(ctx, mesh, step.axes));
      break;
    case reshard::StepKind::AllToAll:
      value = AllToAllOp::create(builder, loc, type, value, meshRef,
                                 axesAttr(ctx, mesh, step.axes),
                                 builder.getI64IntegerAttr(step.srcDim),
                                 builder.getI64IntegerAttr(step.tgtDim),
                                 /*subgroup_size=*/nullptr);
      break;
    case reshard::StepKind::Permute: {
      FailureOr<reshard::Permutation> perm =
          reshard::getPermutation(meshShape.axisSizes, previous, layout);
      if (failed(perm))
        return emitError(loc)
               << "cannot reshard " << what() << " from " << from << " to "
               << to << ": the planner's permute moves no whole blocks";
      // Only size-1 axes changed: every device already holds its block.
      if (perm->pairs.empty())
        continue;
      SmallVector<StringRef> axes;
      for (reshard::AxisId axis : perm->axes)
        axes.push_back(mesh.getAxes()[axis].getName().getValue());
      value = CollectivePermuteOp::create(builder, loc, value, meshRef, axes,
                                          perm->pairs);
      break;
    }
    }
    ++numCollectives;
  }
  return value;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult
FunctionPartitioner::checkRule(Operation *op, ArrayRef<ShardingAttr> operands,
                               ArrayRef<ShardingAttr> results) const {
  OpShardingRuleAttr ruleAttr = rules.lookup(op);
  if (!ruleAttr)
    return op->emitOpError("has no sharding rule (ShardingRuleOpInterface), "
                           "so sd-partition cannot check its shardings");
  // Ops share rules (those of elementwise ops of one shape are the same
  // attribute): each is converted once.
  auto [cached, inserted] = factorRules.try_emplace(ruleAttr);
  if (inserted)
    cached->second = propagation::FactorRule::fromAttr(ruleAttr);
  const propagation::FactorRule &rule = cached->second;
  auto name = [&](int64_t t) {
    return rule.isResult(t)
               ? "result #" + std::to_string(t - rule.operands.size())
               : "operand #" + std::to_string(t);
  };
  auto sharding = [&](int64_t t) {
    return rule.isResult(t) ? results[t - rule.operands.size()] : operands[t];
  };
  auto disagree = [&](const std::string &why) {
    return op->emitOpError("has shardings that its sharding rule ")
           << ruleAttr << " does not allow: " << why << " (" << kRerunHint
           << ")";
  };
  SmallVector<propagation::TensorFactorShardings, 4> projected;
  for (int64_t t = 0; t < rule.numTensors(); ++t) {
    if (!rule.isResult(t) && !sharding(t).getUnreducedAxes().empty())
      return disagree(name(t) + " is a partial sum");
    projected.push_back(propagation::projectToFactors(
        toPlain(sharding(t)), rule.tensor(t), rule.factorSizes, meshShape));
    for (auto [dim, fits] : llvm::enumerate(projected.back().dimFits))
      if (!fits)
        return disagree("the axes of dimension " + std::to_string(dim) +
                        " of " + name(t) + " do not fit its factors");
  }
  propagation::AxisList reduced;
  for (int64_t f = 0; f < rule.numFactors(); ++f) {
    int64_t first = -1;
    for (int64_t t = 0; t < rule.numTensors(); ++t) {
      const propagation::FactorSharding &factor = projected[t].factors[f];
      if (!factor.present)
        continue;
      if (first < 0)
        first = t;
      else if (factor.axes != projected[first].factors[f].axes)
        return disagree(name(first) + " and " + name(t) + " split factor " +
                        getFactorName(f) + " differently");
    }
    if (first < 0 || projected[first].factors[f].axes.empty())
      continue;
    if (rule.factorKinds[f] == FactorKind::NeedReplication)
      return disagree("factor " + getFactorName(f) +
                      " needs replication but is sharded");
    if (rule.factorKinds[f] == FactorKind::Reduction)
      reduced.append(projected[first].factors[f].axes.begin(),
                     projected[first].factors[f].axes.end());
  }
  llvm::sort(reduced);
  for (int64_t t = rule.operands.size(); t < rule.numTensors(); ++t)
    if (toLayout(sharding(t)).unreduced != reduced)
      return disagree(name(t) + " must be a partial sum over exactly the "
                                "axes of its sharded reduction factors");
  return success();
}

LogicalResult FunctionPartitioner::maskReducedPadding(
    Operation *op, OpBuilder &builder, MutableArrayRef<Value> localOperands,
    ArrayRef<ShardingAttr> operandShardings) {
  const propagation::FactorRule &rule =
      factorRules.find(rules.lookup(op))->second;
  for (auto [t, operand] : llvm::enumerate(op->getOperands())) {
    auto global = cast<RankedTensorType>(operand.getType());
    reshard::Layout layout = toLayout(operandShardings[t]);
    SmallVector<int64_t> dims;
    for (auto [dim, factors] : llvm::enumerate(rule.tensor(t)))
      if (isPadded(global, layout, dim) &&
          llvm::any_of(factors, [&](int64_t f) {
            return rule.factorKinds[f] == FactorKind::Reduction;
          }))
        dims.push_back(dim);
    if (dims.empty())
      continue;
    FailureOr<Value> masked = partition_detail::maskPaddedDims(
        op, builder, localOperands[t], global, operandShardings[t], dims);
    if (failed(masked))
      return failure();
    localOperands[t] = *masked;
  }
  return success();
}

LogicalResult FunctionPartitioner::partitionOp(Operation *op) {
  OpBuilder builder(op);
  SmallVector<Value> localOperands;
  SmallVector<ShardingAttr> operandShardings;
  for (Value operand : op->getOperands()) {
    localOperands.push_back(locals.lookup(operand));
    operandShardings.push_back(shardings.lookup(operand));
  }

  if (auto reshard = dyn_cast<ReshardOp>(op)) {
    Operation *previous = op->getPrevNode();
    FailureOr<Value> local =
        reshardValue(builder, op->getLoc(), localOperands[0], reshard.getType(),
                     operandShardings[0], reshard.getSharding(),
                     [&] { return describe(reshard.getInput()); });
    if (failed(local))
      return failure();
    // The collectives of a backward-pass reshard belong to the backward
    // pass: sd-optimize-collectives then keeps FSDP's second gather of a
    // parameter apart from the forward one.
    if (op->hasAttr(SDDialect::kBackwardAttrName))
      for (Operation *created =
               previous ? previous->getNextNode() : &op->getBlock()->front();
           created != op; created = created->getNextNode())
        created->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    locals[reshard.getResult()] = *local;
    shardings[reshard.getResult()] = reshard.getSharding();
    return success();
  }

  auto partitionable = dyn_cast<PartitionOpInterface>(op);
  if (!partitionable)
    return op->emitOpError("has no partitioning (PartitionOpInterface); "
                           "sd-partition cannot make it per-device");
  auto perValue =
      op->getAttrOfType<ShardingPerValueAttr>(SDDialect::kShardingAttrName);
  SmallVector<ShardingAttr> resultShardings;
  SmallVector<Type> localTypes;
  for (OpResult result : op->getResults()) {
    auto global = cast<RankedTensorType>(result.getType());
    ShardingAttr sharding = orReplicated(
        perValue ? perValue.getShardings()[result.getResultNumber()]
                 : ShardingAttr(),
        global.getRank());
    FailureOr<RankedTensorType> local = localType(
        global, sharding, [&] { return describe(result); }, op->getLoc());
    if (failed(local))
      return failure();
    resultShardings.push_back(sharding);
    localTypes.push_back(*local);
    int64_t devices = 1;
    for (const reshard::AxisList &axes : toLayout(sharding).dims)
      devices *= meshShape.product(axes);
    computedElements += double(local->getNumElements());
    paddedElements += double(local->getNumElements()) -
                      double(global.getNumElements()) / double(devices);
  }
  if (failed(checkRule(op, operandShardings, resultShardings)) ||
      failed(maskReducedPadding(op, builder, localOperands, operandShardings)))
    return failure();
  FailureOr<SmallVector<Value>> results = partitionable.partition(
      builder, localOperands, localTypes, operandShardings, resultShardings);
  if (failed(results))
    return failure();
  for (auto [result, local, type, sharding] : llvm::zip_equal(
           op->getResults(), *results, localTypes, resultShardings)) {
    if (local.getType() != type)
      return op->emitOpError("partitioned into a value of type ")
             << local.getType() << " instead of the local type " << type;
    locals[result] = local;
    shardings[result] = sharding;
    LLVM_DEBUG(DBGS() << "partitioned " << describe(result) << ": "
                      << result.getType() << " -> " << type << " as "
                      << sharding << "\n");
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The function
//===----------------------------------------------------------------------===//

LogicalResult FunctionPartitioner::checkProgram() {
  for (Operation &op : func.getBody().front()) {
    if (isa<CallOpInterface>(op))
      return op.emitError("sd-partition needs a program without calls; ")
             << kRerunHint;
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    if (op.getNumRegions() != 0)
      return op.emitOpError("has regions, which sd-partition does not handle");
    for (Type type :
         llvm::concat<const Type>(op.getOperandTypes(), op.getResultTypes())) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape())
        return op.emitOpError("has type ")
               << type << "; sd-partition needs static tensor shapes ("
               << kRerunHint << ")";
    }
    if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
        ruleOp && !isa<ReshardOp>(op)) {
      OpShardingRuleAttr rule = ruleAnalysis.getRule(ruleOp);
      if (!rule)
        return failure();
      rules[&op] = rule;
    }
  }
  return success();
}

LogicalResult FunctionPartitioner::run() {
  if (failed(findMesh()))
    return failure();
  if (!meshRef)
    return success(); // Nothing is sharded: every device runs the program.
  if (failed(checkProgram()))
    return failure();
  LLVM_DEBUG(DBGS() << "partitioning @" << func.getSymName() << " over "
                    << meshRef << "\n");
  Block &body = func.getBody().front();
  StringRef key = SDDialect::kShardingAttrName;

  for (BlockArgument arg : body.getArguments()) {
    auto global = dyn_cast<RankedTensorType>(arg.getType());
    if (!global || !global.hasStaticShape())
      return func.emitError() << describe(arg) << " has type " << arg.getType()
                              << "; sd-partition needs static tensor shapes ("
                              << kRerunHint << ")";
    ShardingAttr sharding = orReplicated(
        func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), key),
        global.getRank());
    FailureOr<RankedTensorType> local = localType(
        global, sharding, [&] { return describe(arg); }, func.getLoc());
    if (failed(local))
      return failure();
    shardings[arg] = sharding;
    localArgs.push_back(*local);
    LLVM_DEBUG(DBGS() << describe(arg) << ": " << global << " -> " << *local
                      << " as " << sharding << "\n");
  }
  // Local arguments are new block arguments, so that the global ops keep
  // their types until they are erased; the global ones go at the end.
  unsigned numArgs = body.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    locals[body.getArgument(i)] =
        body.addArgument(localArgs[i], body.getArgument(i).getLoc());

  SmallVector<Operation *> original;
  for (Operation &op : body.without_terminator())
    original.push_back(&op);
  for (Operation *op : original)
    if (failed(partitionOp(op)))
      return failure();

  // Returned values take the layouts of the function's results.
  Operation *ret = body.getTerminator();
  OpBuilder builder(ret);
  SmallVector<ShardingAttr> resultShardings;
  SmallVector<Type> resultGlobals(ret->getOperandTypes());
  for (OpOperand &operand : ret->getOpOperands()) {
    unsigned index = operand.getOperandNumber();
    auto global = cast<RankedTensorType>(operand.get().getType());
    ShardingAttr target = orReplicated(
        func.getResultAttrOfType<ShardingAttr>(index, key), global.getRank());
    FailureOr<Value> local =
        reshardValue(builder, ret->getLoc(), locals.lookup(operand.get()),
                     global, shardings.lookup(operand.get()), target,
                     [&] { return "result #" + std::to_string(index); });
    if (failed(local))
      return failure();
    resultShardings.push_back(target);
    operand.set(*local);
  }
  for (Operation *op : original)
    op->dropAllReferences();
  for (Operation *op : llvm::reverse(original))
    op->erase();
  SmallVector<ShardingAttr> argShardings;
  SmallVector<Type> argGlobals;
  for (unsigned i = 0; i < numArgs; ++i) {
    argShardings.push_back(shardings[body.getArgument(i)]);
    argGlobals.push_back(body.getArgument(i).getType());
  }
  body.eraseArguments(0, numArgs);

  // The signature is local; the boundary keeps its global layouts, closed.
  auto closed = [&](ShardingAttr sharding) {
    SmallVector<DimShardingAttr> dims;
    for (DimShardingAttr dim : sharding.getDimShardings())
      dims.push_back(DimShardingAttr::get(func.getContext(), dim.getAxes(),
                                          /*is_closed=*/true, std::nullopt));
    return ShardingAttr::get(func.getContext(), meshRef, dims,
                             sharding.getReplicatedAxes(),
                             sharding.getUnreducedAxes());
  };
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 ret->getOperandTypes()));
  // Each boundary's attributes are rebuilt once: setArgAttr per argument
  // would rebuild the whole array each time, quadratic in their count.
  auto localAttrs = [&](ArrayRef<ShardingAttr> boundaryShardings,
                        TypeRange globals, auto getAttrDict) {
    SmallVector<DictionaryAttr> dicts;
    for (auto [index, sharding] : llvm::enumerate(boundaryShardings)) {
      NamedAttrList attrs(getAttrDict(index));
      attrs.erase(key);
      attrs.set(SDDialect::kLocalShardingAttrName, closed(sharding));
      auto global = cast<RankedTensorType>(globals[index]);
      reshard::Layout layout = toLayout(sharding);
      if (llvm::any_of(llvm::seq<int64_t>(0, global.getRank()),
                       [&](int64_t d) { return isPadded(global, layout, d); }))
        attrs.set(SDDialect::kGlobalShapeAttrName,
                  DenseI64ArrayAttr::get(func.getContext(), global.getShape()));
      dicts.push_back(attrs.getDictionary(func.getContext()));
    }
    return dicts;
  };
  func.setAllArgAttrs(localAttrs(argShardings, argGlobals, [&](unsigned i) {
    return func.getArgAttrDict(i);
  }));
  func.setAllResultAttrs(
      localAttrs(resultShardings, resultGlobals,
                 [&](unsigned i) { return func.getResultAttrDict(i); }));
  // Global shardings and rules do not describe local ops. (The names are
  // made once: removeAttr(StringRef) makes its StringAttr per call; and
  // removeAttr copies the op's attributes even where the name is absent,
  // as the rule mostly is.)
  auto shardingName = StringAttr::get(func.getContext(), key);
  auto ruleName =
      StringAttr::get(func.getContext(), SDDialect::kShardingRuleAttrName);
  for (Operation &op : body)
    for (StringAttr name : {shardingName, ruleName})
      if (op.getDiscardableAttr(name))
        op.removeDiscardableAttr(name);
  if (paddedElements >= 0.5)
    func->setAttr(
        SDDialect::kPaddingAttrName,
        DenseI64ArrayAttr::get(func.getContext(),
                               {int64_t(std::llround(paddedElements)),
                                int64_t(std::llround(computedElements))}));
  return success();
}

namespace {
struct PartitionPass : public mlir::sd::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    PartitionBase::getDependentDialects(registry);
    registerPartitionModels(registry);
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    FunctionPartitioner partitioner(func, getAnalysis<ShardingRuleAnalysis>());
    if (failed(partitioner.run()))
      return signalPassFailure();
    numCollectives += partitioner.getNumCollectives();
  }
};
} // namespace
