//===- ModelBuilder.cpp - writing sd ops and model functions --------------===//
//
// FnBuilder wraps the op builders of the sd dialect (types are inferred
// wherever the dialect can infer them); ModelBuilder declares the model
// functions' arguments with their roles and logical axes and creates block
// functions; buildModelFunctions writes @loss and @denoise around a
// family's network.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

static int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// Parameter specs
//===----------------------------------------------------------------------===//

void modelgen::addLinear(ParamSpecs &specs, const std::string &name, int64_t in,
                         int64_t out, StringRef inAxis, StringRef outAxis,
                         InitKind init, double scale) {
  specs.push_back({name + ".weight",
                   {out, in},
                   init,
                   scale,
                   {outAxis.str(), inAxis.str()},
                   {}});
  specs.push_back(
      {name + ".bias", {out}, InitKind::zeros, 0.0, {outAxis.str()}, {}});
}

void modelgen::addFusedLinear(ParamSpecs &specs, const std::string &name,
                              int64_t in, int64_t k, int64_t out,
                              StringRef inAxis, StringRef outAxis,
                              InitKind init) {
  specs.push_back({name + ".weight",
                   {k, out, in},
                   init,
                   0.0,
                   {"_", outAxis.str(), inAxis.str()},
                   {k * out, in}});
  specs.push_back({name + ".bias",
                   {k, out},
                   InitKind::zeros,
                   0.0,
                   {"_", outAxis.str()},
                   {k * out}});
}

void modelgen::addPatchEmbedding(ParamSpecs &specs, const std::string &name,
                                 int64_t channels, ArrayRef<int64_t> patch,
                                 int64_t out, StringRef outAxis) {
  int64_t in = channels;
  SmallVector<int64_t> stored = {out, channels};
  for (int64_t size : patch) {
    in *= size;
    stored.push_back(size);
  }
  addLinear(specs, name, in, out, "_", outAxis);
  specs[specs.size() - 2].storedShape = std::move(stored);
}

void modelgen::addConv(ParamSpecs &specs, const std::string &name, int64_t in,
                       int64_t out, int64_t kernel) {
  // PyTorch's default: uniform within ±1/sqrt(fan in).
  double bound = 1.0 / std::sqrt(static_cast<double>(in * kernel * kernel));
  specs.push_back({name + ".weight",
                   {out, in, kernel, kernel},
                   InitKind::uniform,
                   bound,
                   {"conv_out", "conv_in", "_", "_"},
                   {}});
  specs.push_back(
      {name + ".bias", {out}, InitKind::zeros, 0.0, {"conv_out"}, {}});
}

void modelgen::addParam(ParamSpecs &specs, const std::string &name,
                        ArrayRef<int64_t> shape, ArrayRef<StringRef> axes,
                        InitKind init, double scale) {
  ParamSpec spec{name, SmallVector<int64_t>(shape), init, scale, {}};
  for (StringRef axis : axes)
    spec.axes.push_back(axis.str());
  specs.push_back(std::move(spec));
}

static LogicalAxesAttr makeAxes(MLIRContext *context,
                                ArrayRef<std::string> axes) {
  SmallVector<StringAttr> names;
  for (const std::string &axis : axes)
    names.push_back(StringAttr::get(context, axis == "_" ? "" : axis));
  return LogicalAxesAttr::get(context, names);
}

//===----------------------------------------------------------------------===//
// FnBuilder
//===----------------------------------------------------------------------===//

FnBuilder::FnBuilder(Block *block, Type dtype, int64_t batch)
    : builder(block->getParentOp()->getContext()), loc(builder.getUnknownLoc()),
      dtype(dtype), batch(batch) {
  builder.setInsertionPointToEnd(block);
}

Value FnBuilder::name(Value value, StringRef name) {
  value.getDefiningOp()->setAttr(SDDialect::kNameAttrName,
                                 builder.getStringAttr(name));
  return value;
}

Value FnBuilder::add(Value a, Value b) {
  return AddOp::create(builder, loc, a, b);
}
Value FnBuilder::sub(Value a, Value b) {
  return SubOp::create(builder, loc, a, b);
}
Value FnBuilder::mul(Value a, Value b) {
  return MulOp::create(builder, loc, a, b);
}
Value FnBuilder::neg(Value a) { return NegOp::create(builder, loc, a); }
Value FnBuilder::exp(Value a) { return ExpOp::create(builder, loc, a); }
Value FnBuilder::sin(Value a) { return SinOp::create(builder, loc, a); }
Value FnBuilder::cos(Value a) { return CosOp::create(builder, loc, a); }
Value FnBuilder::silu(Value a) { return SiluOp::create(builder, loc, a); }
Value FnBuilder::gelu(Value a, bool approximate) {
  return GeluOp::create(builder, loc, a, approximate);
}

Value FnBuilder::convert(Value a, Type elementType) {
  auto type = tensorType(a);
  if (type.getElementType() == elementType)
    return a;
  return ConvertOp::create(builder, loc, type.clone(elementType), a);
}

Value FnBuilder::scale(Value value, double factor) {
  auto type = tensorType(value);
  if (type.hasStaticShape())
    return mul(value, splat(factor, type.getShape(), type.getElementType()));
  ArrayRef<int64_t> rest = type.getShape().drop_front();
  SmallVector<int64_t> dims =
      llvm::to_vector(llvm::seq<int64_t>(1, type.getRank()));
  Value factors = splat(factor, rest, type.getElementType());
  return mul(value, expand(factors, type.getShape(), dims));
}

Value FnBuilder::splat(double value, ArrayRef<int64_t> shape,
                       Type elementType) {
  auto type = RankedTensorType::get(shape, elementType ? elementType : dtype);
  auto attr = DenseElementsAttr::get(
      type, builder.getFloatAttr(type.getElementType(), value));
  return ConstantOp::create(builder, loc, cast<ElementsAttr>(attr));
}

Value FnBuilder::iota(ArrayRef<int64_t> shape, int64_t dim) {
  return IotaOp::create(builder, loc, RankedTensorType::get(shape, getF32()),
                        dim);
}

Value FnBuilder::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = tensorType(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(builder, loc, type.clone(shape), value);
}

Value FnBuilder::transpose(Value value, ArrayRef<int64_t> permutation) {
  return TransposeOp::create(builder, loc, value, permutation);
}

Value FnBuilder::slice(Value value, int64_t dim, int64_t start, int64_t limit) {
  auto type = tensorType(value);
  SmallVector<int64_t> starts(type.getRank(), 0);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> strides(type.getRank(), 1);
  // -1 is the end of a dimension: a dynamic batch stays whole, whatever
  // sd-specialize-batch makes it.
  for (int64_t &end : limits)
    if (ShapedType::isDynamic(end))
      end = -1;
  starts[dim] = start;
  limits[dim] = limit;
  return SliceOp::create(builder, loc, value, starts, limits, strides);
}

Value FnBuilder::concat(ValueRange values, int64_t dim) {
  return ConcatOp::create(builder, loc, values, static_cast<uint64_t>(dim));
}

Value FnBuilder::broadcast(Value value, ArrayRef<int64_t> shape,
                           ArrayRef<int64_t> dims) {
  auto type = tensorType(value);
  if (type.getShape() == shape)
    return value;
  return BroadcastInDimOp::create(builder, loc, type.clone(shape), value, dims);
}

Value FnBuilder::ones(Type elementType) {
  if (Value cached = onesCache.lookup(elementType))
    return cached;
  assert(batchSource && "a dynamic-batch function needs a batch source");
  Value base = onesCache.lookup(tensorType(batchSource).getElementType());
  if (!base) {
    // exp(r − r) = 1 for every sample r of the batch source.
    auto type = tensorType(batchSource);
    Value r = batchSource;
    if (type.getRank() > 1)
      r = ReduceMeanOp::create(
          builder, loc, r,
          llvm::to_vector(llvm::seq<int64_t>(1, type.getRank())));
    base = reshape(exp(sub(r, r)), {batch, 1});
    onesCache[type.getElementType()] = base;
  }
  Value result = convert(base, elementType);
  onesCache[elementType] = result;
  return result;
}

Value FnBuilder::expand(Value value, ArrayRef<int64_t> shape,
                        ArrayRef<int64_t> dims) {
  // The value viewed as the target's dimensions `dims`, then broadcast; a
  // dynamic batch dimension the broadcast creates is sized by
  // sd-specialize-batch.
  SmallVector<int64_t> view;
  for (int64_t d : dims)
    view.push_back(shape[d]);
  return broadcast(reshape(value, view), shape, dims);
}

Value FnBuilder::dot(Value x, Value w) {
  int64_t last = tensorType(x).getRank() - 1;
  return DotGeneralOp::create(builder, loc, x, w, ArrayRef<int64_t>{},
                              ArrayRef<int64_t>{}, ArrayRef<int64_t>{last},
                              ArrayRef<int64_t>{0});
}

Value FnBuilder::addBias(Value x, Value bias) {
  auto type = tensorType(x);
  int64_t rank = type.getRank(), biasRank = tensorType(bias).getRank();
  SmallVector<int64_t> dims =
      llvm::to_vector(llvm::seq<int64_t>(rank - biasRank, rank));
  return add(x, broadcast(bias, type.getShape(), dims));
}

Value FnBuilder::linear(Value x, Value w, Value b) {
  int64_t last = tensorType(x).getRank() - 1;
  int64_t in = tensorType(w).getRank() - 1;
  Value y = DotGeneralOp::create(builder, loc, x, w, ArrayRef<int64_t>{},
                                 ArrayRef<int64_t>{}, ArrayRef<int64_t>{last},
                                 ArrayRef<int64_t>{in});
  return b ? addBias(y, b) : y;
}

Value FnBuilder::layerNorm(Value x, Value scale, Value bias, double epsilon) {
  return LayerNormOp::create(builder, loc, x, scale, bias,
                             builder.getF64FloatAttr(epsilon));
}

Value FnBuilder::groupNorm(Value x, Value scale, Value bias, int64_t groups,
                           double epsilon) {
  return GroupNormOp::create(builder, loc, x, scale, bias,
                             static_cast<uint64_t>(groups), APFloat(epsilon));
}

Value FnBuilder::conv2d(Value x, Value weight, Value bias, int64_t stride,
                        int64_t padding) {
  // PyTorch's [Cout, Cin, KH, KW] → the op's HWIO [KH, KW, Cin, Cout].
  Value kernel = transpose(weight, {2, 3, 1, 0});
  return Conv2DOp::create(
      builder, loc, x, kernel, bias, ArrayRef<int64_t>{stride, stride},
      ArrayRef<int64_t>{padding, padding, padding, padding}, uint64_t{1});
}

Value FnBuilder::upsampleNearest(Value x, int64_t factor) {
  return UpsampleNearestOp::create(builder, loc, x,
                                   ArrayRef<int64_t>{factor, factor});
}

Value FnBuilder::rmsNorm(Value x, Value scale) {
  return RmsNormOp::create(builder, loc, x, scale,
                           builder.getF64FloatAttr(1e-6));
}

Value FnBuilder::attention(Value q, Value k, Value v, bool selfAttention) {
  auto constrain = [&](Value x, StringRef length) -> Value {
    return ShardingConstraintOp::create(
        builder, loc, x.getType(), x, ShardingAttr(),
        LogicalAxesAttr::get(builder.getContext(),
                             {builder.getStringAttr("activation_batch"),
                              builder.getStringAttr("activation_heads"),
                              builder.getStringAttr(length),
                              builder.getStringAttr("activation_kv")}));
  };
  StringRef kvLength =
      selfAttention ? "activation_length" : "activation_kv_length";
  // In operand order (not as arguments, whose order C++ leaves open).
  Value cq = constrain(q, "activation_length");
  Value ck = constrain(k, kvLength);
  Value cv = constrain(v, kvLength);
  return AttentionOp::create(builder, loc, cq, ck, cv, Value(), FloatAttr());
}

Value FnBuilder::mseLoss(Value pred, Value target) {
  return MseLossOp::create(builder, loc, pred, target);
}

//===----------------------------------------------------------------------===//
// ModelBuilder
//===----------------------------------------------------------------------===//

ModelBuilder::ModelBuilder(MLIRContext &context, const ModelConfig &config)
    : context(context), config(config) {
  context.loadDialect<SDDialect, func::FuncDialect>();
  dtype = config.bf16 ? Type(BFloat16Type::get(&context))
                      : Type(Float32Type::get(&context));
  module = ModuleOp::create(UnknownLoc::get(&context));
}

func::FuncOp ModelBuilder::beginFunction(StringRef name) {
  OpBuilder builder(&context);
  builder.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(builder, builder.getUnknownLoc(), name,
                              builder.getFunctionType({}, {}));
  func->setAttr(SDDialect::kDefaultBatchAttrName,
                builder.getI64IntegerAttr(config.batch));
  if (!firstFunc)
    firstFunc = func;
  numParams = 0;
  body =
      std::make_unique<FnBuilder>(func.addEntryBlock(), dtype, getBatchDim());
  return func;
}

void ModelBuilder::endFunction(ValueRange results) {
  func::ReturnOp::create(body->getBuilder(), body->getLoc(), results);
  func.setFunctionType(
      FunctionType::get(&context, func.getArgumentTypes(), results.getTypes()));
}

Value ModelBuilder::input(InputKind kind, ArrayRef<int64_t> shape,
                          Type elementType, ArrayRef<StringRef> axes) {
  SmallVector<std::string> axisNames;
  for (StringRef axis : axes)
    axisNames.push_back(axis.str());
  NamedAttrList attrs;
  attrs.set(SDDialect::kRoleAttrName, InputAttr::get(&context, kind));
  attrs.set(SDDialect::kLogicalAxesAttrName, makeAxes(&context, axisNames));
  unsigned index = func.getNumArguments();
  auto type = RankedTensorType::get(shape, elementType);
  (void)func.insertArgument(index, type, attrs.getDictionary(&context),
                            func.getLoc());
  return func.getArgument(index);
}

Value ModelBuilder::param(const ParamSpec &spec, StringRef prefix) {
  auto init = InitAttr::get(&context, spec.init, llvm::APFloat(spec.scale));
  auto role =
      ParamAttr::get(&context, StringAttr::get(&context, prefix + spec.name),
                     init, spec.storedShape);
  NamedAttrList attrs;
  attrs.set(SDDialect::kRoleAttrName, role);
  attrs.set(SDDialect::kLogicalAxesAttrName, makeAxes(&context, spec.axes));
  unsigned index = numParams++;
  (void)func.insertArgument(index, RankedTensorType::get(spec.shape, dtype),
                            attrs.getDictionary(&context), func.getLoc());
  return func.getArgument(index);
}

ParamMap ModelBuilder::params(ArrayRef<ParamSpec> specs, StringRef prefix) {
  ParamMap map;
  for (const ParamSpec &spec : specs)
    map[spec.name] = param(spec, prefix);
  return map;
}

func::FuncOp ModelBuilder::blockFunction(StringRef name, TypeRange leadingTypes,
                                         ArrayRef<ParamSpec> specs,
                                         const BlockBody &blockBody) {
  if (func::FuncOp existing = blockFunctions.lookup(name))
    return existing;
  OpBuilder builder(&context);
  // Block functions precede the model functions, so the file reads
  // bottom-up like C.
  builder.setInsertionPoint(firstFunc);
  SmallVector<Type> argTypes(leadingTypes.begin(), leadingTypes.end());
  for (const ParamSpec &spec : specs)
    argTypes.push_back(RankedTensorType::get(spec.shape, dtype));
  auto block = func::FuncOp::create(builder, firstFunc.getLoc(), name,
                                    builder.getFunctionType(argTypes, {}));
  block.setPrivate();
  Block *entry = block.addEntryBlock();
  FnBuilder f(entry, dtype, getBatchDim());
  // The batch-carrying argument with the fewest elements per sample (the
  // conditioning vector rather than the activations) feeds the ones.
  Value source;
  int64_t sourceSize = 0;
  for (Value arg : entry->getArguments().take_front(leadingTypes.size())) {
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() == 0 || !type.isDynamicDim(0))
      continue;
    int64_t size = numElements(type.getShape().drop_front());
    if (!source || size < sourceSize) {
      source = arg;
      sourceSize = size;
    }
  }
  f.setBatchSource(source);
  SmallVector<Value> leading(
      entry->getArguments().take_front(leadingTypes.size()));
  ParamMap map;
  for (auto [i, spec] : llvm::enumerate(specs))
    map[spec.name] = entry->getArgument(leadingTypes.size() + i);
  SmallVector<Value> results = blockBody(f, leading, map);
  func::ReturnOp::create(f.getBuilder(), f.getLoc(), results);
  block.setFunctionType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  blockFunctions[name] = block;
  return block;
}

SmallVector<Value> ModelBuilder::callBlock(func::FuncOp callee,
                                           ValueRange leading,
                                           ArrayRef<ParamSpec> specs,
                                           StringRef prefix) {
  SmallVector<Value> operands(leading.begin(), leading.end());
  for (const ParamSpec &spec : specs)
    operands.push_back(param(spec, prefix));
  auto call = func::CallOp::create(body->getBuilder(), body->getLoc(), callee,
                                   operands);
  return SmallVector<Value>(call.getResults());
}

OwningOpRef<ModuleOp> ModelBuilder::finish() {
  if (failed(verify(*module))) {
    emitError(module->getLoc())
        << "sdgen produced a program that does not verify (a generator bug)";
    return nullptr;
  }
  return std::move(module);
}

//===----------------------------------------------------------------------===//
// Model functions
//===----------------------------------------------------------------------===//

void modelgen::buildModelFunctions(ModelBuilder &mb,
                                   const ModelNetwork &network) {
  const ModelConfig &c = mb.getConfig();
  Type dtype = mb.getDType();

  // @loss: noise the latents, predict, compare with the target. It says
  // which target, for the tools that train and sample it.
  func::FuncOp loss = mb.beginFunction("loss");
  for (NamedAttribute attr : network.functionAttributes)
    loss->setAttr(attr.getName(), attr.getValue());
  loss->setAttr(SDDialect::kPredictionTypeAttrName,
                PredictionTypeAttr::get(loss.getContext(), c.prediction));
  FnBuilder &f = mb.fn();
  Value x0 = mb.input(InputKind::latents, network.latentShape, dtype,
                      network.latentAxes);
  Value noise = mb.input(InputKind::noise, network.latentShape, dtype,
                         network.latentAxes);
  SmallVector<Value> conditions = network.conditions(mb);
  f.setBatchSource(conditions.front());
  NoisedLatents noised = addNoise(f, c.prediction, x0, noise, conditions[0]);
  Value output = network.predict(mb, noised.input, conditions);
  mb.endFunction(network.loss ? network.loss(f, output, noised.target)
                              : f.mseLoss(output, noised.target));
  if (!c.withDenoise)
    return;

  // @denoise: the same network on given noised latents.
  func::FuncOp denoise = mb.beginFunction("denoise");
  for (NamedAttribute attr : network.functionAttributes)
    denoise->setAttr(attr.getName(), attr.getValue());
  FnBuilder &g = mb.fn();
  Value xt = mb.input(InputKind::latents, network.latentShape, dtype,
                      network.latentAxes);
  conditions = network.conditions(mb);
  g.setBatchSource(conditions.front());
  output = network.predict(mb, xt, conditions);
  mb.endFunction(network.toLatents ? network.toLatents(g, output) : output);
  if (!network.withForward)
    return;

  // @forward: the same network's whole output.
  func::FuncOp forward = mb.beginFunction("forward");
  for (NamedAttribute attr : network.functionAttributes)
    forward->setAttr(attr.getName(), attr.getValue());
  FnBuilder &h = mb.fn();
  xt = mb.input(InputKind::latents, network.latentShape, dtype,
                network.latentAxes);
  conditions = network.conditions(mb);
  h.setBatchSource(conditions.front());
  mb.endFunction(network.predict(mb, xt, conditions));
}
