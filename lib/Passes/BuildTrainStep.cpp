//===- BuildTrainStep.cpp - AdamW around the gradient function ------------===//
//
// @loss_grad(params, inputs) -> (loss, grads) becomes @train_step(params,
// mu, nu, inputs, step) -> (loss, params', mu', nu'): the gradient
// function's body once per microbatch (seeded with 1/K), the gradients
// summed, optionally clipped, and AdamW. Without microbatches or clipping
// each parameter is updated where its gradient is complete: after the VJP
// group of its first forward user (sd.vjp_group), as PyTorch's optimizer in
// backward, so that the gradient dies there.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Autodiff.h"
#include "sd/Passes/Passes.h"

#include <cmath>

#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/SaveAndRestore.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::sd {
#define GEN_PASS_DEF_BUILDTRAINSTEP
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::autodiff;

namespace {

/// Options of the pass, as the builder needs them.
struct StepOptions {
  double learningRate, beta1, beta2, epsilon, weightDecay, maxGradNorm;
  int64_t warmupSteps, gradAccum;
  double emaDecay, maxGradValue;
  bool emaWarmup;
  double emaInvGamma, emaPower;
  ::sd::LrSchedule lrSchedule;
  int64_t lrScheduleSteps;
  /// Parameters (by name) the weight decay skips.
  SmallVector<llvm::GlobPattern> noDecay;
  /// The values above reach the step as its #sd.input<hyperparameters>.
  bool hyperparameterInputs;
};

class TrainStepBuilder {
public:
  TrainStepBuilder(func::FuncOp grad, const StepOptions &options)
      : grad(grad), options(options), builder(grad.getContext()),
        loc(grad.getLoc()) {}

  FailureOr<func::FuncOp> build();

private:
  // Building blocks.
  template <typename OpTy, typename... Args> Value create(Args &&...args) {
    Operation *op = OpTy::create(builder, loc, std::forward<Args>(args)...);
    if (inBackward)
      op->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    return op->getResult(0);
  }
  Value splat(double value, Type type) {
    return create<ConstantOp>(splatAttr(builder, value, type));
  }
  Value scalar(double value) {
    return splat(value, RankedTensorType::get({}, builder.getF32Type()));
  }
  /// Hyperparameter `which` (of value `value`) as an f32 scalar: an element
  /// of the hyperparameter input, or a constant without one.
  Value hyper(Hyperparameter which, double value) {
    return hyperValues.empty() ? scalar(value)
                               : hyperValues[static_cast<size_t>(which)];
  }
  /// The same, broadcast to `type` (converted to its element type).
  Value hyperSplat(Hyperparameter which, double value, Type type) {
    if (hyperValues.empty())
      return splat(value, type);
    Value element = hyper(which, value);
    auto tensorType = cast<RankedTensorType>(type);
    if (tensorType.getElementType() != builder.getF32Type())
      element =
          create<ConvertOp>(tensorType.clone(ArrayRef<int64_t>{}), element);
    return broadcastScalar(element, type);
  }
  Value broadcastScalar(Value scalar, Type type);

  // Phases.
  LogicalResult analyze();
  void createFunction();
  void addStateArgs(SmallVectorImpl<Type> &types,
                    SmallVectorImpl<DictionaryAttr> &attrs);
  Value microbatch(Value input, int64_t index);
  Value cloneGradient(ArrayRef<Value> microInputs);
  void completeGradient(size_t n, Value gradient);
  void clipGradients();
  /// `gradient` clipped to [−max-grad-value, max-grad-value] (itself
  /// without max-grad-value).
  Value clipValue(Value gradient);
  void computeStepScalars();
  void computeEmaDecay();
  void updateParameter(size_t n);
  /// Whether each parameter is updated as soon as its gradient is complete
  /// (one microbatch, no clipping): the gradient dies there instead of
  /// living until the end of the backward pass.
  bool updatesInBackward() const {
    return options.gradAccum == 1 && options.maxGradNorm <= 0;
  }

  func::FuncOp grad;
  StepOptions options;
  OpBuilder builder;
  bool inBackward = false;
  /// Where the ops made now go: the step's, or while a parameter's are
  /// made (atParameter) its first forward user's, so that the planner's
  /// blocks (sd/Analysis/SampleBlocks.h) take their parameters' updates.
  Location loc;
  SmallVector<Location> paramLocs;
  llvm::SaveAndRestore<Location> atParameter(size_t n) {
    return {loc, paramLocs[n]};
  }

  // The gradient function: its parameters, its seed, the ops that make
  // the zero gradient of a parameter that gets none (made anew where the
  // step needs it), and per parameter the VJP group after which its
  // gradient is complete (the group of its first forward user).
  SmallVector<unsigned> paramIndices, frozenIndices, inputIndices;
  Operation *seed = nullptr;
  DenseSet<Operation *> zeroGradients;
  SmallVector<std::pair<int64_t, size_t>> completions;

  func::FuncOp step;
  SmallVector<Value> params, frozen, mu, nu, ema, inputs;
  /// Per parameter, whether AdamW's weight decay applies to it.
  SmallVector<bool> decays;
  Value stepCount;
  /// With hyperparameter-inputs: the input's elements, one f32 scalar per
  /// Hyperparameter.
  SmallVector<Value> hyperValues;
  /// Per parameter, the gradient summed over microbatches.
  SmallVector<Value> gradients;
  /// Whether `gradients` are already clipped by value (before the norm).
  bool valueClipped = false;
  /// AdamW's step scalars and, per parameter, its results (null until
  /// updated).
  Value correction1, correction2, learningRate;
  /// AdamW's hyperparameters as f32 scalars, made where the first update
  /// needs them and shared by the later ones (null until then).
  Value beta1, oneMinusBeta1, beta2, oneMinusBeta2, epsilon, weightDecay;
  /// The EMA's decay at this step (with ema-decay).
  Value emaDecayNow;
  SmallVector<Value> newParams, newMu, newNu, newEma;
  /// Optimizer states per parameter: mu and nu, and ema with ema-decay.
  int64_t numStates() const { return options.emaDecay > 0 ? 3 : 2; }
};

Value TrainStepBuilder::broadcastScalar(Value value, Type type) {
  auto tensorType = cast<RankedTensorType>(type);
  if (tensorType.getRank() == 0)
    return value;
  return create<BroadcastInDimOp>(tensorType, value, ArrayRef<int64_t>{});
}

/// Reads the gradient function's structure: parameters and inputs, the
/// seed, zero gradients, and where each gradient is complete.
LogicalResult TrainStepBuilder::analyze() {
  FunctionType type = grad.getFunctionType();
  for (unsigned i = 0, e = type.getNumInputs(); i < e; ++i) {
    if (isTrainedParameter(grad, i))
      paramIndices.push_back(i);
    else if (isFrozenParameter(grad, i))
      frozenIndices.push_back(i);
    else
      inputIndices.push_back(i);
  }
  TypeRange gradTypes = type.getResults().drop_front();
  if (paramIndices.empty() || type.getNumResults() != paramIndices.size() + 1 ||
      !llvm::equal(gradTypes, llvm::map_range(paramIndices, [&](unsigned i) {
                     return type.getInput(i);
                   })))
    return grad.emitOpError("must return the loss and one gradient per "
                            "trained #sd.param argument, not ")
           << type.getResults();
  for (auto i : inputIndices) {
    auto input = cast<RankedTensorType>(type.getInput(i));
    if (options.gradAccum > 1 && input.getRank() == 0)
      return emitError(grad.getLoc())
             << "grad-accum splits the batch, but input #" << i
             << " is a scalar";
  }
  Block &body = grad.getBody().front();
  auto backward =
      llvm::find_if(body, [](Operation &op) { return isBackward(&op); });
  if (backward == body.end() || !isa<ConstantOp>(*backward))
    return grad.emitOpError("has no seed: run sd-differentiate to make it");
  seed = &*backward;
  // A gradient made outside every VJP group is a parameter's zero.
  for (Value gradient : body.getTerminator()->getOperands().drop_front()) {
    Operation *def = gradient.getDefiningOp();
    if (def && def != seed && isBackward(def) && !getVjpGroup(def))
      zeroGradients.insert(def);
  }
  paramLocs.assign(paramIndices.size(), grad.getLoc());
  for (auto [n, i] : llvm::enumerate(paramIndices)) {
    Operation *first = nullptr;
    for (Operation *user : body.getArgument(i).getUsers())
      if (!isBackward(user) && !isa<func::ReturnOp>(user) &&
          (!first || user->isBeforeInBlock(first)))
        first = user;
    if (!first)
      continue;
    std::optional<int64_t> group = getVjpGroup(first);
    if (!group)
      return first->emitOpError("has no sd.vjp_group: run sd-differentiate "
                                "to make the gradient function");
    completions.push_back({*group, n});
    paramLocs[n] = first->getLoc();
  }
  for (unsigned i : paramIndices) {
    StringRef name =
        grad.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName)
            .getName()
            .getValue();
    decays.push_back(
        llvm::none_of(options.noDecay, [&](const llvm::GlobPattern &pattern) {
          return pattern.match(name);
        }));
  }
  // Updated in the order the backward program completes the gradients.
  llvm::stable_sort(completions, [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  return success();
}

/// Appends the optimizer state arguments: mu then nu, one per parameter,
/// with the parameter's attributes and role #sd.optimizer_state.
void TrainStepBuilder::addStateArgs(SmallVectorImpl<Type> &types,
                                    SmallVectorImpl<DictionaryAttr> &attrs) {
  MLIRContext *context = grad.getContext();
  SmallVector<MomentKind> kinds = {MomentKind::mu, MomentKind::nu};
  if (options.emaDecay > 0)
    kinds.push_back(MomentKind::ema);
  for (MomentKind kind : kinds)
    for (unsigned i : paramIndices) {
      NamedAttrList stateAttrs(grad.getArgAttrDict(i));
      auto param =
          grad.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
      stateAttrs.set(SDDialect::kRoleAttrName,
                     OptimizerStateAttr::get(context, param.getName(), kind));
      types.push_back(grad.getFunctionType().getInput(i));
      attrs.push_back(stateAttrs.getDictionary(context));
    }
}

void TrainStepBuilder::createFunction() {
  MLIRContext *context = grad.getContext();
  FunctionType gradType = grad.getFunctionType();
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  // Trained parameters, frozen ones (read, never written), then the state.
  for (ArrayRef<unsigned> indices :
       {ArrayRef(paramIndices), ArrayRef(frozenIndices)})
    for (unsigned i : indices) {
      argTypes.push_back(gradType.getInput(i));
      argAttrs.push_back(grad.getArgAttrDict(i));
    }
  addStateArgs(argTypes, argAttrs);
  // With microbatches, inputs hold the whole batch: K microbatches' worth.
  for (unsigned i : inputIndices) {
    auto type = cast<RankedTensorType>(gradType.getInput(i));
    if (options.gradAccum > 1 && type.getRank() > 0) {
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= options.gradAccum;
      type = type.clone(shape);
    }
    argTypes.push_back(type);
    argAttrs.push_back(grad.getArgAttrDict(i));
  }
  argTypes.push_back(RankedTensorType::get({}, builder.getF32Type()));
  NamedAttrList stepAttrs;
  stepAttrs.set(SDDialect::kRoleAttrName,
                InputAttr::get(context, InputKind::step));
  argAttrs.push_back(stepAttrs.getDictionary(context));
  if (options.hyperparameterInputs) {
    argTypes.push_back(RankedTensorType::get(
        {static_cast<int64_t>(Hyperparameter::Count)}, builder.getF32Type()));
    NamedAttrList hyperAttrs;
    hyperAttrs.set(SDDialect::kRoleAttrName,
                   InputAttr::get(context, InputKind::hyperparameters));
    argAttrs.push_back(hyperAttrs.getDictionary(context));
  }

  // The loss, then new parameters, mu and nu: each the type of its
  // parameter, with its sharding where it has one, and written in place of
  // the old one (donated).
  SmallVector<Type> resultTypes = {gradType.getResult(0)};
  for (int64_t c = 0; c < 1 + numStates(); ++c)
    llvm::append_range(resultTypes, gradType.getResults().drop_front());
  builder.setInsertionPoint(grad);
  step =
      func::FuncOp::create(builder, grad.getLoc(), "train_step",
                           FunctionType::get(context, argTypes, resultTypes));
  step.setAllArgAttrs(argAttrs);
  if (auto batch = grad->getAttr(SDDialect::kDefaultBatchAttrName))
    step->setAttr(SDDialect::kDefaultBatchAttrName, batch);
  // All result attributes at once: setResultAttr per result would rebuild
  // the whole array each time, quadratic in the parameter count.
  size_t numParams = paramIndices.size(), numFrozen = frozenIndices.size();
  SmallVector<DictionaryAttr> resultAttrs = {DictionaryAttr::get(context, {})};
  for (int64_t c = 0; c < 1 + numStates(); ++c)
    for (auto [n, i] : llvm::enumerate(paramIndices)) {
      NamedAttrList attrs;
      if (Attribute sharding = grad.getArgAttr(i, SDDialect::kShardingAttrName))
        attrs.append(SDDialect::kShardingAttrName, sharding);
      int64_t donated = c * numParams + n + (c > 0 ? numFrozen : 0);
      attrs.append(SDDialect::kAliasesAttrName,
                   builder.getI64IntegerAttr(donated));
      resultAttrs.push_back(attrs.getDictionary(context));
    }
  step.setAllResultAttrs(resultAttrs);

  Block *entry = step.addEntryBlock();
  auto args = entry->getArguments();
  llvm::append_range(params, args.take_front(numParams));
  llvm::append_range(frozen, args.slice(numParams, numFrozen));
  auto states = args.drop_front(numParams + numFrozen);
  llvm::append_range(mu, states.take_front(numParams));
  llvm::append_range(nu, states.slice(numParams, numParams));
  if (options.emaDecay > 0)
    llvm::append_range(ema, states.slice(2 * numParams, numParams));
  llvm::append_range(
      inputs, states.slice(numStates() * numParams, inputIndices.size()));
  builder.setInsertionPointToEnd(entry);
  if (!options.hyperparameterInputs) {
    stepCount = args.back();
    return;
  }
  stepCount = args[args.size() - 2];
  // One scalar per element (what the step does not use is erased at the
  // end).
  Value all = args.back();
  auto scalarType = RankedTensorType::get({}, builder.getF32Type());
  for (int64_t k = 0; k < static_cast<int64_t>(Hyperparameter::Count); ++k) {
    Value one = create<SliceOp>(all, ArrayRef<int64_t>{k},
                                ArrayRef<int64_t>{k + 1}, ArrayRef<int64_t>{1});
    hyperValues.push_back(create<ReshapeOp>(scalarType, one));
  }
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
  SmallVector<int64_t> start(split.size(), 0), limit(split),
      strides(split.size(), 1);
  start[1] = index;
  limit[1] = index + 1;
  Value one = create<SliceOp>(grouped, start, limit, strides);
  SmallVector<int64_t> shape = {split[0]};
  llvm::append_range(shape, type.getShape().drop_front());
  return create<ReshapeOp>(type.clone(shape), one);
}

/// Parameter `n`'s gradient of one microbatch is complete: summed into
/// the step's and, where the step updates in backward, applied.
void TrainStepBuilder::completeGradient(size_t n, Value gradient) {
  auto at = atParameter(n);
  if (gradient && gradients[n]) {
    // The sum across microbatches: the gradient accumulator, for the
    // memory report.
    Value sum = create<AddOp>(gradients[n], gradient);
    sum.getDefiningOp()->setAttr(SDDialect::kGradientSumAttrName,
                                 builder.getUnitAttr());
    gradients[n] = sum;
  } else if (gradient) {
    gradients[n] = gradient;
  }
  if (!updatesInBackward())
    return;
  if (!gradients[n])
    gradients[n] = splat(0.0, params[n].getType());
  updateParameter(n);
}

/// The gradient function's body for one microbatch, seeded with 1/K,
/// without the markers of its structure; returns the loss. Parameters are
/// updated where their gradients are complete (updatesInBackward).
Value TrainStepBuilder::cloneGradient(ArrayRef<Value> microInputs) {
  Block &body = grad.getBody().front();
  IRMapping mapping;
  for (auto [n, i] : llvm::enumerate(paramIndices))
    mapping.map(body.getArgument(i), params[n]);
  for (auto [n, i] : llvm::enumerate(frozenIndices))
    mapping.map(body.getArgument(i), frozen[n]);
  for (auto [n, i] : llvm::enumerate(inputIndices))
    mapping.map(body.getArgument(i), microInputs[n]);
  Operation *terminator = body.getTerminator();
  auto gradientOf = [&](size_t n) {
    Value gradient = terminator->getOperand(1 + n);
    Operation *def = gradient.getDefiningOp();
    return def && zeroGradients.contains(def)
               ? Value()
               : mapping.lookupOrDefault(gradient);
  };
  // The gradients complete after the VJP group of the parameter's first
  // forward user, before any op of an earlier group.
  auto *pending = completions.begin();
  auto completeUntil = [&](std::optional<int64_t> group) {
    for (; pending != completions.end() && (!group || pending->first > *group);
         ++pending)
      if (updatesInBackward())
        completeGradient(pending->second, gradientOf(pending->second));
  };
  for (Operation &op : body.without_terminator()) {
    if (&op == seed) {
      inBackward = true;
      mapping.map(op.getResult(0),
                  splat(1.0 / options.gradAccum, op.getResult(0).getType()));
      if (updatesInBackward())
        computeStepScalars();
      continue;
    }
    if (zeroGradients.contains(&op))
      continue;
    if (isBackward(&op))
      completeUntil(getVjpGroup(&op));
    Operation *clone = builder.clone(op, mapping);
    clone->removeAttr(SDDialect::kVjpGroupAttrName);
    clone->removeAttr(SDDialect::kLayerAttrName);
  }
  completeUntil(std::nullopt);
  if (!updatesInBackward())
    for (size_t n = 0; n < params.size(); ++n)
      completeGradient(n, gradientOf(n));
  inBackward = false;
  return mapping.lookupOrDefault(terminator->getOperand(0));
}

Value TrainStepBuilder::clipValue(Value gradient) {
  if (options.maxGradValue <= 0)
    return gradient;
  Type type = gradient.getType();
  Value low =
      hyperSplat(Hyperparameter::NegMaxGradValue, -options.maxGradValue, type);
  Value raised = create<MaxOp>(gradient, low);
  Value high =
      hyperSplat(Hyperparameter::MaxGradValue, options.maxGradValue, type);
  return create<MinOp>(raised, high);
}

/// Scales the gradients by min(1, max-grad-norm / global norm) (optax's
/// clip_by_global_norm).
void TrainStepBuilder::clipGradients() {
  Value sumSquares;
  for (auto [n, g] : llvm::enumerate(gradients)) {
    auto at = atParameter(n);
    auto type = cast<RankedTensorType>(g.getType());
    auto dims = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    Value squares = create<ReduceSumOp>(create<MulOp>(g, g), dims);
    if (type.getElementType() != builder.getF32Type())
      squares = create<ConvertOp>(
          RankedTensorType::get({}, builder.getF32Type()), squares);
    sumSquares = sumSquares ? create<AddOp>(sumSquares, squares) : squares;
  }
  Value norm = create<SqrtOp>(sumSquares);
  Value limit = hyper(Hyperparameter::MaxGradNorm, options.maxGradNorm);
  Value factor = create<DivOp>(limit, create<MaxOp>(norm, limit));
  for (auto [n, g] : llvm::enumerate(gradients)) {
    auto at = atParameter(n);
    auto type = cast<RankedTensorType>(g.getType());
    Value f = factor;
    if (type.getElementType() != builder.getF32Type())
      f = create<ConvertOp>(type.clone(ArrayRef<int64_t>{}), f);
    g = create<MulOp>(g, broadcastScalar(f, type));
  }
}

/// The step's scalars: t = step + 1, the bias corrections 1 − b^t and the
/// learning rate after linear warm-up.
/// diffusers' EMAModel.get_decay at s = the step's count of earlier steps:
/// min(d, (1 + s)/(10 + s)), or 1 − (1 + s/inv_gamma)^−power with
/// ema-warmup, times min(s, 1) (0 at the first step).
void TrainStepBuilder::computeEmaDecay() {
  Value one = scalar(1.0);
  Value warm;
  if (options.emaWarmup) {
    Value invGamma = hyper(Hyperparameter::EmaInvGamma, options.emaInvGamma);
    Value base = create<AddOp>(one, create<DivOp>(stepCount, invGamma));
    Value exponent = hyper(Hyperparameter::NegEmaPower, -options.emaPower);
    warm = create<SubOp>(one, create<PowOp>(base, exponent));
  } else {
    Value numerator = create<AddOp>(one, stepCount);
    Value ten = scalar(10.0);
    warm = create<DivOp>(numerator, create<AddOp>(ten, stepCount));
  }
  Value capped =
      create<MinOp>(warm, hyper(Hyperparameter::EmaDecay, options.emaDecay));
  emaDecayNow = create<MulOp>(capped, create<MinOp>(stepCount, one));
}

void TrainStepBuilder::computeStepScalars() {
  Value t = create<AddOp>(stepCount, scalar(1.0));
  correction1 = create<SubOp>(
      scalar(1.0),
      create<PowOp>(hyper(Hyperparameter::Beta1, options.beta1), t));
  correction2 = create<SubOp>(
      scalar(1.0),
      create<PowOp>(hyper(Hyperparameter::Beta2, options.beta2), t));
  if (options.emaDecay > 0)
    computeEmaDecay();
  learningRate = hyper(Hyperparameter::LearningRate, options.learningRate);
  if (options.warmupSteps > 0) {
    Value ramp =
        create<DivOp>(t, hyper(Hyperparameter::WarmupSteps,
                               static_cast<double>(options.warmupSteps)));
    learningRate =
        create<MulOp>(learningRate, create<MinOp>(ramp, scalar(1.0)));
  }
  if (options.lrSchedule == ::sd::LrSchedule::Constant)
    return;
  // The decay's progress p = clamp((step − W) / (S − W), 0, 1), counting
  // updates from 0 as optax does.
  // (Each op's operands are made first, one statement each, so that the
  // program's order does not depend on the C++ compiler's.)
  double warmup = static_cast<double>(options.warmupSteps);
  double span = static_cast<double>(options.lrScheduleSteps) - warmup;
  Value warmupSteps = hyper(Hyperparameter::WarmupSteps, warmup);
  Value since = create<SubOp>(stepCount, warmupSteps);
  Value spanSteps = hyper(Hyperparameter::DecaySteps, span);
  Value progress = create<DivOp>(since, spanSteps);
  Value zero = scalar(0.0);
  progress = create<MaxOp>(progress, zero);
  Value one = scalar(1.0);
  progress = create<MinOp>(progress, one);
  Value decay;
  if (options.lrSchedule == ::sd::LrSchedule::Linear) {
    decay = create<SubOp>(one, progress);
  } else {
    Value pi = scalar(M_PI);
    Value cosine = create<CosOp>(create<MulOp>(progress, pi));
    Value half = scalar(0.5);
    decay = create<MulOp>(half, create<AddOp>(one, cosine));
  }
  learningRate = create<MulOp>(learningRate, decay);
}

/// AdamW for parameter `n` (optax's adamw as MaxDiffusion configures it):
/// p' = p − lr_t·(m̂/(sqrt(v̂)+eps) + wd·p), m̂ = mu'/(1−b1^t),
/// v̂ = nu'/(1−b2^t).
void TrainStepBuilder::updateParameter(size_t n) {
  auto at = atParameter(n);
  Value p = params[n];
  Type type = p.getType();
  auto tensorType = cast<RankedTensorType>(type);
  auto asParam = [&](Value scalarValue) {
    if (tensorType.getElementType() != builder.getF32Type())
      scalarValue =
          create<ConvertOp>(tensorType.clone(ArrayRef<int64_t>{}), scalarValue);
    return broadcastScalar(scalarValue, type);
  };
  Value g = valueClipped ? gradients[n] : clipValue(gradients[n]);
  // One op: the planner prices, propagates and partitions each update
  // once; sd-lower-to-openmp decomposes it.
  auto shared = [&](Value &slot, Hyperparameter which, double value) {
    if (!slot)
      slot = hyper(which, value);
    return slot;
  };
  Value b1 = shared(beta1, Hyperparameter::Beta1, options.beta1);
  Value oneMinusB1 =
      shared(oneMinusBeta1, Hyperparameter::OneMinusBeta1, 1.0 - options.beta1);
  Value b2 = shared(beta2, Hyperparameter::Beta2, options.beta2);
  Value oneMinusB2 =
      shared(oneMinusBeta2, Hyperparameter::OneMinusBeta2, 1.0 - options.beta2);
  Value eps = shared(epsilon, Hyperparameter::Epsilon, options.epsilon);
  Value wd;
  if (options.weightDecay != 0 && decays[n])
    wd = shared(weightDecay, Hyperparameter::WeightDecay, options.weightDecay);
  auto update = AdamWOp::create(builder, loc, p, g, mu[n], nu[n], learningRate,
                                correction1, correction2, b1, oneMinusB1, b2,
                                oneMinusB2, eps, wd);
  if (inBackward)
    update->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
  newParams[n] = update.getNewParam();
  newMu[n] = update.getNewMu();
  newNu[n] = update.getNewNu();
  if (options.emaDecay > 0) {
    Value keep = asParam(emaDecayNow);
    Value take = asParam(create<SubOp>(scalar(1.0), emaDecayNow));
    newEma[n] = create<AddOp>(create<MulOp>(keep, ema[n]),
                              create<MulOp>(take, newParams[n]));
  }
}

FailureOr<func::FuncOp> TrainStepBuilder::build() {
  if (failed(analyze()))
    return failure();
  createFunction();
  size_t numParams = params.size();
  gradients.assign(numParams, Value());
  newParams.assign(numParams, Value());
  newMu.assign(numParams, Value());
  newNu.assign(numParams, Value());
  newEma.assign(numParams, Value());
  Value lossSum;
  for (int64_t k = 0; k < options.gradAccum; ++k) {
    SmallVector<Value> micro;
    for (Value input : inputs)
      micro.push_back(microbatch(input, k));
    Value lossValue = cloneGradient(micro);
    lossSum = lossSum ? create<AddOp>(lossSum, lossValue) : lossValue;
  }
  Value lossValue = lossSum;
  if (options.gradAccum > 1)
    lossValue = create<MulOp>(lossSum, scalar(1.0 / options.gradAccum));

  // What the backward pass did not update yet: everything with
  // microbatches or clipping, unused parameters otherwise. A parameter the
  // loss does not use has a zero gradient.
  inBackward = true;
  for (size_t n = 0; n < numParams; ++n)
    if (!gradients[n]) {
      auto at = atParameter(n);
      gradients[n] = splat(0.0, params[n].getType());
    }
  if (options.maxGradNorm > 0) {
    // Values first, then the norm of what is left (optax's chain).
    for (auto [n, gradient] : llvm::enumerate(gradients)) {
      auto at = atParameter(n);
      gradient = clipValue(gradient);
    }
    valueClipped = true;
    clipGradients();
  }
  if (!updatesInBackward())
    computeStepScalars();
  for (size_t n = 0; n < numParams; ++n)
    if (!newParams[n])
      updateParameter(n);
  inBackward = false;
  SmallVector<Value> results = {lossValue};
  llvm::append_range(results, newParams);
  llvm::append_range(results, newMu);
  llvm::append_range(results, newNu);
  if (options.emaDecay > 0)
    llvm::append_range(results, newEma);
  func::ReturnOp::create(builder, grad.getLoc(), results);

  // What no result needs (microbatches of unused inputs) goes.
  eraseDeadOps(step.getBody().front());
  return step;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class BuildTrainStepPass
    : public mlir::sd::impl::BuildTrainStepBase<BuildTrainStepPass> {
public:
  using BuildTrainStepBase::BuildTrainStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grad = SymbolTable(module).lookup<func::FuncOp>(kGradientFunctionName);
    if (!grad || grad.isExternal()) {
      emitError(module.getLoc())
          << "sd-build-train-step needs a @" << kGradientFunctionName
          << " function (run sd-differentiate first)";
      return signalPassFailure();
    }
    if (gradAccum < 1) {
      emitError(module.getLoc())
          << "grad-accum must be at least 1, not " << gradAccum.getValue();
      return signalPassFailure();
    }
    if (!(emaDecay >= 0 && emaDecay < 1)) {
      emitError(module.getLoc())
          << "ema-decay must be in [0, 1), not " << emaDecay.getValue();
      return signalPassFailure();
    }
    if (lrSchedule != ::sd::LrSchedule::Constant &&
        lrScheduleSteps <= warmupSteps) {
      emitError(module.getLoc())
          << "lr-schedule=" << ::sd::lrScheduleName(lrSchedule)
          << " decays over lr-schedule-steps, which must be more than the "
             "warm-up's "
          << warmupSteps.getValue() << ", not " << lrScheduleSteps.getValue();
      return signalPassFailure();
    }
    if (emaWarmup && !(emaInvGamma > 0 && emaPower > 0)) {
      emitError(module.getLoc())
          << "ema-inv-gamma and ema-power must be positive, not "
          << emaInvGamma.getValue() << " and " << emaPower.getValue();
      return signalPassFailure();
    }
    if (!(maxGradValue >= 0)) {
      emitError(module.getLoc()) << "max-grad-value must not be negative, not "
                                 << maxGradValue.getValue();
      return signalPassFailure();
    }
    StepOptions options{learningRate,
                        beta1,
                        beta2,
                        epsilon,
                        weightDecay,
                        maxGradNorm,
                        warmupSteps,
                        gradAccum,
                        emaDecay,
                        maxGradValue,
                        emaWarmup,
                        emaInvGamma,
                        emaPower,
                        lrSchedule,
                        lrScheduleSteps,
                        {},
                        hyperparameterInputs};
    for (const std::string &text : noDecay) {
      llvm::Expected<llvm::GlobPattern> pattern =
          llvm::GlobPattern::create(text);
      if (!pattern) {
        emitError(module.getLoc())
            << "no-decay pattern '" << text
            << "' is not a glob pattern: " << toString(pattern.takeError());
        return signalPassFailure();
      }
      options.noDecay.push_back(std::move(*pattern));
    }
    TrainStepBuilder stepBuilder(grad, options);
    if (failed(stepBuilder.build()))
      return signalPassFailure();
    grad.erase();
  }
};

} // namespace
