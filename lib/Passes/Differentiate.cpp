//===- Differentiate.cpp - the training step by reverse-mode AD -----------===//
//
// @loss(params, inputs) -> loss becomes @train_step(params, mu, nu, inputs,
// step) -> (loss, params', mu', nu'): the forward program (block calls
// inlined, each inlined call a *layer*), the backward program built from
// each op's VJP (VjpOpInterface) in reverse order, and AdamW. The remat
// policy decides per forward value what the backward pass gets: the value
// itself, a reload of its offloaded copy, or a recomputation. Everything
// walks the one block in order; nothing recurses along use-def chains.
//
//===----------------------------------------------------------------------===//

#include "sd/Autodiff/VjpModels.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"
#include "sd/Passes/RematPolicy.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sd {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {

//===----------------------------------------------------------------------===//
// Inlining layers
//===----------------------------------------------------------------------===//

/// The layers of a program: each inlined call of @loss is one, numbered
/// from 1 in program order (0: outside any layer), with its callee's name.
struct Layers {
  DenseMap<Operation *, unsigned> of;
  SmallVector<StringAttr> names = {StringAttr()};
};

/// Inlines every call in `func` (calls inside callees too), recording for
/// each inlined op the outermost call it came from: the layer the remat
/// policy applies to.
LogicalResult inlineLayers(func::FuncOp func, SymbolTable &symbols,
                           Layers &layers) {
  Block &body = func.getBody().front();
  SmallVector<func::CallOp> calls;
  for (Operation &op : body)
    if (auto call = dyn_cast<func::CallOp>(op))
      calls.push_back(call);
  // A worklist, not recursion: calls found in inlined bodies join it with
  // their outermost layer.
  SmallVector<std::pair<func::CallOp, unsigned>> worklist;
  for (func::CallOp call : llvm::reverse(calls)) {
    worklist.push_back({call, layers.names.size()});
    layers.names.push_back(call.getCalleeAttr().getAttr());
  }
  while (!worklist.empty()) {
    auto [call, layer] = worklist.pop_back_val();
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return call.emitOpError("calls @")
             << call.getCallee() << ", which has no body to differentiate";
    IRMapping mapping;
    Block &calleeBody = callee.getBody().front();
    mapping.map(calleeBody.getArguments(), call.getOperands());
    OpBuilder builder(call);
    SmallVector<func::CallOp> inner;
    for (Operation &op : calleeBody.without_terminator()) {
      Operation *clone = builder.clone(op, mapping);
      layers.of[clone] = layer;
      if (auto innerCall = dyn_cast<func::CallOp>(clone))
        inner.push_back(innerCall);
    }
    for (auto [result, returned] :
         llvm::zip_equal(call.getResults(),
                         calleeBody.getTerminator()->getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(returned));
    call.erase();
    for (func::CallOp innerCall : llvm::reverse(inner))
      worklist.push_back({innerCall, layer});
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The training step
//===----------------------------------------------------------------------===//

/// Options of the pass, as the builder needs them.
struct StepOptions {
  bool train = true;
  double learningRate, beta1, beta2, epsilon, weightDecay, maxGradNorm;
  int64_t warmupSteps, gradAccum;
};

class TrainStepBuilder {
public:
  TrainStepBuilder(func::FuncOp loss, const Layers &layers,
                   const RematPolicy &policy, const StepOptions &options)
      : loss(loss), layers(layers), policy(policy), options(options),
        builder(loss.getContext()) {}

  FailureOr<func::FuncOp> build();

  int64_t numRecomputed = 0;
  int64_t numOffloaded = 0;

private:
  // Building blocks.
  template <typename OpTy, typename... Args>
  Value create(Args &&...args) {
    Operation *op =
        OpTy::create(builder, loss.getLoc(), std::forward<Args>(args)...);
    if (inBackward)
      op->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    return op->getResult(0);
  }
  Value splat(double value, Type type);
  Value scalar(double value) {
    return splat(value, RankedTensorType::get({}, builder.getF32Type()));
  }
  Value broadcastScalar(Value scalar, Type type);

  // Phases.
  void createFunction();
  FailureOr<Value> forward(ArrayRef<Value> inputs);
  LogicalResult backward(Value lossValue, double seed);
  Value microbatch(Value input, int64_t index);
  void clipGradients();
  void computeStepScalars();
  void updateParameter(size_t n);
  /// Whether each parameter is updated as soon as its gradient is complete
  /// (one microbatch, no clipping): the gradient dies there instead of
  /// living until the end of the backward pass, as PyTorch's optimizer in
  /// backward.
  bool updatesInBackward() const {
    return options.train && options.gradAccum == 1 &&
           options.maxGradNorm <= 0;
  }

  // The backward pass's view of forward values.
  Residency residency(Value value);
  Value available(Value value);
  Value offloaded(Value value);
  LogicalResult differentiateOp(Operation *op);
  void accumulate(Value value, Value cotangent);

  func::FuncOp loss;
  const Layers &layers;
  const RematPolicy &policy;
  StepOptions options;
  OpBuilder builder;
  bool inBackward = false;

  func::FuncOp step;
  SmallVector<unsigned> paramIndices, inputIndices;
  SmallVector<Value> params, mu, nu, inputs;
  Value stepCount;

  // One microbatch at a time: the forward clone of each loss op, the ops
  // whose results depend on a parameter, cotangents, and what the backward
  // pass made available of each forward value.
  IRMapping forwardMap;
  DenseMap<Operation *, unsigned> cloneLayer;
  SmallVector<Operation *> forwardOps;
  DenseSet<Operation *> forwardSet;
  DenseSet<Value> active;
  DenseMap<Value, Value> cotangents;
  DenseMap<Value, Value> availableValues;
  DenseMap<Value, Residency> residencies;
  DenseMap<Value, Value> offloadedValues;
  /// Per parameter, the gradient summed over microbatches.
  SmallVector<Value> gradients;
  /// AdamW's step scalars and, per parameter, its results (null until
  /// updated).
  Value correction1, correction2, learningRate;
  SmallVector<Value> newParams, newMu, newNu;
};

Value TrainStepBuilder::splat(double value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  Type element = tensorType.getElementType();
  auto attr = DenseElementsAttr::get(
      tensorType, builder.getFloatAttr(element, value).getValue());
  return create<ConstantOp>(cast<ElementsAttr>(attr));
}

Value TrainStepBuilder::broadcastScalar(Value value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  if (tensorType.getRank() == 0)
    return value;
  return create<BroadcastInDimOp>(tensorType, value, ArrayRef<int64_t>{});
}

void TrainStepBuilder::createFunction() {
  MLIRContext *context = loss.getContext();
  FunctionType lossType = loss.getFunctionType();
  for (unsigned i = 0, e = lossType.getNumInputs(); i < e; ++i) {
    if (loss.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName))
      paramIndices.push_back(i);
    else
      inputIndices.push_back(i);
  }
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto paramTypes = llvm::map_to_vector(
      paramIndices, [&](unsigned i) { return lossType.getInput(i); });
  auto addArgs = [&](ArrayRef<unsigned> indices,
                     function_ref<DictionaryAttr(unsigned)> attrs,
                     function_ref<Type(unsigned)> type) {
    for (unsigned i : indices) {
      argTypes.push_back(type(i));
      argAttrs.push_back(attrs(i));
    }
  };
  auto lossAttrs = [&](unsigned i) { return loss.getArgAttrDict(i); };
  auto lossArgType = [&](unsigned i) { return lossType.getInput(i); };
  addArgs(paramIndices, lossAttrs, lossArgType);
  SmallVector<DictionaryAttr> stateAttrs[2];
  if (options.train) {
    for (MomentKind kind : {MomentKind::mu, MomentKind::nu}) {
      auto stateAttr = [&](unsigned i) {
        NamedAttrList attrs(loss.getArgAttrDict(i));
        auto param =
            loss.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
        attrs.set(SDDialect::kRoleAttrName,
                  OptimizerStateAttr::get(context, param.getName(), kind));
        return attrs.getDictionary(context);
      };
      addArgs(paramIndices, stateAttr, lossArgType);
    }
  }
  // With microbatches, inputs hold the whole batch: K microbatches' worth.
  auto inputType = [&](unsigned i) -> Type {
    auto type = cast<RankedTensorType>(lossType.getInput(i));
    if (options.gradAccum == 1 || type.getRank() == 0)
      return type;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= options.gradAccum;
    return type.clone(shape);
  };
  addArgs(inputIndices, lossAttrs, inputType);
  if (options.train) {
    argTypes.push_back(RankedTensorType::get({}, builder.getF32Type()));
    NamedAttrList attrs;
    attrs.set(SDDialect::kRoleAttrName,
              InputAttr::get(context, InputKind::step));
    argAttrs.push_back(attrs.getDictionary(context));
  }

  SmallVector<Type> resultTypes = {lossType.getResult(0)};
  int64_t copies = options.train ? 3 : 1;
  for (int64_t c = 0; c < copies; ++c)
    llvm::append_range(resultTypes, paramTypes);

  builder.setInsertionPoint(loss);
  StringRef name = options.train ? "train_step" : "loss_grad";
  step = func::FuncOp::create(builder, loss.getLoc(), name,
                              FunctionType::get(context, argTypes, resultTypes));
  step.setAllArgAttrs(argAttrs);
  if (auto batch = loss->getAttr(SDDialect::kDefaultBatchAttrName))
    step->setAttr(SDDialect::kDefaultBatchAttrName, batch);
  // New parameters and moments have their parameter's sharding, where it
  // has one, and are written in place of the old ones (donated).
  if (options.train)
    for (int64_t c = 0; c < copies; ++c)
      for (auto [n, i] : llvm::enumerate(paramIndices)) {
        unsigned result = 1 + c * paramIndices.size() + n;
        if (Attribute sharding =
                loss.getArgAttr(i, SDDialect::kShardingAttrName))
          step.setResultAttr(result, SDDialect::kShardingAttrName, sharding);
        step.setResultAttr(
            result, SDDialect::kAliasesAttrName,
            builder.getI64IntegerAttr(c * paramIndices.size() + n));
      }

  Block *entry = step.addEntryBlock();
  unsigned next = 0;
  auto takeArgs = [&](SmallVectorImpl<Value> &into, size_t count) {
    for (size_t k = 0; k < count; ++k)
      into.push_back(entry->getArgument(next++));
  };
  takeArgs(params, paramIndices.size());
  if (options.train) {
    takeArgs(mu, paramIndices.size());
    takeArgs(nu, paramIndices.size());
  }
  takeArgs(inputs, inputIndices.size());
  if (options.train)
    stepCount = entry->getArgument(next++);
  builder.setInsertionPointToEnd(entry);
}

/// Microbatch `index` of a batch-major input: sample i goes to microbatch
/// i mod K. As [B, ...] → [B/K, K, ...] → slice → [B/K, ...], the batch
/// dimension's sharding stays on the major factor, so a sharded batch
/// splits without communication.
Value TrainStepBuilder::microbatch(Value input, int64_t index) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t k = options.gradAccum;
  if (k == 1 || type.getRank() == 0)
    return input;
  SmallVector<int64_t> split = {type.getDimSize(0) / k, k};
  llvm::append_range(split, type.getShape().drop_front());
  Value grouped = create<ReshapeOp>(type.clone(split), input);
  SmallVector<int64_t> start(split.size(), 0), limit(split), strides(split.size(), 1);
  start[1] = index;
  limit[1] = index + 1;
  Value one = create<SliceOp>(grouped, start, limit, strides);
  SmallVector<int64_t> shape = {split[0]};
  llvm::append_range(shape, type.getShape().drop_front());
  return create<ReshapeOp>(type.clone(shape), one);
}

FailureOr<Value> TrainStepBuilder::forward(ArrayRef<Value> microInputs) {
  forwardMap.clear();
  cloneLayer.clear();
  forwardOps.clear();
  forwardSet.clear();
  active.clear();
  residencies.clear();
  Block &body = loss.getBody().front();
  for (auto [n, i] : llvm::enumerate(paramIndices)) {
    forwardMap.map(body.getArgument(i), params[n]);
    active.insert(params[n]);
  }
  for (auto [n, i] : llvm::enumerate(inputIndices))
    forwardMap.map(body.getArgument(i), microInputs[n]);
  for (Operation &op : body.without_terminator()) {
    Operation *clone = builder.clone(op, forwardMap);
    forwardOps.push_back(clone);
    forwardSet.insert(clone);
    if (unsigned layer = layers.of.lookup(&op))
      cloneLayer[clone] = layer;
    if (llvm::any_of(clone->getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value result : clone->getResults())
        if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
          active.insert(result);
  }
  return forwardMap.lookupOrDefault(body.getTerminator()->getOperand(0));
}

Residency TrainStepBuilder::residency(Value value) {
  // Asked for every operand the backward pass touches: decided once.
  if (auto it = residencies.find(value); it != residencies.end())
    return it->second;
  Residency &decided = residencies[value];
  decided = Residency::Keep;
  Operation *def = value.getDefiningOp();
  unsigned layer = def ? cloneLayer.lookup(def) : 0;
  // Outside layers everything is kept, as outside jax.checkpoint.
  if (layer == 0)
    return decided;
  decided = policy.decide(value, layers.names[layer].getValue());
  if (decided != Residency::Recompute)
    return decided;
  // A layer's outputs are the next layer's inputs: kept, unless offloaded.
  bool leavesLayer = llvm::any_of(value.getUsers(), [&](Operation *user) {
    return !user->hasAttr(SDDialect::kBackwardAttrName) &&
           cloneLayer.lookup(user) != layer;
  });
  if (leavesLayer)
    decided = Residency::Keep;
  return decided;
}

Value TrainStepBuilder::offloaded(Value value) {
  Value &copy = offloadedValues[value];
  if (!copy) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(value);
    bool wasBackward = inBackward;
    inBackward = false;
    copy = create<OffloadOp>(value);
    inBackward = wasBackward;
    ++numOffloaded;
  }
  return copy;
}

/// What the backward pass uses for forward value `value`, created at the
/// builder's insertion point: the value, a reload, or a recomputation (a
/// post-order walk with an explicit stack over the values to recompute).
Value TrainStepBuilder::available(Value value) {
  if (Value known = availableValues.lookup(value))
    return known;
  switch (residency(value)) {
  case Residency::Keep:
    return value;
  case Residency::Offload: {
    Value reloaded = create<ReloadOp>(offloaded(value));
    availableValues[value] = reloaded;
    return reloaded;
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
      Operation *current = op;
      for (Value operand : current->getOperands())
        if (needsRecompute(operand))
          stack.push_back({operand.getDefiningOp(), false});
      continue;
    }
    Operation *original = op;
    stack.pop_back();
    IRMapping mapping;
    for (Value operand : original->getOperands())
      mapping.map(operand, available(operand));
    Operation *clone = builder.clone(*original, mapping);
    clone->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    clone->setAttr(SDDialect::kRecomputeAttrName, builder.getUnitAttr());
    ++numRecomputed;
    for (auto [result, recomputed] :
         llvm::zip_equal(original->getResults(), clone->getResults()))
      availableValues[result] = recomputed;
  }
  return availableValues.lookup(value);
}

void TrainStepBuilder::accumulate(Value value, Value cotangent) {
  Value &sum = cotangents[value];
  sum = sum ? create<AddOp>(sum, cotangent) : cotangent;
}

LogicalResult TrainStepBuilder::differentiateOp(Operation *op) {
  SmallVector<Value> resultCotangents;
  bool any = false;
  for (Value result : op->getResults()) {
    resultCotangents.push_back(cotangents.lookup(result));
    any |= static_cast<bool>(resultCotangents.back());
  }
  if (!any)
    return success();
  if (!isa<VjpOpInterface>(op))
    return op->emitOpError("has no VJP; cannot differentiate through it");

  // The VJP is built on a copy of the op with the forward operands; then
  // every forward value the new ops use is replaced by what the backward
  // pass has of it, created just before them.
  Block *block = builder.getInsertionBlock();
  Operation *copy = builder.clone(*op);
  copy->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
  SmallVector<Value> operandCotangents;
  if (failed(cast<VjpOpInterface>(copy).buildVjp(builder, resultCotangents,
                                                  operandCotangents)))
    return failure();
  SmallVector<Operation *> built;
  for (Operation *it = copy->getNextNode(); it; it = it->getNextNode())
    built.push_back(it);

  builder.setInsertionPoint(copy);
  auto isForward = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && forwardSet.contains(def);
  };
  // Marked first: residency() tells layer outputs by their forward users.
  for (Operation *newOp : built)
    newOp->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
  for (Operation *newOp : built) {
    for (OpOperand &operand : newOp->getOpOperands())
      if (isForward(operand.get()))
        operand.set(available(operand.get()));
  }
  // The copy's results: the kept (or reloaded) forward results where the
  // policy keeps them; otherwise the copy is their recomputation.
  bool copyRecomputes = false;
  for (auto [result, copied] :
       llvm::zip_equal(op->getResults(), copy->getResults())) {
    if (copied.use_empty())
      continue;
    if (residency(result) == Residency::Recompute &&
        !availableValues.contains(result)) {
      availableValues[result] = copied;
      copyRecomputes = true;
      continue;
    }
    copied.replaceAllUsesWith(available(result));
  }
  if (copyRecomputes) {
    copy->setAttr(SDDialect::kRecomputeAttrName, builder.getUnitAttr());
    for (OpOperand &operand : copy->getOpOperands())
      if (isForward(operand.get()))
        operand.set(available(operand.get()));
    ++numRecomputed;
  } else {
    copy->erase();
  }

  builder.setInsertionPointToEnd(block);
  for (auto [operand, cotangent] :
       llvm::zip_equal(op->getOperands(), operandCotangents))
    if (cotangent && active.contains(operand))
      accumulate(operand, cotangent);
  return success();
}

LogicalResult TrainStepBuilder::backward(Value lossValue, double seed) {
  inBackward = true;
  cotangents.clear();
  availableValues.clear();
  cotangents[lossValue] = splat(seed, lossValue.getType());
  // A parameter's gradient is complete once the backward pass has passed
  // the parameter's first use.
  DenseMap<Operation *, SmallVector<size_t>> completedAt;
  if (updatesInBackward()) {
    computeStepScalars();
    for (auto [n, param] : llvm::enumerate(params)) {
      Operation *first = nullptr;
      for (Operation *user : param.getUsers())
        if (forwardSet.contains(user) &&
            (!first || user->isBeforeInBlock(first)))
          first = user;
      if (first)
        completedAt[first].push_back(n);
    }
  }
  auto addGradient = [&](size_t n) {
    Value gradient = cotangents.lookup(params[n]);
    if (!gradient)
      return;
    gradients[n] =
        gradients[n] ? create<AddOp>(gradients[n], gradient) : gradient;
  };
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (llvm::any_of(op->getResults(),
                     [&](Value r) { return active.contains(r); }) &&
        failed(differentiateOp(op)))
      return failure();
    for (size_t n : completedAt.lookup(op)) {
      addGradient(n);
      if (!gradients[n])
        gradients[n] = splat(0.0, params[n].getType());
      updateParameter(n);
    }
  }
  if (!updatesInBackward())
    for (size_t n = 0; n < params.size(); ++n)
      addGradient(n);
  inBackward = false;
  return success();
}

/// Scales the gradients by min(1, max-grad-norm / global norm) (optax's
/// clip_by_global_norm).
void TrainStepBuilder::clipGradients() {
  Value sumSquares;
  for (Value g : gradients) {
    auto type = cast<RankedTensorType>(g.getType());
    auto dims = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    Value squares = create<ReduceSumOp>(create<MulOp>(g, g), dims);
    if (type.getElementType() != builder.getF32Type())
      squares = create<ConvertOp>(
          RankedTensorType::get({}, builder.getF32Type()), squares);
    sumSquares = sumSquares ? create<AddOp>(sumSquares, squares) : squares;
  }
  Value norm = create<SqrtOp>(sumSquares);
  Value limit = scalar(options.maxGradNorm);
  Value factor = create<DivOp>(limit, create<MaxOp>(norm, limit));
  for (Value &g : gradients) {
    auto type = cast<RankedTensorType>(g.getType());
    Value f = factor;
    if (type.getElementType() != builder.getF32Type())
      f = create<ConvertOp>(type.clone(ArrayRef<int64_t>{}), f);
    g = create<MulOp>(g, broadcastScalar(f, type));
  }
}

/// The step's scalars: t = step + 1, the bias corrections 1 − b^t and the
/// learning rate after linear warm-up.
void TrainStepBuilder::computeStepScalars() {
  Value t = create<AddOp>(stepCount, scalar(1.0));
  correction1 =
      create<SubOp>(scalar(1.0), create<PowOp>(scalar(options.beta1), t));
  correction2 =
      create<SubOp>(scalar(1.0), create<PowOp>(scalar(options.beta2), t));
  learningRate = scalar(options.learningRate);
  if (options.warmupSteps > 0) {
    Value ramp =
        create<DivOp>(t, scalar(static_cast<double>(options.warmupSteps)));
    learningRate =
        create<MulOp>(learningRate, create<MinOp>(ramp, scalar(1.0)));
  }
}

/// AdamW for parameter `n` (optax's adamw as MaxDiffusion configures it):
/// p' = p − lr_t·(m̂/(sqrt(v̂)+eps) + wd·p), m̂ = mu'/(1−b1^t),
/// v̂ = nu'/(1−b2^t).
void TrainStepBuilder::updateParameter(size_t n) {
  Value p = params[n];
  Type type = p.getType();
  auto tensorType = cast<RankedTensorType>(type);
  auto asParam = [&](Value scalarValue) {
    if (tensorType.getElementType() != builder.getF32Type())
      scalarValue = create<ConvertOp>(tensorType.clone(ArrayRef<int64_t>{}),
                                      scalarValue);
    return broadcastScalar(scalarValue, type);
  };
  Value g = gradients[n];
  Value m = create<AddOp>(create<MulOp>(splat(options.beta1, type), mu[n]),
                          create<MulOp>(splat(1.0 - options.beta1, type), g));
  Value v = create<AddOp>(
      create<MulOp>(splat(options.beta2, type), nu[n]),
      create<MulOp>(splat(1.0 - options.beta2, type), create<MulOp>(g, g)));
  Value mHat = create<DivOp>(m, asParam(correction1));
  Value vHat = create<DivOp>(v, asParam(correction2));
  Value direction = create<DivOp>(
      mHat, create<AddOp>(create<SqrtOp>(vHat), splat(options.epsilon, type)));
  if (options.weightDecay != 0)
    direction = create<AddOp>(
        direction, create<MulOp>(splat(options.weightDecay, type), p));
  newParams[n] = create<SubOp>(p, create<MulOp>(asParam(learningRate), direction));
  newMu[n] = m;
  newNu[n] = v;
}

FailureOr<func::FuncOp> TrainStepBuilder::build() {
  FunctionType lossType = loss.getFunctionType();
  if (lossType.getNumResults() != 1 ||
      lossType.getResult(0) != RankedTensorType::get({}, builder.getF32Type()))
    return loss.emitOpError("must return one tensor<f32> loss to be "
                            "differentiated, not ")
           << lossType.getResults();
  createFunction();
  for (auto [n, i] : llvm::enumerate(inputIndices)) {
    auto type = cast<RankedTensorType>(lossType.getInput(i));
    if (options.gradAccum > 1 && type.getRank() == 0)
      return emitError(loss.getLoc())
             << "grad-accum splits the batch, but input #" << i
             << " is a scalar";
  }
  if (paramIndices.empty())
    return emitError(loss.getLoc()) << "@" << loss.getSymName()
                                    << " has no #sd.param argument to train";
  gradients.assign(params.size(), Value());
  newParams.assign(params.size(), Value());
  newMu.assign(params.size(), Value());
  newNu.assign(params.size(), Value());
  Value lossSum;
  for (int64_t k = 0; k < options.gradAccum; ++k) {
    SmallVector<Value> micro;
    for (Value input : inputs)
      micro.push_back(microbatch(input, k));
    FailureOr<Value> lossValue = forward(micro);
    if (failed(lossValue))
      return failure();
    if (failed(backward(*lossValue, 1.0 / options.gradAccum)))
      return failure();
    lossSum = lossSum ? create<AddOp>(lossSum, *lossValue) : *lossValue;
  }
  Value lossValue = lossSum;
  if (options.gradAccum > 1)
    lossValue = create<MulOp>(lossSum, scalar(1.0 / options.gradAccum));
  // A parameter the loss does not use has a zero gradient.
  inBackward = true;
  for (size_t n = 0; n < gradients.size(); ++n)
    if (!gradients[n])
      gradients[n] = splat(0.0, params[n].getType());
  inBackward = false;

  SmallVector<Value> results = {lossValue};
  if (options.train) {
    // What the backward pass did not update yet: everything with
    // microbatches or clipping, unused parameters otherwise.
    inBackward = true;
    if (options.maxGradNorm > 0)
      clipGradients();
    if (!updatesInBackward())
      computeStepScalars();
    for (size_t n = 0; n < params.size(); ++n)
      if (!newParams[n])
        updateParameter(n);
    inBackward = false;
    llvm::append_range(results, newParams);
    llvm::append_range(results, newMu);
    llvm::append_range(results, newNu);
  } else {
    llvm::append_range(results, gradients);
  }
  func::ReturnOp::create(builder, loss.getLoc(), results);

  // What no result needs (cotangents of inputs, unused VJP parts) goes.
  Block &entry = step.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
    if (op.use_empty() && isPure(&op) && !isa<func::ReturnOp>(op))
      op.erase();
  return step;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class DifferentiatePass
    : public mlir::sd::impl::DifferentiateBase<DifferentiatePass> {
public:
  using DifferentiateBase::DifferentiateBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    DifferentiateBase::getDependentDialects(registry);
    registerVjpModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto loss = symbols.lookup<func::FuncOp>("loss");
    if (!loss || loss.isExternal()) {
      emitError(module.getLoc()) << "sd-differentiate needs a @loss function";
      return signalPassFailure();
    }
    if (mode != "train" && mode != "grad") {
      emitError(module.getLoc())
          << "unknown sd-differentiate mode '" << mode
          << "'; expected train or grad";
      return signalPassFailure();
    }
    if (gradAccum < 1) {
      emitError(module.getLoc()) << "grad-accum must be at least 1, not "
                                 << gradAccum.getValue();
      return signalPassFailure();
    }
    llvm::Expected<RematPolicy> policy =
        RematPolicy::parse(remat, namesSaved, namesOffloaded);
    if (!policy) {
      emitError(module.getLoc()) << llvm::toString(policy.takeError());
      return signalPassFailure();
    }

    Layers layers;
    if (failed(inlineLayers(loss, symbols, layers)) ||
        failed(checkNames(loss, *policy)))
      return signalPassFailure();

    StepOptions options{mode == "train", learningRate, beta1,   beta2,
                        epsilon,         weightDecay,  maxGradNorm,
                        warmupSteps,     gradAccum};
    TrainStepBuilder stepBuilder(loss, layers, *policy, options);
    if (failed(stepBuilder.build()))
      return signalPassFailure();
    numRecomputed = stepBuilder.numRecomputed;
    numOffloaded = stepBuilder.numOffloaded;

    // @loss and the layer functions are now part of the step.
    loss.erase();
    for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (func.isPrivate() && SymbolTable::symbolKnownUseEmpty(func, module))
        func.erase();
  }

private:
  /// CUSTOM's names must each name a value of the program.
  LogicalResult checkNames(func::FuncOp loss, const RematPolicy &policy) {
    if (policy.getKind() != RematPolicy::Kind::Custom)
      return success();
    llvm::StringSet<> present;
    loss.walk([&](Operation *op) {
      if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
        present.insert(name.getValue());
    });
    for (const llvm::StringSet<> *names :
         {&policy.getSavedNames(), &policy.getOffloadedNames()})
      for (const auto &entry : *names)
        if (!present.contains(entry.getKey()))
          return emitError(loss->getParentOp()->getLoc())
                 << "remat policy CUSTOM names '" << entry.getKey()
                 << "', but no value of @" << loss.getSymName()
                 << " is named so (sd.name)";
    return success();
  }
};

} // namespace
