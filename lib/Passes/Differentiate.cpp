//===- Differentiate.cpp - the gradient function by reverse-mode AD -------===//
//
// @loss(params, inputs) -> loss becomes @loss_grad(params, inputs) ->
// (loss, grads): the forward program (block calls inlined, each inlined
// call a *layer*) and the backward program built from each op's VJP
// (VjpOpInterface) in reverse order. The backward program uses forward
// values directly; sd-remat decides later what is kept. The structure the
// next passes need is recorded on attributes (Autodiff.h). Everything
// walks the one block in order; nothing recurses along use-def chains.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/SampleBlocks.h"
#include "sd/Autodiff/VjpModels.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Autodiff.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlir::sd {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::autodiff;

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

/// More ops than this once every call is inlined is an error (a call tree
/// that doubles at each level is small as a program, exponential inlined).
constexpr uint64_t kMaxInlinedOps = 10'000'000;

/// The calls in `func`, in order.
SmallVector<func::CallOp> callsIn(func::FuncOp func) {
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) { calls.push_back(call); });
  return calls;
}

/// Checks, before anything is inlined, that every function `root` reaches
/// has a body, that none of them calls itself directly or through others,
/// and that inlining them all gives at most kMaxInlinedOps ops. A
/// depth-first search with its own stack (a long chain of calls must not
/// overflow the thread's).
LogicalResult checkCallGraph(func::FuncOp root, SymbolTable &symbols) {
  struct Frame {
    func::FuncOp func;
    SmallVector<func::CallOp> calls;
    size_t next = 0;
  };
  DenseSet<Operation *> onStack;
  DenseMap<Operation *, uint64_t> inlinedOps;
  SmallVector<Frame> stack;
  auto push = [&](func::FuncOp func) {
    onStack.insert(func);
    stack.push_back({func, callsIn(func)});
  };
  push(root);
  while (!stack.empty()) {
    Frame &top = stack.back();
    if (top.next == top.calls.size()) {
      uint64_t ops = 0;
      top.func.walk([&](Operation *op) {
        if (op != top.func && !isa<func::CallOp, func::ReturnOp>(op))
          ++ops;
      });
      for (func::CallOp call : top.calls)
        ops = llvm::SaturatingAdd(
            ops, inlinedOps.lookup(symbols.lookup(call.getCallee())));
      inlinedOps[top.func] = ops;
      onStack.erase(top.func);
      stack.pop_back();
      continue;
    }
    func::CallOp call = top.calls[top.next++];
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return call.emitOpError("calls @")
             << call.getCallee() << ", which has no body to differentiate";
    if (onStack.contains(callee)) {
      std::string cycle;
      bool inCycle = false;
      for (Frame &frame : stack) {
        inCycle = inCycle || frame.func == callee;
        if (inCycle)
          cycle += "@" + frame.func.getName().str() + " -> ";
      }
      return call.emitOpError("makes @")
             << root.getName() << " recursive (" << cycle << "@"
             << callee.getName()
             << "); sd-differentiate inlines every call, so the program "
                "must not be recursive";
    }
    if (!inlinedOps.count(callee))
      push(callee);
  }
  uint64_t ops = inlinedOps.lookup(root);
  if (ops > kMaxInlinedOps)
    return root.emitOpError("would have ")
           << (ops == std::numeric_limits<uint64_t>::max()
                   ? std::string("more than 2^64")
                   : std::to_string(ops))
           << " ops once its calls are inlined; sd-differentiate takes at "
              "most "
           << kMaxInlinedOps;
  return success();
}

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
    // A call of the planner's sample program marks the ops it inlines, as
    // a call inside a marked block does (sd/Analysis/SampleBlocks.h).
    std::optional<SampleBlock> sample = sampleBlockOf(call.getLoc());
    if (auto place = call->getAttrOfType<DenseI64ArrayAttr>(
            SDDialect::kSampleBlockAttrName))
      sample = SampleBlock{place[0], place[1]};
    for (Operation &op : calleeBody.without_terminator()) {
      Operation *clone = builder.clone(op, mapping);
      if (sample)
        clone->walk([&](Operation *nested) {
          nested->setLoc(markSampleBlock(nested->getLoc(), *sample));
        });
      layers.of[clone] = layer;
      if (auto innerCall = dyn_cast<func::CallOp>(clone))
        inner.push_back(innerCall);
    }
    for (auto [result, returned] : llvm::zip_equal(
             call.getResults(), calleeBody.getTerminator()->getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(returned));
    call.erase();
    for (func::CallOp innerCall : llvm::reverse(inner))
      worklist.push_back({innerCall, layer});
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The gradient function
//===----------------------------------------------------------------------===//

class GradientBuilder {
public:
  GradientBuilder(func::FuncOp loss, const Layers &layers)
      : loss(loss), layers(layers), builder(loss.getContext()) {}

  FailureOr<func::FuncOp> build();

private:
  /// Creates an op of the backward program, in the current VJP group.
  template <typename OpTy, typename... Args> Value create(Args &&...args) {
    // At the location of the group's forward op: what is made for it
    // goes where it goes (the cost model's blocks, diagnostics).
    Location loc = group ? forwardOps[*group]->getLoc() : loss.getLoc();
    Operation *op = OpTy::create(builder, loc, std::forward<Args>(args)...);
    markBackward(op);
    return op->getResult(0);
  }
  void markBackward(Operation *op) {
    op->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
    if (group)
      op->setAttr(SDDialect::kVjpGroupAttrName,
                  builder.getI64IntegerAttr(*group));
  }

  void createFunction();
  Value forward();
  LogicalResult backward(Value lossValue);
  LogicalResult differentiateOp(Operation *op);
  void accumulate(Value value, Value cotangent);
  void markForward();

  func::FuncOp loss;
  const Layers &layers;
  OpBuilder builder;
  /// The VJP group of the ops being created (none: the seed, zeros).
  std::optional<int64_t> group;

  func::FuncOp grad;
  SmallVector<unsigned> paramIndices, inputIndices;
  SmallVector<Value> params, inputs;

  /// The forward clone of each loss op, in order, the values that depend
  /// on a parameter, and the cotangents.
  IRMapping forwardMap;
  SmallVector<Operation *> forwardOps;
  SmallVector<unsigned> forwardLayers;
  DenseSet<Value> active;
  DenseMap<Value, Value> cotangents;
};

void GradientBuilder::createFunction() {
  FunctionType lossType = loss.getFunctionType();
  for (unsigned i = 0, e = lossType.getNumInputs(); i < e; ++i) {
    if (isTrainedParameter(loss, i))
      paramIndices.push_back(i);
    else
      inputIndices.push_back(i);
  }
  // Parameters first, then inputs, each with its attributes; the results
  // are the loss and one gradient per parameter.
  SmallVector<Type> argTypes, resultTypes = {lossType.getResult(0)};
  SmallVector<DictionaryAttr> argAttrs;
  for (ArrayRef<unsigned> indices :
       {ArrayRef(paramIndices), ArrayRef(inputIndices)})
    for (unsigned i : indices) {
      argTypes.push_back(lossType.getInput(i));
      argAttrs.push_back(loss.getArgAttrDict(i));
    }
  for (unsigned i : paramIndices)
    resultTypes.push_back(lossType.getInput(i));

  builder.setInsertionPoint(loss);
  grad = func::FuncOp::create(
      builder, loss.getLoc(), kGradientFunctionName,
      FunctionType::get(loss.getContext(), argTypes, resultTypes));
  grad.setAllArgAttrs(argAttrs);
  if (auto batch = loss->getAttr(SDDialect::kDefaultBatchAttrName))
    grad->setAttr(SDDialect::kDefaultBatchAttrName, batch);
  Block *entry = grad.addEntryBlock();
  auto arguments = entry->getArguments();
  llvm::append_range(params, arguments.take_front(paramIndices.size()));
  llvm::append_range(inputs, arguments.drop_front(paramIndices.size()));
  builder.setInsertionPointToEnd(entry);
}

/// Clones @loss's body, remembering each op's layer; a result is active when an
/// operand is and it is a float.
Value GradientBuilder::forward() {
  Block &body = loss.getBody().front();
  for (auto [n, i] : llvm::enumerate(paramIndices)) {
    forwardMap.map(body.getArgument(i), params[n]);
    active.insert(params[n]);
  }
  for (auto [n, i] : llvm::enumerate(inputIndices))
    forwardMap.map(body.getArgument(i), inputs[n]);
  for (Operation &op : body.without_terminator()) {
    Operation *clone = builder.clone(op, forwardMap);
    forwardOps.push_back(clone);
    forwardLayers.push_back(layers.of.lookup(&op));
    if (llvm::any_of(clone->getOperands(),
                     [&](Value v) { return active.contains(v); }))
      for (Value result : clone->getResults())
        if (isa<FloatType>(getElementTypeOrSelf(result.getType())))
          active.insert(result);
  }
  return forwardMap.lookupOrDefault(body.getTerminator()->getOperand(0));
}

void GradientBuilder::accumulate(Value value, Value cotangent) {
  Value &sum = cotangents[value];
  sum = sum ? create<AddOp>(sum, cotangent) : cotangent;
}

LogicalResult GradientBuilder::differentiateOp(Operation *op) {
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

  // The VJP is built on a copy of the op placed in the backward program
  // (VjpOpInterface); the copy's results are then the forward results.
  Block *block = builder.getInsertionBlock();
  Operation *copy = builder.clone(*op);
  copy->setAttr(SDDialect::kBackwardAttrName, builder.getUnitAttr());
  SmallVector<Value> operandCotangents;
  if (failed(cast<VjpOpInterface>(copy).buildVjp(builder, resultCotangents,
                                                 operandCotangents)))
    return failure();
  for (Operation *it = copy->getNextNode(); it; it = it->getNextNode())
    markBackward(it);
  copy->replaceAllUsesWith(op->getResults());
  copy->erase();

  builder.setInsertionPointToEnd(block);
  for (auto [operand, cotangent] :
       llvm::zip_equal(op->getOperands(), operandCotangents))
    if (cotangent && active.contains(operand))
      accumulate(operand, cotangent);
  return success();
}

LogicalResult GradientBuilder::backward(Value lossValue) {
  cotangents[lossValue] =
      create<ConstantOp>(splatAttr(builder, 1.0, lossValue.getType()));
  for (auto [n, op] : llvm::enumerate(llvm::reverse(forwardOps))) {
    group = forwardOps.size() - 1 - n;
    if (llvm::any_of(op->getResults(),
                     [&](Value r) { return active.contains(r); }) &&
        failed(differentiateOp(op)))
      return failure();
  }
  group.reset();
  return success();
}

/// Numbers the forward ops (their VJP groups) and records their layers,
/// once the backward program is built: VJPs may copy the forward op's
/// attributes.
void GradientBuilder::markForward() {
  for (auto [n, op] : llvm::enumerate(forwardOps)) {
    op->setAttr(SDDialect::kVjpGroupAttrName, builder.getI64IntegerAttr(n));
    if (unsigned layer = forwardLayers[n])
      op->setAttr(SDDialect::kLayerAttrName, builder.getI64IntegerAttr(layer));
  }
  if (layers.names.size() > 1)
    grad->setAttr(SDDialect::kLayersAttrName,
                  builder.getArrayAttr(
                      SmallVector<Attribute>(llvm::drop_begin(layers.names))));
}

FailureOr<func::FuncOp> GradientBuilder::build() {
  FunctionType lossType = loss.getFunctionType();
  if (lossType.getNumResults() != 1 ||
      lossType.getResult(0) != RankedTensorType::get({}, builder.getF32Type()))
    return loss.emitOpError("must return one tensor<f32> loss to be "
                            "differentiated, not ")
           << lossType.getResults();
  createFunction();
  if (paramIndices.empty())
    return emitError(loss.getLoc())
           << "@" << loss.getSymName()
           << " has no #sd.param argument to train (every parameter is "
              "frozen or there is none)";
  Value lossValue = forward();
  if (failed(backward(lossValue)))
    return failure();
  // A parameter the loss does not use has a zero gradient.
  SmallVector<Value> results = {lossValue};
  for (Value param : params) {
    Value gradient = cotangents.lookup(param);
    if (!gradient)
      gradient = create<ConstantOp>(splatAttr(builder, 0.0, param.getType()));
    results.push_back(gradient);
  }
  func::ReturnOp::create(builder, loss.getLoc(), results);
  markForward();

  // What no result needs (cotangents of inputs, unused VJP parts) goes.
  eraseDeadOps(grad.getBody().front());
  return grad;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Erases the private functions that no other top-level op of `module`
/// reaches through calls or symbol references: the layer functions, now
/// inlined into the gradient, and their callees. One walk over the module's
/// symbol uses, so a chain of thousands of calls costs linear time (asking
/// each function whether the module still uses it walks the module once per
/// function). Nothing is erased when an op's uses cannot be known.
void eraseUnreachedPrivateFunctions(ModuleOp module) {
  SymbolTable symbols(module);
  DenseSet<Operation *> reached;
  SmallVector<Operation *> worklist;
  auto isPrivateFunction = [](Operation &op) {
    auto func = dyn_cast<func::FuncOp>(op);
    return func && func.isPrivate();
  };
  // Marks the private functions `from` refers to; false for unknown uses.
  auto reach = [&](Operation *from) {
    std::optional<SymbolTable::UseRange> uses =
        SymbolTable::getSymbolUses(from);
    if (!uses)
      return false;
    for (const SymbolTable::SymbolUse &use : *uses) {
      Operation *symbol = symbols.lookup(use.getSymbolRef().getRootReference());
      if (symbol && isPrivateFunction(*symbol) && reached.insert(symbol).second)
        worklist.push_back(symbol);
    }
    return true;
  };
  for (Operation &op : module.getBody()->getOperations())
    if (!isPrivateFunction(op) && !reach(&op))
      return;
  while (!worklist.empty())
    if (!reach(worklist.pop_back_val()))
      return;
  for (Operation &op :
       llvm::make_early_inc_range(module.getBody()->getOperations()))
    if (isPrivateFunction(op) && !reached.contains(&op))
      op.erase();
}

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
    Layers layers;
    if (failed(checkCallGraph(loss, symbols)) ||
        failed(inlineLayers(loss, symbols, layers)))
      return signalPassFailure();
    GradientBuilder gradientBuilder(loss, layers);
    if (failed(gradientBuilder.build()))
      return signalPassFailure();

    // @loss and the layer functions are now part of the gradient.
    loss.erase();
    eraseUnreachedPrivateFunctions(module);
  }
};

} // namespace
