//===- ApplyPrecision.cpp - mixed precision as explicit converts ----------===//
//
// Makes MaxDiffusion's weights_dtype and activations_dtype explicit (see the
// pass description in Passes.td): the parameters' casts before their first
// uses, and every value that depends on a parameter retyped to bf16, op by
// op in program order through calls (iteratively, as sd-specialize-batch
// walks them), with converts where an f32 value meets a bf16 one.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/SampleBlocks.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::sd {
#define GEN_PASS_DEF_APPLYPRECISION
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

static bool isFloatTensor(Type type, bool bf16) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return false;
  Type element = tensor.getElementType();
  return bf16 ? element.isBF16() : element.isF32();
}

/// `type` with element type `element`.
static Type withElement(Type type, Type element) {
  return cast<RankedTensorType>(type).clone(element);
}

namespace {
/// What the pass did, for its remark.
struct Counts {
  int64_t cast = 0, lowered = 0, kept = 0, converts = 0;
};

class Lowering {
public:
  Lowering(ModuleOp module, Counts &counts)
      : symbols(module), counts(counts),
        bf16(BFloat16Type::get(module.getContext())),
        f32(Float32Type::get(module.getContext())) {}

  /// Retypes the values of `func` that depend on a bf16 value (after its
  /// parameters' casts), and those of the functions it calls.
  LogicalResult lower(func::FuncOp func) {
    done.insert(func);
    stack.push_back({func, func.getBody().front().begin()});
    while (!stack.empty()) {
      Frame &frame = stack.back();
      Block &body = frame.func.getBody().front();
      if (frame.next == body.end()) {
        finish(frame.func);
        stack.pop_back();
        continue;
      }
      Operation *op = &*frame.next;
      if (auto call = dyn_cast<func::CallOp>(op)) {
        bool entered = false;
        if (failed(enterCallee(call, entered)))
          return failure();
        if (entered)
          continue;
      } else if (!op->hasTrait<OpTrait::IsTerminator>()) {
        lowerOp(op);
      }
      ++stack.back().next;
    }
    return success();
  }

  /// A convert of `value` to `element` before `op`.
  Value convert(OpBuilder &builder, Location loc, Value value, Type element) {
    ++counts.converts;
    return ConvertOp::create(builder, loc,
                             withElement(value.getType(), element), value);
  }

private:
  struct Frame {
    func::FuncOp func;
    Block::iterator next;
  };

  /// A call: its callee is lowered with the call's operand types first (the
  /// call is visited again after, `entered`), then the call takes the
  /// callee's result types.
  LogicalResult enterCallee(func::CallOp call, bool &entered) {
    entered = false;
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return call.emitOpError("calls @")
             << call.getCallee() << ", which sd-apply-precision cannot see";
    if (!done.contains(callee)) {
      done.insert(callee);
      Block &entry = callee.getBody().front();
      for (auto [arg, type] :
           llvm::zip(entry.getArguments(), call.getOperandTypes()))
        arg.setType(type);
      stack.push_back({callee, entry.begin()});
      entered = true;
      return success();
    }
    if (TypeRange(callee.getArgumentTypes()) != call.getOperandTypes())
      return call.emitOpError("calls @")
             << call.getCallee()
             << " with other element types than an earlier call; "
                "sd-apply-precision gives a block function one signature";
    for (auto [result, type] :
         llvm::zip(call.getResults(), callee.getResultTypes()))
      result.setType(type);
    return success();
  }

  /// One op: computed in bf16 when an operand is bf16; the loss in f32.
  void lowerOp(Operation *op) {
    bool low = llvm::any_of(op->getOperandTypes(),
                            [](Type t) { return isFloatTensor(t, true); });
    if (!low) {
      if (llvm::any_of(op->getResultTypes(),
                       [](Type t) { return isFloatTensor(t, false); }))
        ++counts.kept;
      return;
    }
    OpBuilder builder(op);
    // The loss is f32 from f32 operands: MaxDiffusion casts the prediction
    // to float32 before the squared error.
    bool f32Op = isa<MseLossOp>(op);
    Type from = f32Op ? bf16 : f32, to = f32Op ? f32 : bf16;
    for (OpOperand &operand : op->getOpOperands())
      if (isFloatTensor(operand.get().getType(), from == bf16))
        operand.set(convert(builder, op->getLoc(), operand.get(), to));
    if (f32Op)
      return;
    ++counts.lowered;
    SmallVector<Type> inferred;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op);
        infer && succeeded(infer.inferReturnTypes(
                     op->getContext(), op->getLoc(), op->getOperands(),
                     op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                     op->getRegions(), inferred))) {
      for (auto [result, type] : llvm::zip(op->getResults(), inferred))
        result.setType(type);
      return;
    }
    for (OpResult result : op->getResults())
      if (isFloatTensor(result.getType(), false))
        result.setType(withElement(result.getType(), bf16));
  }

  /// A block function's type: its arguments' and what it returns.
  void finish(func::FuncOp func) {
    Block &entry = func.getBody().front();
    SmallVector<Type> results;
    if (auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator()))
      llvm::append_range(results, ret.getOperandTypes());
    // An entry keeps its declared result types (the runtime's signature):
    // a result computed in bf16 is widened, exactly.
    if (stack.size() == 1) {
      auto ret = cast<func::ReturnOp>(entry.getTerminator());
      OpBuilder builder(ret);
      for (auto [operand, declared] :
           llvm::zip(ret->getOpOperands(), func.getResultTypes()))
        if (operand.get().getType() != declared)
          operand.set(
              convert(builder, ret.getLoc(), operand.get(),
                      cast<RankedTensorType>(declared).getElementType()));
      return;
    }
    func.setFunctionType(FunctionType::get(func.getContext(),
                                           entry.getArgumentTypes(), results));
  }

  SymbolTable symbols;
  Counts &counts;
  Type bf16, f32;
  SmallVector<Frame> stack;
  llvm::DenseSet<Operation *> done;
};

struct ApplyPrecisionPass
    : public mlir::sd::impl::ApplyPrecisionBase<ApplyPrecisionPass> {
  using ApplyPrecisionBase::ApplyPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    bool lowWeights = weightsDtype == ::sd::DType::BFloat16;
    bool lowActivations = activationsDtype == ::sd::DType::BFloat16;
    if (!lowWeights && !lowActivations)
      return;
    llvm::DenseSet<StringAttr> called;
    module.walk([&](func::CallOp call) {
      called.insert(call.getCalleeAttr().getAttr());
    });
    Counts counts;
    Lowering lowering(module, counts);
    Type bf16 = BFloat16Type::get(&getContext());
    Type f32 = Float32Type::get(&getContext());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || called.contains(func.getSymNameAttr()))
        continue;
      Counts before = counts;
      Block &entry = func.getBody().front();
      for (BlockArgument arg : func.getArguments()) {
        if (!func.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                              SDDialect::kRoleAttrName) ||
            !isFloatTensor(arg.getType(), false))
          continue;
        // Cast right before the parameter's first use, not at the entry:
        // sd-differentiate gives the cast's VJP (the gradient widened back
        // to f32) the group after that use's, so the gradient completes,
        // and sd-build-train-step updates the parameter, where that layer's
        // backward ends; cast at the entry, every update waited for the end
        // of the backward, with every gradient alive until then.
        Operation *first = nullptr;
        for (Operation *user : arg.getUsers())
          if (Operation *op = entry.findAncestorOpInBlock(*user))
            if (!first || op->isBeforeInBlock(first))
              first = op;
        if (!first)
          continue;
        OpBuilder builder(first);
        // A cast for a call of the planner's sample goes with that block
        // (sd.sample_block), as the ops inlined from it do: its VJP and the
        // parameter's update then take the mark too.
        Location loc = arg.getLoc();
        if (auto mark = first->getAttrOfType<DenseI64ArrayAttr>(
                SDDialect::kSampleBlockAttrName);
            mark && mark.size() == 2)
          loc = markSampleBlock(loc, {mark[0], mark[1]});
        // The compute copy: bf16 when either dtype is; widened back when
        // only the weights are.
        Value copy = lowering.convert(builder, loc, arg, bf16);
        Operation *cast = copy.getDefiningOp();
        if (!lowActivations)
          copy = lowering.convert(builder, loc, copy, f32);
        arg.replaceAllUsesExcept(copy, cast);
        ++counts.cast;
      }
      if (lowActivations && failed(lowering.lower(func)))
        return signalPassFailure();
      numCast += counts.cast - before.cast;
      numLowered += counts.lowered - before.lowered;
      InFlightDiagnostic remark = emitRemark(func.getLoc());
      remark << "mixed precision: weights " << ::sd::dtypeName(weightsDtype)
             << ", activations " << ::sd::dtypeName(activationsDtype) << ": "
             << counts.cast - before.cast;
      if (!lowActivations) {
        remark << " parameters rounded to bf16 on their shards and computed "
                  "in f32";
        continue;
      }
      remark << " parameters cast from their f32 master copies on their "
                "shards (a gather moves the cast), "
             << counts.lowered - before.lowered
             << " ops computed in bf16 (accumulating in f32), "
             << counts.kept - before.kept
             << " kept in f32 (they depend on no parameter), "
             << counts.converts - before.converts
             << " converts in all; the loss is f32";
    }
  }
};
} // namespace
