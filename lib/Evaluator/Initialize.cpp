//===- Initialize.cpp - deterministic model arguments ---------------------===//
//
// Builds a model's parameters and inputs from their `sd.role` attributes.
// Each argument draws from its own counter-based random stream, derived from
// the run's seed and the argument's identity (a parameter's name, an input's
// kind and ordinal), so values do not depend on argument order or on the
// mesh. The derivation is specified in Evaluator.h; the runtime reproduces
// it bit for bit.
//
//===----------------------------------------------------------------------===//

#include "sd/Evaluator/Evaluator.h"
#include "sd/IR/SDDialect.h"
#include "sd/Reference/Random.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

using namespace mlir;
using namespace mlir::sd;

namespace ref = ::sd::ref;
using ref::Tensor;

uint64_t mlir::sd::deriveSeed(uint64_t seed, StringRef key) {
  return ref::deriveSeed(seed, std::string_view(key.data(), key.size()));
}

uint64_t mlir::sd::parameterSeed(uint64_t seed, StringRef name) {
  return deriveSeed(seed, name);
}

uint64_t mlir::sd::inputSeed(uint64_t seed, InputKind kind, int64_t ordinal) {
  std::string key =
      "input." + stringifyInputKind(kind).str() + "." + std::to_string(ordinal);
  return deriveSeed(seed, key);
}

/// `argument #3 ("name")` or `argument #3` for messages.
static std::string describeArgument(func::FuncOp func, unsigned index,
                                    ParamAttr param) {
  std::string text = "argument #" + std::to_string(index);
  if (param)
    text += " (\"" + param.getName().getValue().str() + "\")";
  return text;
}

/// The values of a parameter with initializer `init`.
static FailureOr<Tensor> initializeParameter(func::FuncOp func, unsigned index,
                                             ParamAttr param,
                                             const std::vector<int64_t> &shape,
                                             ref::DType dtype, uint64_t seed) {
  InitAttr init = param.getInit();
  double scale = init.getScale().convertToDouble();
  // `uniform(1.0e999)` parses as infinity: its values would train silently
  // to a NaN loss. Parameters are computed in f32.
  if (!std::isfinite(static_cast<float>(scale)))
    return emitError(func.getLoc())
           << describeArgument(func, index, param) << " is initialized with "
           << stringifyInitKind(init.getKind()) << "(" << scale
           << "), whose scale is not a finite f32 number";
  uint64_t stream = parameterSeed(seed, param.getName().getValue());
  switch (init.getKind()) {
  case InitKind::zeros:
    return Tensor(shape, dtype, 0.0);
  case InitKind::ones:
    return Tensor(shape, dtype, 1.0);
  case InitKind::constant:
    return Tensor(shape, dtype, scale);
  case InitKind::normal:
    return ref::rngNormal(shape, stream, 0.0, scale, dtype);
  case InitKind::uniform:
    return ref::rngUniform(shape, stream, -scale, scale, dtype);
  case InitKind::xavier_uniform: {
    if (shape.size() < 2)
      return emitError(func.getLoc())
             << describeArgument(func, index, param)
             << " is initialized with xavier_uniform, which needs rank >= 2, "
                "not rank "
             << shape.size();
    // A Linear weight [out, in], or a fused projection's view [k, out, in]
    // initialized as the Linear(in, k·out) it is: fan_in is the contracted
    // last dimension, fan_out the product of the others.
    double fanIn = static_cast<double>(shape.back());
    double fanOut = 1.0;
    for (int64_t size : llvm::drop_end(shape))
      fanOut *= static_cast<double>(size);
    double bound = std::sqrt(6.0 / (fanIn + fanOut));
    return ref::rngUniform(shape, stream, -bound, bound, dtype);
  }
  }
  return emitError(func.getLoc()) << describeArgument(func, index, param)
                          << " has an unknown initializer";
}

/// The values of the `ordinal`-th input of `kind`.
static FailureOr<Tensor> initializeInput(func::FuncOp func, unsigned index,
                                         InputKind kind, int64_t ordinal,
                                         const std::vector<int64_t> &shape,
                                         ref::DType dtype, uint64_t seed) {
  uint64_t stream = inputSeed(seed, kind, ordinal);
  switch (kind) {
  case InputKind::latents:
  case InputKind::noise:
  case InputKind::context:
  case InputKind::pooled:
    return ref::rngNormal(shape, stream, 0.0, 1.0, dtype);
  case InputKind::guidance:
    // Flux.1-dev's distilled guidance: its pipelines use 1 to 10.
    return ref::rngUniform(shape, stream, 1.0, 10.0, dtype);
  case InputKind::time_ids:
    // SDXL's sizes and crops, in pixels.
    return ref::rngUniform(shape, stream, 0.0, 1024.0, dtype);
  case InputKind::step:
    // A training run starts at step 0.
    return Tensor(shape, dtype);
  case InputKind::hyperparameters:
    return emitError(func.getLoc())
           << describeArgument(func, index, {})
           << " holds the run's hyperparameters, which the evaluator does "
              "not know: build the step without hyperparameter-inputs";
  case InputKind::timestep:
    return ref::rngUniform(shape, stream, 0.0, 1.0, dtype);
  case InputKind::labels: {
    if (shape.empty())
      return emitError(func.getLoc())
             << describeArgument(func, index, {})
             << " holds one-hot labels and needs a class dimension, but is a "
                "scalar";
    Tensor labels(shape, dtype, 0.0);
    int64_t numClasses = shape.back();
    if (numClasses == 0)
      return labels;
    int64_t numSamples = labels.numElements() / numClasses;
    for (int64_t sample = 0; sample < numSamples; ++sample) {
      double u = ref::uniformAt(stream, static_cast<uint64_t>(sample));
      int64_t label =
          std::min(numClasses - 1, static_cast<int64_t>(u * numClasses));
      labels[sample * numClasses + label] = 1.0;
    }
    return labels;
  }
  }
  return emitError(func.getLoc()) << describeArgument(func, index, {})
                          << " has an unknown input kind";
}

FailureOr<std::vector<Tensor>> mlir::sd::initializeArguments(func::FuncOp func,
                                                             uint64_t seed) {
  std::vector<Tensor> args;
  args.reserve(func.getNumArguments());
  // Inputs seen so far, by kind, to number inputs of the same kind.
  std::map<InputKind, int64_t> ordinals;
  for (unsigned index = 0; index < func.getNumArguments(); ++index) {
    Attribute role = func.getArgAttr(index, SDDialect::kRoleAttrName);
    auto param = dyn_cast_or_null<ParamAttr>(role);
    std::string name = describeArgument(func, index, param);
    Type type = func.getArgumentTypes()[index];
    auto tensorType = dyn_cast<RankedTensorType>(type);
    if (!tensorType)
      return emitError(func.getLoc()) << name << " has type " << type
                              << "; only ranked tensors can be initialized";
    if (!tensorType.hasStaticShape())
      return emitError(func.getLoc()) << name << " has dynamic type " << type
                              << "; run sd-specialize-batch first";
    FailureOr<ref::DType> dtype =
        getReferenceDType(tensorType.getElementType());
    if (failed(dtype) || *dtype == ref::DType::I1)
      return emitError(func.getLoc())
             << name << " has element type " << tensorType.getElementType()
             << "; only float arguments can be initialized";
    std::vector<int64_t> shape(tensorType.getShape().begin(),
                               tensorType.getShape().end());

    FailureOr<Tensor> value = failure();
    if (param) {
      value = initializeParameter(func, index, param, shape, *dtype, seed);
    } else if (auto state = dyn_cast_or_null<OptimizerStateAttr>(role)) {
      // AdamW's moments start at zero, the parameters' moving average at
      // the parameter (an argument before it: the step lists parameters
      // first).
      value = Tensor(shape, *dtype);
      if (state.getKind() == MomentKind::ema) {
        for (unsigned p = 0; p < index; ++p)
          if (auto other = func.getArgAttrOfType<ParamAttr>(
                  p, SDDialect::kRoleAttrName);
              other && other.getName() == state.getParam())
            value = args[p];
      }
    } else if (auto input = dyn_cast_or_null<InputAttr>(role)) {
      int64_t ordinal = ordinals[input.getKind()]++;
      value = initializeInput(func, index, input.getKind(), ordinal, shape,
                              *dtype, seed);
    } else {
      return emitError(func.getLoc())
             << name << " has no '" << SDDialect::kRoleAttrName
             << "' (#sd.param or #sd.input), so it cannot be initialized";
    }
    if (failed(value))
      return failure();
    value->roundToDType();
    args.push_back(std::move(*value));
  }
  return args;
}
