//===- SDDialect.cpp - the sd dialect -------------------------------------===//
//
// Dialect registration and the verification of sd's discardable attributes
// on functions, their arguments and results, and op results.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/InliningUtils.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

#include "sd/IR/SDOpsDialect.cpp.inc"

namespace {
/// All sd ops are pure tensor computations without regions, so calls of
/// block functions can always be inlined.
struct SDInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void SDDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "sd/IR/SDOps.cpp.inc"
      >();
  addInterfaces<SDInlinerInterface>();
}

/// Describes function argument `index` for messages: `argument #3
/// ("blocks.0.attn.q.weight")` when it is a named parameter.
static std::string describeArgument(FunctionOpInterface func, unsigned index) {
  std::string text = "argument #" + std::to_string(index);
  if (auto param =
          func.getArgAttrOfType<ParamAttr>(index, SDDialect::kRoleAttrName))
    text += " (\"" + param.getName().getValue().str() + "\")";
  return text;
}

unsigned SDDialect::getFirstDuplicateParam(FunctionOpInterface func) {
  ArrayAttr argAttrs = func.getArgAttrsAttr();
  std::lock_guard<std::mutex> lock(firstDuplicateParamsMutex);
  auto [it, inserted] = firstDuplicateParams.try_emplace(argAttrs, 0);
  if (!inserted)
    return it->second;
  // A function is verified after each pass, each time with new arrays: the
  // cache keeps the latest few.
  if (firstDuplicateParams.size() > 64) {
    firstDuplicateParams.clear();
    it = firstDuplicateParams.try_emplace(argAttrs, 0).first;
  }
  unsigned numArgs = func.getNumArguments();
  it->second = numArgs;
  DenseSet<StringAttr> names;
  for (unsigned i = 0; i < numArgs; ++i)
    if (auto param = func.getArgAttrOfType<ParamAttr>(i, kRoleAttrName))
      if (!names.insert(param.getName()).second) {
        it->second = i;
        break;
      }
  return it->second;
}

Attribute SDDialect::getShardingRule(Operation *op,
                                     function_ref<Attribute()> make) {
  // Names, types and attributes are uniqued: their pointers are their
  // values. Null separates operands, results and inherent attributes.
  SmallVector<const void *, 16> key;
  key.push_back(op->getName().getAsOpaquePointer());
  for (Type type : op->getOperandTypes())
    key.push_back(type.getAsOpaquePointer());
  key.push_back(nullptr);
  for (Type type : op->getResultTypes())
    key.push_back(type.getAsOpaquePointer());
  key.push_back(nullptr);
  for (StringAttr name : op->getName().getAttributeNames()) {
    std::optional<Attribute> attr = op->getInherentAttr(name);
    key.push_back(attr ? attr->getAsOpaquePointer() : nullptr);
  }
  {
    std::lock_guard<std::mutex> lock(shardingRulesMutex);
    auto found = shardingRules.find(ArrayRef<const void *>(key));
    if (found != shardingRules.end())
      return found->second;
  }
  // Made outside the lock: a rule's builder may emit diagnostics.
  Attribute rule = make();
  if (!rule)
    return rule;
  std::lock_guard<std::mutex> lock(shardingRulesMutex);
  if (shardingRules.count(ArrayRef<const void *>(key)))
    return rule;
  auto *stored = ruleKeys.Allocate<const void *>(key.size());
  llvm::copy(key, stored);
  shardingRules.try_emplace(ArrayRef<const void *>(stored, key.size()), rule);
  return rule;
}

/// Checks a sharding annotation on a value of `type`.
static LogicalResult verifySharding(Operation *op, Attribute attr, Type type,
                                    StringRef valueName) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return emitError(op->getLoc()) << "'" << SDDialect::kShardingAttrName
                                   << "' must be a #sd.sharding, not " << attr;
  auto emit = [&] { return emitError(op->getLoc()); };
  MeshAttr mesh = lookupMesh(op, sharding.getMeshName(), emit);
  if (!mesh)
    return failure();
  return sharding.verifyFor(type, mesh, valueName, emit);
}

/// Checks the sharding of a partitioned function's argument or result of
/// local `type` against the global type it is a block of.
static LogicalResult verifyLocalSharding(Operation *op, Attribute attr,
                                         Type type, StringRef valueName) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!sharding || !tensorType || !tensorType.hasStaticShape())
    return emitError(op->getLoc())
           << "'" << SDDialect::kLocalShardingAttrName
           << "' must be a #sd.sharding of a static tensor, not " << attr;
  auto emit = [&] { return emitError(op->getLoc()); };
  MeshAttr mesh = lookupMesh(op, sharding.getMeshName(), emit);
  if (!mesh)
    return failure();
  if (sharding.getRank() != tensorType.getRank())
    return emit() << "local sharding of " << valueName << " has "
                  << sharding.getRank() << " dimensions but its type is "
                  << type;
  SmallVector<int64_t> global(tensorType.getShape());
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings()))
    for (StringAttr name : dimSharding.getAxes())
      if (MeshAxisAttr axis = mesh.getAxis(name))
        global[dim] *= axis.getSize();
  return sharding.verifyFor(tensorType.clone(global), mesh, valueName, emit);
}

/// Checks the global shape of a partitioned function's argument or result
/// of local `type` with padded blocks: each local dimension must be the
/// block extent of the global one over its devices.
static LogicalResult verifyGlobalShape(Operation *op, Attribute attr, Type type,
                                       Attribute localSharding,
                                       StringRef valueName) {
  auto shape = dyn_cast<DenseI64ArrayAttr>(attr);
  auto tensorType = dyn_cast<RankedTensorType>(type);
  auto sharding = dyn_cast_or_null<ShardingAttr>(localSharding);
  if (!shape || !tensorType || !sharding ||
      shape.size() != tensorType.getRank())
    return emitError(op->getLoc())
           << "'" << SDDialect::kGlobalShapeAttrName << "' of " << valueName
           << " must be an array of its "
           << (tensorType ? tensorType.getRank() : 0)
           << " global sizes beside '" << SDDialect::kLocalShardingAttrName
           << "', not " << attr;
  MeshAttr mesh = lookupMesh(op, sharding.getMeshName(),
                             [&] { return emitError(op->getLoc()); });
  if (!mesh)
    return failure();
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings())) {
    int64_t devices = 1;
    for (StringAttr name : dimSharding.getAxes())
      if (MeshAxisAttr axis = mesh.getAxis(name))
        devices *= axis.getSize();
    int64_t global = shape[dim];
    if (global < 0 ||
        ::sd::blockExtent(global, devices) != tensorType.getDimSize(dim))
      return emitError(op->getLoc())
             << "dimension " << dim << " of " << valueName << " has "
             << tensorType.getDimSize(dim) << " elements per device, not a "
             << "block of its global " << global << " over " << devices
             << " devices";
  }
  return success();
}

LogicalResult SDDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return emitError(op->getLoc())
           << "'" << attr.getName() << "' is only valid on function arguments";
  Type type = func.getArgumentTypes()[argIndex];
  // Before the attribute's own checks, which multiply the dimensions.
  if (failed(verifyTensorSize(type, [&] {
        return emitError(op->getLoc()) << describeArgument(func, argIndex);
      })))
    return failure();
  StringRef attrName = attr.getName().getValue();

  if (attrName == kRoleAttrName) {
    if (auto param = dyn_cast<ParamAttr>(attr.getValue())) {
      // A stored shape views the global tensor: a partitioned function's
      // argument is a block of it.
      auto tensorType = dyn_cast<RankedTensorType>(type);
      if (!param.getStoredShape().empty() && tensorType &&
          tensorType.hasStaticShape() &&
          !func.getArgAttr(argIndex, kLocalShardingAttrName)) {
        int64_t stored = 1;
        for (int64_t size : param.getStoredShape())
          stored *= size;
        if (stored != tensorType.getNumElements())
          return emitError(op->getLoc())
                 << "stored shape [" << param.getStoredShape() << "] of "
                 << describeArgument(func, argIndex) << " has " << stored
                 << " elements but its type " << type << " has "
                 << tensorType.getNumElements();
      }
      // Report a duplicate name once, at its second occurrence: the first
      // such argument (verification stops at the first error).
      if (argIndex != getFirstDuplicateParam(func))
        return success();
      for (unsigned i = 0; i < argIndex; ++i)
        if (auto other = func.getArgAttrOfType<ParamAttr>(i, kRoleAttrName))
          if (other.getName() == param.getName())
            return emitError(op->getLoc())
                   << "parameter name " << param.getName()
                   << " is used by argument #" << i << " and argument #"
                   << argIndex;
      return success();
    }
    if (isa<InputAttr, OptimizerStateAttr>(attr.getValue()))
      return success();
    return emitError(op->getLoc())
           << "'" << kRoleAttrName << "' of "
           << describeArgument(func, argIndex)
           << " must be #sd.param, #sd.input or #sd.optimizer_state, not "
           << attr.getValue();
  }
  if (attrName == kLogicalAxesAttrName) {
    auto axes = dyn_cast<LogicalAxesAttr>(attr.getValue());
    if (!axes)
      return emitError(op->getLoc())
             << "'" << kLogicalAxesAttrName << "' of "
             << describeArgument(func, argIndex) << " must be #sd.logical_axes";
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (!tensorType || tensorType.getRank() != axes.getRank())
      return emitError(op->getLoc())
             << "logical axes of " << describeArgument(func, argIndex)
             << " name " << axes.getRank() << " dimensions but its type is "
             << type;
    return success();
  }
  if (attrName == kShardingAttrName)
    return verifySharding(op, attr.getValue(), type,
                          describeArgument(func, argIndex));
  if (attrName == kFrozenAttrName) {
    if (!isa<UnitAttr>(attr.getValue()) ||
        !func.getArgAttrOfType<ParamAttr>(argIndex, kRoleAttrName))
      return emitError(op->getLoc())
             << "'" << kFrozenAttrName << "' of "
             << describeArgument(func, argIndex)
             << " must be a unit attribute on an #sd.param argument";
    return success();
  }
  if (attrName == kLocalShardingAttrName)
    return verifyLocalSharding(op, attr.getValue(), type,
                               describeArgument(func, argIndex));
  if (attrName == kGlobalShapeAttrName)
    return verifyGlobalShape(op, attr.getValue(), type,
                             func.getArgAttr(argIndex, kLocalShardingAttrName),
                             describeArgument(func, argIndex));
  return emitError(op->getLoc())
         << "unknown sd argument attribute '" << attrName << "'";
}

LogicalResult SDDialect::verifyRegionResultAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return emitError(op->getLoc())
           << "'" << attr.getName() << "' is only valid on function results";
  if (failed(verifyTensorSize(func.getResultTypes()[resultIndex], [&] {
        return emitError(op->getLoc()) << "result #" << resultIndex;
      })))
    return failure();
  StringRef attrName = attr.getName().getValue();
  if (attrName == kRoleAttrName || attrName == kLogicalAxesAttrName)
    return emitError(op->getLoc())
           << "'" << attrName
           << "' belongs on a function argument, not on a "
              "result";
  if (attrName == kLocalShardingAttrName)
    return verifyLocalSharding(op, attr.getValue(),
                               func.getResultTypes()[resultIndex],
                               "result #" + std::to_string(resultIndex));
  if (attrName == kGlobalShapeAttrName)
    return verifyGlobalShape(
        op, attr.getValue(), func.getResultTypes()[resultIndex],
        func.getResultAttr(resultIndex, kLocalShardingAttrName),
        "result #" + std::to_string(resultIndex));
  if (attrName == kAliasesAttrName) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(func.getNumArguments()))
      return emitError(op->getLoc())
             << "'" << kAliasesAttrName << "' of result #" << resultIndex
             << " must be the index of an argument";
    if (func.getArgumentTypes()[index.getInt()] !=
        func.getResultTypes()[resultIndex])
      return emitError(op->getLoc())
             << "result #" << resultIndex << " aliases argument #"
             << index.getInt() << " of another type";
    return success();
  }
  if (attrName != kShardingAttrName)
    return emitError(op->getLoc())
           << "unknown sd result attribute '" << attrName << "'";
  return verifySharding(op, attr.getValue(), func.getResultTypes()[resultIndex],
                        "result #" + std::to_string(resultIndex));
}

LogicalResult SDDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  StringRef attrName = attr.getName().getValue();
  // The shardings and rules are checked against the op's types before the
  // op's own verifier runs, so the types' sizes are checked first here.
  if ((attrName == kShardingAttrName || attrName == kShardingRuleAttrName) &&
      failed(verifyTensorSizesFit(op)))
    return failure();
  if (attrName == kNameAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << kNameAttrName << "' must be a string, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kDefaultBatchAttrName) {
    auto batch = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !batch || batch.getInt() <= 0)
      return emitError(op->getLoc())
             << "'" << kDefaultBatchAttrName
             << "' must be a positive integer on a function";
    return success();
  }
  if (attrName == kPredictionTypeAttrName) {
    if (!isa<FunctionOpInterface>(op) ||
        !isa<PredictionTypeAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << kPredictionTypeAttrName
             << "' must be a #sd.prediction<epsilon|v_prediction|flow> on a "
                "function, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kGuidanceAttrName) {
    auto guidance = dyn_cast<FloatAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !guidance ||
        !std::isfinite(guidance.getValueAsDouble()))
      return emitError(op->getLoc())
             << "'" << kGuidanceAttrName
             << "' must be a finite float on a function, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kPaddingAttrName) {
    auto counts = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !counts || counts.size() != 2 ||
        counts[0] < 0 || counts[0] > counts[1])
      return emitError(op->getLoc())
             << "'" << kPaddingAttrName
             << "' must be an array of the padded and all elements on a "
                "function, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kShardingRuleAttrName) {
    auto rule = dyn_cast<OpShardingRuleAttr>(attr.getValue());
    if (!rule)
      return emitError(op->getLoc())
             << "'" << kShardingRuleAttrName
             << "' must be a #sd.sharding_rule, not " << attr.getValue();
    return rule.verifyFor(op, [&] { return emitError(op->getLoc()); });
  }
  if (attrName == kShardingAttrName) {
    auto perValue = dyn_cast<ShardingPerValueAttr>(attr.getValue());
    if (!perValue)
      return emitError(op->getLoc())
             << "'" << kShardingAttrName
             << "' on an op must be a #sd.sharding_per_value, "
                "not "
             << attr.getValue();
    if (perValue.getShardings().size() != op->getNumResults())
      return emitError(op->getLoc())
             << "'" << kShardingAttrName << "' has "
             << perValue.getShardings().size() << " shardings but the op has "
             << op->getNumResults() << " results";
    for (auto [index, sharding] : llvm::enumerate(perValue.getShardings()))
      if (failed(verifySharding(op, sharding, op->getResult(index).getType(),
                                "result #" + std::to_string(index))))
        return failure();
    return success();
  }
  if (attrName == kProvenanceAttrName) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || !llvm::all_of(list, llvm::IsaPred<StringAttr>))
      return emitError(op->getLoc())
             << "'" << kProvenanceAttrName << "' must be an array of strings";
    return success();
  }
  if (attrName == kSizeQueriesAttrName) {
    if (!isa<FunctionOpInterface>(op) ||
        !isa<DenseI64ArrayAttr>(attr.getValue()))
      return emitError(op->getLoc()) << "'" << kSizeQueriesAttrName
                                     << "' must be an array<i64> on a function";
    return success();
  }
  if (attrName == kBackwardAttrName || attrName == kRecomputeAttrName ||
      attrName == kGradientSumAttrName || attrName == kHaloAttrName ||
      attrName == kDerivativeAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << attrName << "' is a unit attribute, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kVjpGroupAttrName || attrName == kLayerAttrName) {
    if (!isa<IntegerAttr>(attr.getValue()))
      return emitError(op->getLoc())
             << "'" << attrName << "' must be an integer, not "
             << attr.getValue();
    return success();
  }
  if (attrName == kLayersAttrName) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !list ||
        !llvm::all_of(list, llvm::IsaPred<StringAttr>))
      return emitError(op->getLoc())
             << "'" << kLayersAttrName
             << "' must be an array of strings on a function";
    return success();
  }
  if (attrName == kSampleBlockAttrName) {
    auto pair = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!isa<CallOpInterface>(op) || !pair || pair.size() != 2 || pair[0] < 0 ||
        pair[1] < 0)
      return emitError(op->getLoc())
             << "'" << kSampleBlockAttrName
             << "' must be an array<i64: chain, position> of two "
                "non-negative integers on a call";
    return success();
  }
  if (attrName == kRoleAttrName || attrName == kLogicalAxesAttrName)
    return emitError(op->getLoc())
           << "'" << attrName
           << "' belongs on a function argument, not on an op";
  return emitError(op->getLoc()) << "unknown sd attribute '" << attrName << "'";
}
