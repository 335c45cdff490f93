//===- SpecializeBatch.cpp - make a batch-polymorphic program static ------===//
//
// sd programs may leave the batch dimension dynamic; the batch is a run-time
// choice. This pass fixes it and recomputes every type, through calls of
// block functions, in program order (no recursion along use-def chains or
// call chains).
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::sd {
#define GEN_PASS_DEF_SPECIALIZEBATCH
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
class BatchSpecializer {
public:
  explicit BatchSpecializer(ModuleOp module) : symbols(module) {}

  /// The batch of the entry function being specialized next.
  void setBatch(int64_t n) { batch = n; }

  /// Gives `func` the argument types `argTypes` and recomputes its body,
  /// and those of the functions it calls. Each function is specialized
  /// once; a second request must agree. Iterative, with a stack of the
  /// functions under way: a chain of thousands of calls must not overflow
  /// the native stack.
  LogicalResult specialize(func::FuncOp func, TypeRange argTypes,
                           Location requestLoc) {
    bool entered = false;
    if (failed(enter(func, argTypes, requestLoc, entered)))
      return failure();
    while (!stack.empty()) {
      Frame &frame = stack.back();
      if (frame.next == frame.func.getBody().front().end()) {
        finish(frame.func);
        inProgress.erase(frame.func);
        stack.pop_back();
        continue;
      }
      Operation *op = &*frame.next;
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
        if (!callee)
          return call.emitOpError("calls unknown function @")
                 << call.getCallee();
        if (inProgress.contains(callee))
          return call.emitOpError("calls @")
                 << call.getCallee()
                 << " recursively; block functions must not recurse";
        // The callee is specialized first; the call is visited again after.
        if (failed(
                enter(callee, call.getOperandTypes(), call.getLoc(), entered)))
          return failure();
        if (entered)
          continue;
        for (auto [result, type] :
             llvm::zip(call.getResults(), callee.getResultTypes()))
          result.setType(type);
      } else if (failed(refine(op))) {
        return failure();
      }
      ++stack.back().next;
    }
    return success();
  }

private:
  /// A function being specialized and the next op of its body.
  struct Frame {
    func::FuncOp func;
    Block::iterator next;
  };

  /// Starts specializing `func` (sets `entered`) unless it is done.
  LogicalResult enter(func::FuncOp func, TypeRange argTypes,
                      Location requestLoc, bool &entered) {
    entered = false;
    if (done.contains(func)) {
      if (TypeRange(func.getArgumentTypes()) == argTypes)
        return success();
      return emitError(requestLoc)
             << "@" << func.getSymName()
             << " is called with different argument types; block functions "
                "must be called with one batch size";
    }
    done.insert(func);
    if (func.isExternal())
      return emitError(func.getLoc(), "cannot specialize external function @")
             << func.getSymName();
    Block &entry = func.getBody().front();
    for (auto [arg, type] : llvm::zip(entry.getArguments(), argTypes))
      arg.setType(type);
    inProgress.insert(func);
    stack.push_back({func, entry.begin()});
    entered = true;
    return success();
  }

  /// Gives `func` the types of its arguments and of what it returns.
  static void finish(func::FuncOp func) {
    Block &entry = func.getBody().front();
    SmallVector<Type> resultTypes;
    if (auto ret = dyn_cast<func::ReturnOp>(entry.getTerminator()))
      llvm::append_range(resultTypes, ret.getOperandTypes());
    func.setFunctionType(FunctionType::get(
        func.getContext(), entry.getArgumentTypes(), resultTypes));
  }

  /// Recomputes the result types of one op (not a call) from its operands.
  LogicalResult refine(Operation *op) {
    SmallVector<Type> types;
    if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
      if (failed(infer.inferReturnTypes(
              op->getContext(), op->getLoc(), op->getOperands(),
              op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
              op->getRegions(), types)))
        return failure();
    } else if (auto refinable = dyn_cast<RefineShapesOpInterface>(op)) {
      if (failed(refinable.refineResultTypes(batch, types)))
        return failure();
    } else {
      for (Type type : op->getResultTypes())
        if (auto shaped = dyn_cast<ShapedType>(type);
            shaped && !shaped.hasStaticShape())
          return op->emitOpError("has dynamic result type ")
                 << type << " that sd-specialize-batch cannot refine";
      return success();
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
    return success();
  }

  /// The functions under way, innermost last.
  SmallVector<Frame> stack;
  llvm::DenseSet<Operation *> inProgress;
  SymbolTable symbols;
  /// The batch being specialized, for dimensions only a broadcast creates.
  int64_t batch = 0;
  llvm::DenseSet<Operation *> done;
};

struct SpecializeBatchPass
    : public mlir::sd::impl::SpecializeBatchBase<SpecializeBatchPass> {
  using SpecializeBatchBase::SpecializeBatchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (batch < 0) {
      emitError(module.getLoc()) << "batch " << static_cast<int64_t>(batch)
                         << " must be positive";
      return signalPassFailure();
    }
    // Entry functions are those no call in the module refers to.
    llvm::DenseSet<StringAttr> called;
    module.walk([&](func::CallOp call) {
      called.insert(call.getCalleeAttr().getAttr());
    });
    BatchSpecializer specializer(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || called.contains(func.getSymNameAttr()))
        continue;
      int64_t n = entryBatch(func);
      FailureOr<SmallVector<Type>> argTypes = entryArgTypes(func, n);
      specializer.setBatch(n);
      if (failed(argTypes) ||
          failed(specializer.specialize(func, *argTypes, func.getLoc())))
        return signalPassFailure();
    }
  }

private:
  /// The batch an entry function is specialized to: the option, else its
  /// sd.default_batch (the next multiple of batchMultiple when that does
  /// not divide it, with a remark), else 0 (unknown).
  int64_t entryBatch(func::FuncOp func) {
    if (batch != 0)
      return batch;
    auto def =
        func->getAttrOfType<IntegerAttr>(SDDialect::kDefaultBatchAttrName);
    if (!def)
      return 0;
    int64_t n = def.getInt(), multiple = batchMultiple;
    // A static program runs only the batch it was written for.
    bool dynamic = llvm::any_of(func.getArgumentTypes(), [](Type type) {
      auto shaped = dyn_cast<ShapedType>(type);
      return shaped && !shaped.hasStaticShape();
    });
    if (!dynamic || multiple <= 1 || n <= 0 || n % multiple == 0)
      return n;
    int64_t fitted = (n / multiple + 1) * multiple;
    // At the module, whose location is a short line.
    emitRemark(getOperation().getLoc())
        << "batch " << fitted << " (the program's default " << n
        << " does not divide the " << multiple
        << " devices its batch dimension is sharded over; --batch=N sets "
           "another)";
    return fitted;
  }

  /// The entry function's argument types with the batch filled in.
  FailureOr<SmallVector<Type>> entryArgTypes(func::FuncOp func, int64_t n) {
    SmallVector<Type> types;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor || tensor.hasStaticShape()) {
        if (failed(checkStaticBatch(func, i, tensor)))
          return failure();
        types.push_back(type);
        continue;
      }
      if (n == 0)
        return emitError(func.getLoc(), "@")
               << func.getSymName()
               << " has a dynamic batch dimension; pass --batch=N (or "
                  "give the function sd.default_batch)";
      SmallVector<int64_t> shape(tensor.getShape());
      for (int64_t &d : shape)
        if (ShapedType::isDynamic(d))
          d = n;
      types.push_back(tensor.clone(shape));
    }
    return types;
  }

  /// A static program can only run the batch it was written for.
  LogicalResult checkStaticBatch(func::FuncOp func, unsigned i,
                                 RankedTensorType tensor) {
    if (batch == 0 || !tensor)
      return success();
    auto logical = func.getArgAttrOfType<LogicalAxesAttr>(
        i, SDDialect::kLogicalAxesAttrName);
    if (!logical)
      return success();
    for (auto [d, name] : llvm::enumerate(logical.getNames())) {
      StringRef n = name.getValue();
      if (n != "batch" && n != "activation_batch" && n != "conv_batch")
        continue;
      if (tensor.getDimSize(d) != batch)
        return emitError(func.getLoc(), "program is specialized to batch ")
               << tensor.getDimSize(d) << " (argument #" << i
               << "), not " << static_cast<int64_t>(batch)
               << "; generate it with a dynamic batch (sdgen) to choose the "
                  "batch later";
    }
    return success();
  }
};
} // namespace
