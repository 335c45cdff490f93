//===- Evaluator.cpp - the reference evaluator driver ---------------------===//
//
// Walks a function body op by op (a straight-line block), keeps one tensor
// per device for every live value, hands each op its operands through
// `EvaluableOpInterface` (device by device) or, for collectives,
// `CollectiveEvaluableOpInterface` (all devices at once), rounds the results
// to their element types in Native mode, and drops every value right after
// its last use. `func.call` evaluates the callee's body with the caller's
// tensors borrowed, so calls copy nothing; the C++ recursion depth is the
// program's call depth.
//
//===----------------------------------------------------------------------===//

#include "sd/Evaluator/Evaluator.h"
#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::sd;

namespace ref = ::sd::ref;
using ref::Tensor;

FailureOr<ref::DType> mlir::sd::getReferenceDType(Type elementType) {
  if (elementType.isF32())
    return ref::DType::F32;
  if (elementType.isBF16())
    return ref::DType::BF16;
  if (elementType.isF64())
    return ref::DType::F64;
  if (elementType.isInteger(1))
    return ref::DType::I1;
  return failure();
}

/// `[2, 3]` for messages.
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

/// `argument #3 ("blocks.0.attn.q.weight")` for a named parameter, else
/// `argument #3`.
static std::string describeArgument(func::FuncOp func, unsigned index) {
  std::string text = "argument #" + std::to_string(index);
  if (auto param =
          func.getArgAttrOfType<ParamAttr>(index, SDDialect::kRoleAttrName))
    text += " (\"" + param.getName().getValue().str() + "\")";
  return text;
}

/// The mesh of `collective` as a spec; fails, after an error on the op, when
/// its symbol names no mesh or the mesh does not have `numDevices` devices
/// (device i of the run is mesh device i, so the counts must agree).
static FailureOr<::sd::MeshSpec>
getCollectiveMeshSpec(CollectiveEvaluableOpInterface collective,
                      int64_t numDevices) {
  MeshAttr meshAttr = collective.getCollectiveMesh();
  if (!meshAttr)
    return failure();
  ::sd::MeshSpec mesh = getMeshSpec(meshAttr);
  if (mesh.numDevices() != numDevices)
    return collective->emitOpError()
           << "runs on mesh " << mesh.toString() << " of " << mesh.numDevices()
           << " devices, but the evaluator simulates " << numDevices
           << "; a program with collectives runs on one "
           << "simulated device per mesh device";
  return mesh;
}

//===----------------------------------------------------------------------===//
// Frames and plans
//===----------------------------------------------------------------------===//

/// What to free when: computed once per function and reused by every call.
struct Evaluator::FunctionPlan {
  /// `releaseAfter[i]`: the values whose last use is the i-th op of the body
  /// (and the i-th op's results that nobody uses).
  std::vector<SmallVector<Value, 2>> releaseAfter;
};

/// The live values of one function activation.
struct Evaluator::Frame {
  explicit Frame(Evaluator &evaluator) : evaluator(evaluator) {}
  ~Frame() { evaluator.liveElements -= ownedElements; }
  Frame(const Frame &) = delete;
  Frame &operator=(const Frame &) = delete;

  /// A value on one device: a tensor of this frame, or one borrowed from the
  /// caller (arguments), which outlives the frame.
  struct Slot {
    Tensor owned;
    const Tensor *borrowed = nullptr;
    const Tensor &get() const { return borrowed ? *borrowed : owned; }
  };

  /// Operand pointers of `op` on `device`; fails (after an error on `op`)
  /// on an operand without a value, which a verified program cannot have.
  FailureOr<SmallVector<const Tensor *>> lookupOperands(Operation *op,
                                                        int64_t device) {
    SmallVector<const Tensor *> operands;
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      auto it = values.find(operand);
      if (it == values.end())
        return op->emitOpError() << "operand #" << index
                                 << " has no value in the reference evaluator";
      operands.push_back(&it->second[device].get());
    }
    return operands;
  }

  /// `lookupOperands` of `op` on each of `numDevices` devices.
  FailureOr<SmallVector<SmallVector<const Tensor *>>>
  lookupOperandsPerDevice(Operation *op, int64_t numDevices) {
    SmallVector<SmallVector<const Tensor *>> perDevice;
    for (int64_t device = 0; device < numDevices; ++device) {
      FailureOr<SmallVector<const Tensor *>> operands =
          lookupOperands(op, device);
      if (failed(operands))
        return failure();
      perDevice.push_back(std::move(*operands));
    }
    return perDevice;
  }

  /// Binds `value` to borrowed tensors, one per device.
  void borrow(Value value, ArrayRef<const Tensor *> perDevice) {
    SmallVector<Slot, 1> &slots = values[value];
    slots.resize(perDevice.size());
    for (auto [device, tensor] : llvm::enumerate(perDevice))
      slots[device].borrowed = tensor;
  }

  /// Stores `perDevice[device][i]` as result i of `op`.
  void defineResults(Operation *op, PerDeviceTensors &perDevice) {
    for (OpResult result : op->getResults()) {
      SmallVector<Slot, 1> &slots = values[result];
      slots.resize(perDevice.size());
      for (auto [device, results] : llvm::enumerate(perDevice)) {
        slots[device].owned = std::move(results[result.getResultNumber()]);
        ownedElements += slots[device].owned.numElements();
        evaluator.liveElements += slots[device].owned.numElements();
      }
    }
    evaluator.peakLiveElements =
        std::max(evaluator.peakLiveElements, evaluator.liveElements);
  }

  /// Frees `value` on every device.
  void release(Value value) {
    auto it = values.find(value);
    if (it == values.end())
      return;
    for (Slot &slot : it->second)
      if (!slot.borrowed) {
        ownedElements -= slot.owned.numElements();
        evaluator.liveElements -= slot.owned.numElements();
      }
    values.erase(it);
  }

  /// One slot per device. Only looked up, never iterated, so the
  /// pointer-keyed order cannot leak into results.
  DenseMap<Value, SmallVector<Slot, 1>> values;

private:
  Evaluator &evaluator;
  /// Elements of the tensors this frame owns (moved-out ones included until
  /// the frame ends), for the live-memory statistic.
  int64_t ownedElements = 0;
};

Evaluator::Evaluator(EvalOptions options) : options(options) {}
Evaluator::~Evaluator() = default;

FailureOr<const Evaluator::FunctionPlan *>
Evaluator::getPlan(func::FuncOp func) {
  auto it = plans.find(func.getOperation());
  if (it != plans.end())
    return it->second.get();

  if (func.isExternal())
    return emitError(func.getLoc())
           << "function @" << func.getSymName() << " has no body to evaluate";
  if (!func.getBody().hasOneBlock())
    return emitError(func.getLoc())
           << "function @" << func.getSymName()
           << " has more than one block; the reference evaluator runs "
              "straight-line functions only";
  for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (!tensorType)
      return emitError(func.getLoc())
             << describeArgument(func, index) << " has type " << type
             << "; the reference evaluator only evaluates ranked tensors";
    if (!tensorType.hasStaticShape())
      return emitError(func.getLoc())
             << describeArgument(func, index) << " has dynamic type " << type
             << "; run sd-specialize-batch first";
    if (failed(getReferenceDType(tensorType.getElementType())))
      return emitError(func.getLoc())
             << describeArgument(func, index) << " has element type "
             << tensorType.getElementType()
             << ", which the reference evaluator does not support";
  }

  // Collectives need exactly their mesh's devices: say so before running.
  Block &body = func.getBody().front();
  for (Operation &op : body)
    if (auto collective = dyn_cast<CollectiveEvaluableOpInterface>(op))
      if (failed(getCollectiveMeshSpec(collective, options.numDevices)))
        return failure();

  // Last use of every value, by position in the body.
  DenseMap<Value, unsigned> lastUse;
  unsigned numOps = 0;
  for (Operation &op : body) {
    for (Value operand : op.getOperands())
      lastUse[operand] = numOps;
    ++numOps;
  }
  auto plan = std::make_unique<FunctionPlan>();
  plan->releaseAfter.resize(numOps);
  unsigned index = 0;
  for (Operation &op : body) {
    SmallVector<Value, 2> &release = plan->releaseAfter[index];
    for (Value operand : op.getOperands())
      if (lastUse.lookup(operand) == index &&
          !llvm::is_contained(release, operand))
        release.push_back(operand);
    for (Value result : op.getResults())
      if (result.use_empty())
        release.push_back(result);
    ++index;
  }
  const FunctionPlan *result = plan.get();
  plans[func.getOperation()] = std::move(plan);
  return result;
}

//===----------------------------------------------------------------------===//
// Running a body
//===----------------------------------------------------------------------===//

FailureOr<PerDeviceTensors>
Evaluator::runBody(func::FuncOp func,
                   ArrayRef<SmallVector<const Tensor *>> args) {
  FailureOr<const FunctionPlan *> plan = getPlan(func);
  if (failed(plan))
    return failure();
  callStack.push_back(func.getOperation());
  llvm::scope_exit popCallStack([&] { callStack.pop_back(); });

  Block &body = func.getBody().front();
  Frame frame(*this);
  for (BlockArgument arg : body.getArguments()) {
    SmallVector<const Tensor *> perDevice;
    for (int64_t device = 0; device < options.numDevices; ++device)
      perDevice.push_back(args[device][arg.getArgNumber()]);
    frame.borrow(arg, perDevice);
  }

  unsigned index = 0;
  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      // Move each returned tensor out of the frame, copying only borrowed
      // ones and values returned more than once.
      PerDeviceTensors results(options.numDevices);
      for (auto [position, operand] : llvm::enumerate(ret.getOperands())) {
        bool returnedAgain = llvm::is_contained(
            ret.getOperands().drop_front(position + 1), operand);
        auto it = frame.values.find(operand);
        if (it == frame.values.end())
          return ret.emitOpError()
                 << "operand #" << position
                 << " has no value in the reference evaluator";
        SmallVector<Frame::Slot, 1> &slots = it->second;
        for (int64_t device = 0; device < options.numDevices; ++device) {
          Frame::Slot &slot = slots[device];
          if (slot.borrowed || returnedAgain)
            results[device].push_back(slot.get());
          else
            results[device].push_back(std::move(slot.owned));
        }
      }
      return results;
    }
    if (failed(evaluateOp(&op, frame)))
      return failure();
    for (Value value : (*plan)->releaseAfter[index])
      frame.release(value);
    ++index;
  }
  return emitError(func.getLoc()) << "function @" << func.getSymName()
                          << " does not end in func.return";
}

LogicalResult Evaluator::evaluateOp(Operation *op, Frame &frame) {
  for (auto [index, type] : llvm::enumerate(op->getResultTypes())) {
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (!tensorType)
      return op->emitOpError()
             << "result #" << index << " has type " << type
             << "; the reference evaluator only evaluates ranked tensors";
    if (!tensorType.hasStaticShape())
      return op->emitOpError() << "has dynamic result type " << type
                               << "; run sd-specialize-batch first";
    if (failed(getReferenceDType(tensorType.getElementType())))
      return op->emitOpError()
             << "result #" << index << " has element type "
             << tensorType.getElementType()
             << ", which the reference evaluator does not support";
  }
  if (auto call = dyn_cast<func::CallOp>(op))
    return evaluateCall(call, frame);

  // Collectives (after partitioning) see every device's operands at once.
  if (auto collective = dyn_cast<CollectiveEvaluableOpInterface>(op))
    return evaluateCollective(collective, frame);

  auto evaluable = dyn_cast<EvaluableOpInterface>(op);
  if (!evaluable)
    return op->emitOpError("has no reference evaluation");
  PerDeviceTensors results(options.numDevices);
  for (int64_t device = 0; device < options.numDevices; ++device) {
    FailureOr<SmallVector<const Tensor *>> operands =
        frame.lookupOperands(op, device);
    if (failed(operands))
      return failure();
    SmallVector<Tensor, 1> deviceResults;
    if (failed(evaluable.evaluate(*operands, deviceResults)) ||
        failed(finalizeResults(op, deviceResults)))
      return failure();
    results[device].assign(std::make_move_iterator(deviceResults.begin()),
                           std::make_move_iterator(deviceResults.end()));
  }
  // Results enter the frame only now: inserting may move the slots that the
  // operand pointers above point into.
  frame.defineResults(op, results);
  return success();
}

LogicalResult
Evaluator::evaluateCollective(CollectiveEvaluableOpInterface collective,
                              Frame &frame) {
  Operation *op = collective;
  FailureOr<::sd::MeshSpec> mesh =
      getCollectiveMeshSpec(collective, options.numDevices);
  if (failed(mesh))
    return failure();
  FailureOr<SmallVector<SmallVector<const Tensor *>>> operands =
      frame.lookupOperandsPerDevice(op, options.numDevices);
  if (failed(operands))
    return failure();
  PerDeviceTensors results;
  if (failed(collective.evaluateCollective(*mesh, *operands, results)))
    return failure();
  if (static_cast<int64_t>(results.size()) != options.numDevices)
    return op->emitOpError()
           << "reference evaluation produced results for " << results.size()
           << " devices instead of " << options.numDevices;
  for (std::vector<Tensor> &deviceResults : results)
    if (failed(finalizeResults(op, deviceResults)))
      return failure();
  frame.defineResults(op, results);
  return success();
}

LogicalResult Evaluator::evaluateCall(func::CallOp call, Frame &frame) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  if (!callee)
    return call.emitOpError()
           << "calls " << call.getCalleeAttr() << ", which is not a func.func";
  if (llvm::is_contained(callStack, callee.getOperation()))
    return call.emitOpError()
           << "calls @" << callee.getSymName()
           << " recursively, which the reference evaluator does not support";
  FailureOr<SmallVector<SmallVector<const Tensor *>>> args =
      frame.lookupOperandsPerDevice(call, options.numDevices);
  if (failed(args))
    return failure();
  FailureOr<PerDeviceTensors> results = runBody(callee, *args);
  if (failed(results))
    return failure();
  frame.defineResults(call, *results);
  return success();
}

LogicalResult
Evaluator::finalizeResults(Operation *op,
                           MutableArrayRef<Tensor> results) const {
  if (results.size() != op->getNumResults())
    return op->emitOpError()
           << "reference evaluation produced " << results.size()
           << " results instead of " << op->getNumResults();
  for (auto [index, tensor] : llvm::enumerate(results)) {
    auto type = cast<RankedTensorType>(op->getResult(index).getType());
    if (!tensor.isValid() ||
        ArrayRef<int64_t>(tensor.shape()) != type.getShape())
      return op->emitOpError() << "reference evaluation of result #" << index
                               << " has shape " << formatShape(tensor.shape())
                               << " instead of the type's " << type;
    tensor.setDType(*getReferenceDType(type.getElementType()));
    if (options.precision == Precision::Native)
      tensor.roundToDType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// True when every value of `tensor` is representable in its element type.
static bool isRounded(const Tensor &tensor) {
  return llvm::all_of(tensor.values(), [&](double v) {
    double rounded = ref::roundTo(tensor.dtype(), v);
    return rounded == v || (std::isnan(rounded) && std::isnan(v));
  });
}

FailureOr<PerDeviceTensors> Evaluator::run(func::FuncOp func,
                                           ArrayRef<std::vector<Tensor>> args) {
  SmallVector<ArrayRef<Tensor>> perDevice(args.begin(), args.end());
  return run(func, ArrayRef<ArrayRef<Tensor>>(perDevice));
}

FailureOr<PerDeviceTensors> Evaluator::run(func::FuncOp func,
                                           ArrayRef<ArrayRef<Tensor>> args) {
  liveElements = 0;
  peakLiveElements = 0;
  if (options.numDevices < 1)
    return emitError(func.getLoc())
           << "cannot evaluate on " << options.numDevices << " devices";
  if (static_cast<int64_t>(args.size()) != options.numDevices)
    return emitError(func.getLoc()) << "expected arguments for " << options.numDevices
                            << " devices, got " << args.size();
  if (failed(getPlan(func)))
    return failure();

  // Check every argument; in Native mode round those that are not yet
  // representable in their element type (into copies: args are borrowed).
  unsigned numArgs = func.getNumArguments();
  std::vector<std::vector<Tensor>> roundedCopies(options.numDevices);
  SmallVector<SmallVector<const Tensor *>> borrowed(options.numDevices);
  for (int64_t device = 0; device < options.numDevices; ++device) {
    std::string onDevice =
        options.numDevices > 1 ? " on device " + std::to_string(device) : "";
    if (args[device].size() != numArgs)
      return emitError(func.getLoc())
             << "@" << func.getSymName() << " expects " << numArgs
             << " arguments, got " << args[device].size() << onDevice;
    roundedCopies[device].reserve(numArgs);
    for (unsigned index = 0; index < numArgs; ++index) {
      const Tensor &arg = args[device][index];
      auto type = cast<RankedTensorType>(func.getArgumentTypes()[index]);
      ref::DType dtype = *getReferenceDType(type.getElementType());
      if (!arg.isValid())
        return emitError(func.getLoc())
               << describeArgument(func, index) << " has no value" << onDevice;
      if (ArrayRef<int64_t>(arg.shape()) != type.getShape() ||
          arg.dtype() != dtype)
        return emitError(func.getLoc())
               << describeArgument(func, index) << " has type " << type
               << " but the given tensor is " << formatShape(arg.shape())
               << " of " << ref::dtypeName(arg.dtype()) << onDevice;
      if (options.precision == Precision::Native && !isRounded(arg)) {
        roundedCopies[device].push_back(arg);
        roundedCopies[device].back().roundToDType();
        borrowed[device].push_back(&roundedCopies[device].back());
      } else {
        borrowed[device].push_back(&arg);
      }
    }
  }
  return runBody(func, borrowed);
}

FailureOr<PerDeviceTensors>
mlir::sd::evaluatePerDevice(func::FuncOp func,
                            ArrayRef<std::vector<Tensor>> args,
                            const EvalOptions &options) {
  Evaluator evaluator(options);
  return evaluator.run(func, args);
}

FailureOr<std::vector<Tensor>> mlir::sd::evaluate(func::FuncOp func,
                                                  ArrayRef<Tensor> args,
                                                  const EvalOptions &options) {
  if (options.numDevices != 1)
    return emitError(func.getLoc()) << "evaluate runs on one device, not "
                            << options.numDevices << "; use evaluatePerDevice";
  Evaluator evaluator(options);
  FailureOr<PerDeviceTensors> results =
      evaluator.run(func, ArrayRef<ArrayRef<Tensor>>(args));
  if (failed(results))
    return failure();
  return std::move((*results)[0]);
}
