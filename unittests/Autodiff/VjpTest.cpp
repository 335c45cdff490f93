//===- VjpTest.cpp - gradient checks of every op's VJP --------------------===//
//
// Each case is a small function @f whose last op defines the result %r.
// The test appends @vjp(args..., dy) -> (argument cotangents): @f's body,
// then each op's VjpOpInterface::buildVjp in reverse order, accumulating
// cotangents with sd.add. Both run in the evaluator's f64 mode, and for
// random x, u and dy the directional derivative from central differences,
// <dy, (f(x + εu) − f(x − εu)) / 2ε>, must match <vjp(dy), u>.
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"
#include "sd/Reference/Random.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/DebugStringHelper.h"

#include <cmath>
#include <string>
#include <vector>

using namespace mlir;
using namespace ::sd::testing;
using mlir::sd::EvalOptions;
using mlir::sd::Precision;

namespace {

/// One gradient check: @f(%a0: args[0], ...) -> result { body; return %r }.
struct VjpCase {
  std::string name;
  std::vector<std::string> args;
  std::string result, body;
  /// Range of the float arguments' values.
  double low = -1.5, high = 1.5;
  /// Nonzero: the types have a dynamic batch dimension, specialized to it
  /// after the VJP is built.
  int64_t batch = 0;
  /// Float arguments that must get no cotangent; they are held at 0 (i1
  /// arguments never get one and hold random bits).
  std::vector<unsigned> noGradient = {};
  /// Module-level ops before @f (a mesh).
  std::string prelude = "";

  VjpCase &range(double from, double to) {
    low = from;
    high = to;
    return *this;
  }
  VjpCase &positive() { return range(0.5, 2.0); }
  VjpCase &dynamicBatch(int64_t size) {
    batch = size;
    return *this;
  }
  VjpCase &withoutGradient(std::vector<unsigned> args) {
    noGradient = std::move(args);
    return *this;
  }
  VjpCase &withMesh() {
    prelude = "sd.mesh @mesh = <[\"x\"=2]>";
    return *this;
  }
};

/// Half-width of the central differences.
constexpr double kEpsilon = 1e-5;

/// The f64 evaluation options of every run.
const EvalOptions kF64{Precision::F64};

class VjpTest : public EvaluatorTest {
protected:
  /// Appends @vjp to `module` (see the file comment). Returns the indices
  /// of @f's arguments that got a cotangent, in @vjp's result order.
  FailureOr<SmallVector<unsigned>> buildVjpFunction(ModuleOp module);

  /// Parses `c`'s program and builds its @vjp.
  OwningOpRef<ModuleOp> parseCase(const VjpCase &c,
                                  SmallVector<unsigned> &withCotangent);

  /// The gradient check of `c`.
  void checkGradient(const VjpCase &c);

  /// The ops of type `OpTy` in `c`'s @vjp, which stays in `vjp` (null
  /// after a failure).
  template <typename OpTy> SmallVector<OpTy> opsInVjp(const VjpCase &c) {
    SmallVector<unsigned> withCotangent;
    module = parseCase(c, withCotangent);
    vjp = module ? lookup(*module, "vjp") : func::FuncOp();
    SmallVector<OpTy> ops;
    if (vjp)
      vjp.walk([&](OpTy op) { ops.push_back(op); });
    return ops;
  }
  OwningOpRef<ModuleOp> module;
  func::FuncOp vjp;
};

FailureOr<SmallVector<unsigned>> VjpTest::buildVjpFunction(ModuleOp module) {
  func::FuncOp f = lookup(module, "f");
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  Location loc = f.getLoc();
  OpBuilder b(&context);
  b.setInsertionPointAfter(f);
  unsigned numArgs = f.getNumArguments();
  SmallVector<Type> inputs(f.getArgumentTypes());
  inputs.append(ret.getOperandTypes().begin(), ret.getOperandTypes().end());
  auto vjp = func::FuncOp::create(b, loc, "vjp", b.getFunctionType(inputs, {}));
  for (unsigned i = 0; i < numArgs; ++i)
    vjp.setArgAttrs(i, f.getArgAttrDict(i));
  Block *entry = vjp.addEntryBlock();
  b.setInsertionPointToEnd(entry);

  IRMapping map;
  map.map(f.getArguments(), entry->getArguments().take_front(numArgs));
  SmallVector<Operation *> forward;
  for (Operation &op : f.getBody().front().without_terminator())
    forward.push_back(b.clone(op, map));

  // Looked up only, never iterated: the order of the map does not matter.
  DenseMap<Value, Value> cotangents;
  auto accumulate = [&](Value value, Value cotangent) {
    Value &slot = cotangents[value];
    slot = slot ? mlir::sd::AddOp::create(b, loc, slot, cotangent) : cotangent;
  };
  for (auto [result, dy] : llvm::zip_equal(
           ret.getOperands(), entry->getArguments().drop_front(numArgs)))
    accumulate(map.lookup(result), dy);

  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultCotangents;
    for (Value result : op->getResults())
      resultCotangents.push_back(cotangents.lookup(result));
    if (llvm::all_of(resultCotangents, [](Value v) { return !v; }))
      continue;
    auto differentiable = dyn_cast<mlir::sd::VjpOpInterface>(op);
    if (!differentiable) {
      ADD_FAILURE() << op->getName().getStringRef().str() << " has no VJP";
      return failure();
    }
    SmallVector<Value> operandCotangents;
    if (failed(differentiable.buildVjp(b, resultCotangents, operandCotangents)))
      return failure();
    if (operandCotangents.size() != op->getNumOperands()) {
      ADD_FAILURE() << op->getName().getStringRef().str() << " returned "
                    << operandCotangents.size() << " cotangents";
      return failure();
    }
    for (auto [operand, cotangent] :
         llvm::zip_equal(op->getOperands(), operandCotangents)) {
      if (!cotangent)
        continue;
      EXPECT_EQ(cotangent.getType(), operand.getType())
          << "a cotangent of " << op->getName().getStringRef().str();
      accumulate(operand, cotangent);
    }
  }

  SmallVector<Value> results;
  SmallVector<unsigned> withCotangent;
  for (unsigned i = 0; i < numArgs; ++i)
    if (Value cotangent = cotangents.lookup(entry->getArgument(i))) {
      results.push_back(cotangent);
      withCotangent.push_back(i);
    }
  func::ReturnOp::create(b, loc, results);
  vjp.setFunctionType(
      b.getFunctionType(inputs, ValueRange(results).getTypes()));
  if (failed(verify(module)))
    return failure();
  return withCotangent;
}

OwningOpRef<ModuleOp> VjpTest::parseCase(const VjpCase &c,
                                         SmallVector<unsigned> &withCotangent) {
  std::string source = c.prelude + "\nfunc.func @f(";
  for (auto [i, arg] : llvm::enumerate(c.args))
    source += (i ? ", %a" : "%a") + std::to_string(i) + ": " + arg;
  source += ") -> " + c.result + " {\n" + c.body +
            "\n  return %r : " + c.result + "\n}\n";
  OwningOpRef<ModuleOp> module = parse(source);
  if (!module) {
    ADD_FAILURE() << diagnostics << source;
    return nullptr;
  }
  FailureOr<SmallVector<unsigned>> built = buildVjpFunction(*module);
  if (failed(built)) {
    ADD_FAILURE() << diagnostics << debugString(*module);
    return nullptr;
  }
  withCotangent = *built;
  if (!c.batch)
    return module;
  PassManager pm(&context);
  mlir::sd::SpecializeBatchOptions options;
  options.batch = c.batch;
  pm.addPass(mlir::sd::createSpecializeBatch(options));
  if (failed(pm.run(*module))) {
    ADD_FAILURE() << diagnostics << debugString(*module);
    return nullptr;
  }
  return module;
}

/// A tensor of `type` with element `i` from stream `seed`: uniform in
/// [low, high), random bits for i1, or all zero when `zero`.
static Tensor makeTensor(Type type, uint64_t seed, double low, double high,
                         bool zero = false) {
  auto tensorType = cast<RankedTensorType>(type);
  DType dtype = *mlir::sd::getReferenceDType(tensorType.getElementType());
  Tensor tensor(std::vector<int64_t>(tensorType.getShape().begin(),
                                     tensorType.getShape().end()),
                dtype);
  for (int64_t i = 0; i < tensor.numElements(); ++i) {
    double r = ::sd::ref::uniformAt(seed, i);
    tensor[i] = zero                 ? 0.0
                : dtype == DType::I1 ? r < 0.5
                                     : low + (high - low) * r;
  }
  return tensor;
}

/// Σ a[i]·b[i] over tensors of one shape.
static double dotProduct(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.shape(), b.shape());
  double sum = 0;
  for (int64_t i = 0; i < a.numElements(); ++i)
    sum += a[i] * b[i];
  return sum;
}

void VjpTest::checkGradient(const VjpCase &c) {
  SmallVector<unsigned> withCotangent;
  OwningOpRef<ModuleOp> module = parseCase(c, withCotangent);
  if (!module)
    return;
  func::FuncOp f = lookup(*module, "f"), vjp = lookup(*module, "vjp");
  unsigned numArgs = f.getNumArguments();

  // x, u and dy; fixed arguments are 0 (or random bits) with u = 0.
  std::vector<Tensor> x, u, plus, minus, vjpArgs;
  for (unsigned i = 0; i < numArgs; ++i) {
    Type type = f.getArgumentTypes()[i];
    bool isFloat = isa<FloatType>(getElementTypeOrSelf(type));
    bool fixed = !isFloat || llvm::is_contained(c.noGradient, i);
    EXPECT_EQ(llvm::is_contained(withCotangent, i), !fixed)
        << "argument " << i << (fixed ? " got" : " did not get")
        << " a cotangent";
    x.push_back(makeTensor(type, 100 + i, c.low, c.high, isFloat && fixed));
    u.push_back(makeTensor(type, 200 + i, -1, 1, fixed));
    plus.push_back(x.back());
    minus.push_back(x.back());
    for (int64_t j = 0; j < x.back().numElements(); ++j) {
      plus.back()[j] += kEpsilon * u.back()[j];
      minus.back()[j] -= kEpsilon * u.back()[j];
    }
  }
  vjpArgs = x;
  for (Type type : vjp.getArgumentTypes().drop_front(numArgs))
    vjpArgs.push_back(makeTensor(type, 300, -1, 1));

  auto fPlus = mlir::sd::evaluate(f, plus, kF64);
  auto fMinus = mlir::sd::evaluate(f, minus, kF64);
  auto cotangents = mlir::sd::evaluate(vjp, vjpArgs, kF64);
  ASSERT_TRUE(succeeded(fPlus) && succeeded(fMinus) && succeeded(cotangents))
      << diagnostics;
  double differences = 0;
  for (auto [i, dy] : llvm::enumerate(ArrayRef(vjpArgs).drop_front(numArgs))) {
    Tensor slope = (*fPlus)[i];
    for (int64_t j = 0; j < slope.numElements(); ++j)
      slope[j] = ((*fPlus)[i][j] - (*fMinus)[i][j]) / (2 * kEpsilon);
    differences += dotProduct(dy, slope);
  }
  double vjpTimesU = 0;
  for (auto [k, arg] : llvm::enumerate(withCotangent))
    vjpTimesU += dotProduct((*cotangents)[k], u[arg]);

  double scale = std::max(std::fabs(differences), std::fabs(vjpTimesU));
  EXPECT_LE(std::fabs(differences - vjpTimesU), 1e-6 * scale)
      << "finite differences " << differences << ", vjp " << vjpTimesU;
  // A check of two zeros would prove nothing where a gradient flows.
  if (!withCotangent.empty()) {
    EXPECT_GT(scale, 1e-3);
  }
}

/// Names the case in gtest's messages.
[[maybe_unused]] void PrintTo(const VjpCase &c, std::ostream *os) {
  *os << c.name;
}

class VjpGradientTest : public VjpTest,
                        public ::testing::WithParamInterface<VjpCase> {};

TEST_P(VjpGradientTest, MatchesFiniteDifferences) { checkGradient(GetParam()); }

//===----------------------------------------------------------------------===//
// The cases
//===----------------------------------------------------------------------===//

/// `tensor<shape>`, unless `type` is already a whole type (with attributes).
static std::string tensor(const std::string &type) {
  return type.rfind("tensor", 0) == 0 ? type : "tensor<" + type + ">";
}

/// A case whose op `op` (written after `%r = sd.`) prints its types as a
/// functional type, which is built from the argument and result types.
static VjpCase functional(std::string name, const std::string &op,
                          std::vector<std::string> args, std::string result) {
  std::string types;
  for (const std::string &arg : args)
    types += (types.empty() ? "" : ", ") + tensor(arg);
  for (std::string &arg : args)
    arg = tensor(arg);
  std::string body =
      "%r = sd." + op + " : (" + types + ") -> " + tensor(result);
  return {std::move(name), std::move(args), tensor(result), body};
}

/// A case of op `op` whose operands (`arity` of them) and result have the
/// one type `type`, which it prints once; `attrs` follow the operands.
static VjpCase sameType(std::string name, const std::string &op, unsigned arity,
                        const std::string &type = "2x3xf32",
                        const std::string &attrs = "") {
  std::string operands = "%a0";
  for (unsigned i = 1; i < arity; ++i)
    operands += ", %a" + std::to_string(i);
  return {std::move(name), std::vector<std::string>(arity, tensor(type)),
          tensor(type),
          "%r = sd." + op + " " + operands + " " + attrs + " : " +
              tensor(type)};
}

/// Cases written out: argument types, result type and body as they stand.
static VjpCase custom(std::string name, std::vector<std::string> args,
                      std::string result, std::string body) {
  for (std::string &arg : args)
    arg = tensor(arg);
  return {std::move(name), std::move(args), tensor(result), std::move(body)};
}

std::vector<VjpCase> elementwiseCases() {
  std::vector<VjpCase> cases;
  for (const char *op :
       {"neg", "exp", "tanh", "sin", "cos", "sigmoid", "silu", "erf"})
    cases.push_back(sameType(op, op, 1));
  for (const char *op : {"log", "sqrt", "rsqrt"})
    cases.push_back(sameType(op, op, 1).positive());
  cases.push_back(sameType("gelu_tanh", "gelu", 1).range(-3, 3));
  cases.push_back(
      sameType("gelu_exact", "gelu", 1, "2x3xf32", "{approximate = false}")
          .range(-3, 3));
  for (const char *op : {"add", "sub", "mul", "max", "min"})
    cases.push_back(sameType(op, op, 2));
  for (const char *op : {"div", "pow"})
    cases.push_back(sameType(op, op, 2).positive());
  // Ties: each side gets half, which adds up to the derivative 1.
  cases.push_back(custom("max_tie", {"2x3xf32"}, "2x3xf32",
                         "%r = sd.max %a0, %a0 : tensor<2x3xf32>"));
  cases.push_back(custom("min_tie", {"2x3xf32"}, "2x3xf32",
                         "%r = sd.min %a0, %a0 : tensor<2x3xf32>"));
  cases.push_back(custom("compare", {"2x3xf32", "2x3xf32"}, "2x3xi1",
                         "%r = sd.compare lt, %a0, %a1 : tensor<2x3xf32>")
                      .withoutGradient({0, 1}));
  cases.push_back(
      custom("select", {"2x3xi1", "2x3xf32", "2x3xf32"}, "2x3xf32",
             "%r = sd.select %a0, %a1, %a2 : tensor<2x3xi1>, tensor<2x3xf32>"));
  for (auto [name, from, to] : {std::tuple("convert_to_bf16", "f32", "bf16"),
                                std::tuple("convert_from_bf16", "bf16", "f32"),
                                std::tuple("convert_from_i1", "i1", "f32")})
    cases.push_back(custom(name, {std::string("2x3x") + from},
                           std::string("2x3x") + to,
                           std::string("%r = sd.convert %a0 : tensor<2x3x") +
                               from + "> -> tensor<2x3x" + to + ">"));
  return cases;
}

std::vector<VjpCase> shapeCases() {
  return {
      functional("reduce_sum", "reduce_sum %a0 dims = [1]", {"2x3x4xf32"},
                 "2x4xf32"),
      functional("reduce_sum_outer", "reduce_sum %a0 dims = [0, 2]",
                 {"2x3x4xf32"}, "3xf32"),
      functional("reduce_mean", "reduce_mean %a0 dims = [1]", {"2x3x4xf32"},
                 "2x4xf32"),
      functional("reduce_mean_all", "reduce_mean %a0 dims = [0, 1, 2]",
                 {"2x3x4xf32"}, "f32"),
      functional("reduce_max", "reduce_max %a0 dims = [2]", {"2x3x4xf32"},
                 "2x3xf32"),
      // Every maximum is there twice; the halves add up again.
      custom("reduce_max_tie", {"2x3xf32"}, "2xf32",
             "%c = sd.concat %a0, %a0 dim = 1 : (tensor<2x3xf32>, "
             "tensor<2x3xf32>) -> tensor<2x6xf32>\n"
             "%r = sd.reduce_max %c dims = [1] : (tensor<2x6xf32>) -> "
             "tensor<2xf32>"),
      functional("broadcast_new_dims", "broadcast_in_dim %a0 dims = [1]",
                 {"3xf32"}, "2x3x4xf32"),
      functional("broadcast_unit_dims", "broadcast_in_dim %a0 dims = [0, 2]",
                 {"2x1xf32"}, "2x3x4xf32"),
      functional("reshape", "reshape %a0", {"2x3x4xf32"}, "6x4xf32"),
      functional("transpose", "transpose %a0 permutation = [2, 0, 1]",
                 {"2x3x4xf32"}, "4x2x3xf32"),
      functional("slice",
                 "slice %a0 start = [1, 2] limit = [3, -1] strides = [1, 1]",
                 {"4x5xf32"}, "2x3xf32"),
      functional("slice_strided",
                 "slice %a0 start = [1, 0] limit = [7, 9] strides = [2, 3]",
                 {"7x9xf32"}, "3x3xf32"),
      functional("slice_strided_short",
                 "slice %a0 start = [2, 1] limit = [6, 5] strides = [3, 2]",
                 {"8x9xf32"}, "2x2xf32"),
      functional("concat", "concat %a0, %a1, %a2 dim = 1",
                 {"2x1xf32", "2x3xf32", "2x2xf32"}, "2x6xf32"),
      functional("pad",
                 "pad %a0 low = [1, 0] high = [2, 1] {padding_value = 1.5}",
                 {"2x3xf32"}, "5x4xf32"),
  };
}

std::vector<VjpCase> linearAlgebraCases() {
  const char *matmul = "dot_general %a0, %a1 batch = [] x [] contract = [1] x";
  return {
      functional("dot_matmul", std::string(matmul) + " [0]",
                 {"2x3xf32", "3x4xf32"}, "2x4xf32"),
      // lhs (batch, c1, free, c2), rhs (c2, batch, free, c1), contracted in
      // the order c2, c1.
      functional("dot_batch_odd_contract",
                 "dot_general %a0, %a1 batch = [0] x [1] contract = [3, 1] x "
                 "[0, 3]",
                 {"2x3x4x5xf32", "5x2x6x3xf32"}, "2x4x6xf32"),
      functional("dot_inner_batch",
                 "dot_general %a0, %a1 batch = [1] x [1] contract = [2] x [0]",
                 {"4x2x3xf32", "3x2x5xf32"}, "2x4x5xf32"),
      functional("dot_bf16_to_f32", std::string(matmul) + " [1]",
                 {"2x3xbf16", "4x3xbf16"}, "2x4xf32"),
      functional("layer_norm", "layer_norm %a0", {"2x3x8xf32"}, "2x3x8xf32"),
      functional("layer_norm_affine",
                 "layer_norm %a0 scale %a1 bias %a2 {epsilon = 1.0e-5}",
                 {"2x3x8xf32", "8xf32", "8xf32"}, "2x3x8xf32"),
      functional("layer_norm_bias", "layer_norm %a0 bias %a1",
                 {"3x8xf32", "8xf32"}, "3x8xf32"),
      functional("rms_norm", "rms_norm %a0", {"2x3x8xf32"}, "2x3x8xf32"),
      functional("rms_norm_scale", "rms_norm %a0 scale %a1 {epsilon = 1.0e-5}",
                 {"2x3x8xf32", "8xf32"}, "2x3x8xf32"),
      functional("group_norm", "group_norm %a0 groups = 3", {"2x3x2x6xf32"},
                 "2x3x2x6xf32"),
      functional("group_norm_affine",
                 "group_norm %a0 scale %a1 bias %a2 groups = 2",
                 {"2x3x2x6xf32", "6xf32", "6xf32"}, "2x3x2x6xf32"),
      functional("group_norm_rank2_scale",
                 "group_norm %a0 scale %a1 groups = 4", {"3x8xf32", "8xf32"},
                 "3x8xf32"),
      custom("softmax", {"2x5x3xf32"}, "2x5x3xf32",
             "%r = sd.softmax %a0 dim = 1 : tensor<2x5x3xf32>"),
      functional("attention", "attention %a0, %a1, %a2",
                 {"1x2x3x4xf32", "1x2x5x4xf32", "1x2x5x3xf32"}, "1x2x3x3xf32"),
      functional("attention_scale", "attention %a0, %a1, %a2 scale = 0.3",
                 {"2x1x3x4xf32", "2x1x5x4xf32", "2x1x5x2xf32"}, "2x1x3x2xf32"),
      functional("attention_mask",
                 "attention %a0, %a1, %a2 mask %a3 scale = 0.7",
                 {"2x2x3x4xf32", "2x2x5x4xf32", "2x2x5x3xf32", "2x1x3x5xi1"},
                 "2x2x3x3xf32"),
      // Query 1 attends no key: its output row is zero, with no gradient.
      custom("attention_mask_empty_row",
             {"1x2x3x4xf32", "1x2x4x4xf32", "1x2x4x2xf32"}, "1x2x3x2xf32",
             "%c = sd.constant dense<[[[[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, "
             "0.0], [0.0, 1.0, 0.0, 0.0]]]]> : tensor<1x1x3x4xf32>\n"
             "%z = sd.constant dense<0.5> : tensor<1x1x3x4xf32>\n"
             "%m = sd.compare gt, %c, %z : tensor<1x1x3x4xf32>\n"
             "%r = sd.attention %a0, %a1, %a2 mask %m : (tensor<1x2x3x4xf32>, "
             "tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>, tensor<1x1x3x4xi1>) -> "
             "tensor<1x2x3x2xf32>"),
      functional("conv2d",
                 "conv2d %a0, %a1 strides = [1, 1] padding = [0, 0, 0, 0] "
                 "groups = 1",
                 {"1x5x5x2xf32", "3x3x2x4xf32"}, "1x3x3x4xf32"),
      // The last padded row and column are read by no output.
      functional("conv2d_stride_padding_bias",
                 "conv2d %a0, %a1 bias %a2 strides = [2, 2] padding = [1, 1, "
                 "1, 1] groups = 1",
                 {"2x6x6x2xf32", "3x3x2x3xf32", "3xf32"}, "2x3x3x3xf32"),
      functional("conv2d_groups",
                 "conv2d %a0, %a1 strides = [2, 1] padding = [1, 0, 0, 2] "
                 "groups = 2",
                 {"2x6x6x4xf32", "3x2x2x6xf32"}, "2x3x7x6xf32"),
      functional("conv2d_1x1",
                 "conv2d %a0, %a1 strides = [1, 1] padding = [0, 0, 0, 0] "
                 "groups = 1",
                 {"1x3x3x4xf32", "1x1x4x2xf32"}, "1x3x3x2xf32"),
      functional("conv2d_input_grad",
                 "conv2d_input_grad %a0, %a1 strides = [2, 1] padding = [1, "
                 "0, 0, 2] groups = 2",
                 {"2x3x7x6xf32", "3x2x2x6xf32"}, "2x6x6x4xf32"),
      functional("conv2d_filter_grad",
                 "conv2d_filter_grad %a0, %a1 strides = [2, 1] padding = [1, "
                 "0, 0, 2] groups = 2",
                 {"2x6x6x4xf32", "2x3x7x6xf32"}, "3x2x2x6xf32"),
      functional("upsample_nearest", "upsample_nearest %a0 scale = [2, 3]",
                 {"1x2x3x2xf32"}, "1x4x9x2xf32"),
  };
}

std::vector<VjpCase> otherCases() {
  return {
      custom("rng_offsets", {"f32", "f32"}, "2x3xf32",
             "%r = sd.rng_normal seed = 7 offsets(%a0, %a1) global_shape = "
             "[4, 6] : tensor<2x3xf32>")
          .withoutGradient({0, 1}),
      custom("rng_uniform_offsets", {"f32"}, "3xf32",
             "%r = sd.rng_uniform seed = 3 offsets(%a0) global_shape = [5] : "
             "tensor<3xf32>")
          .withoutGradient({0}),
      custom("mse_loss", {"2x3xf32", "2x3xf32"}, "f32",
             "%r = sd.mse_loss %a0, %a1 : tensor<2x3xf32>"),
      custom("mse_loss_bf16", {"2x3xbf16", "2x3xbf16"}, "f32",
             "%r = sd.mse_loss %a0, %a1 : tensor<2x3xbf16>"),
      custom("sharding_constraint_logical", {"2x3xf32"}, "2x3xf32",
             "%r = sd.sharding_constraint %a0 logical = <[batch, embed]> : "
             "tensor<2x3xf32>"),
      custom("sharding_constraint_mesh", {"2x3xf32"}, "2x3xf32",
             "%r = sd.sharding_constraint %a0 sharding = <@mesh, [{\"x\"}, "
             "{}]> : tensor<2x3xf32>")
          .withMesh(),
      custom("reshard",
             {"tensor<2x3xf32> {sd.sharding = #sd.sharding<@mesh, [{\"x\", "
              "?}, {}]>}"},
             "2x3xf32",
             "%r = sd.reshard %a0 sharding = <@mesh, [{}, {}]> : "
             "tensor<2x3xf32>")
          .withMesh(),
      custom("offload_reload", {"2x3xf32"}, "2x3xf32",
             "%h = sd.offload %a0 : tensor<2x3xf32>\n"
             "%r = sd.reload %h : tensor<2x3xf32>"),
  };
}

// A dynamic batch dimension, specialized to 2 after differentiation:
// constants and element counts over it are built without its size.
std::vector<VjpCase> dynamicBatchCases() {
  std::vector<VjpCase> cases = {
      custom("mse_loss", {"?x3xf32", "?x3xf32"}, "f32",
             "%r = sd.mse_loss %a0, %a1 : tensor<?x3xf32>"),
      functional("reduce_mean_batch", "reduce_mean %a0 dims = [0]", {"?x3xf32"},
                 "3xf32"),
      functional("broadcast_to_batch", "broadcast_in_dim %a0 dims = [1]",
                 {"3xf32"}, "?x3xf32"),
      sameType("sqrt", "sqrt", 1, "?x3xf32").positive(),
      sameType("gelu_exact", "gelu", 1, "?x3xf32", "{approximate = false}"),
      custom("select", {"2x3xi1", "?x3xf32", "?x3xf32"}, "?x3xf32",
             "%r = sd.select %a0, %a1, %a2 : tensor<2x3xi1>, tensor<?x3xf32>"),
      functional("reshape", "reshape %a0", {"?x6xf32"}, "?x2x3xf32"),
      functional("slice_strided",
                 "slice %a0 start = [0, 1] limit = [-1, 7] strides = [1, 2]",
                 {"?x7xf32"}, "?x3xf32"),
      functional("concat", "concat %a0, %a1 dim = 1", {"?x2xf32", "?x3xf32"},
                 "?x5xf32"),
      functional("dot",
                 "dot_general %a0, %a1 batch = [] x [] contract = [1] x [0]",
                 {"?x3xf32", "3x4xf32"}, "?x4xf32"),
      functional("layer_norm", "layer_norm %a0 scale %a1 bias %a2",
                 {"?x4xf32", "4xf32", "4xf32"}, "?x4xf32"),
      functional("group_norm", "group_norm %a0 scale %a1 groups = 2",
                 {"?x2x2x4xf32", "4xf32"}, "?x2x2x4xf32"),
      functional("attention", "attention %a0, %a1, %a2",
                 {"?x2x3x4xf32", "?x2x3x4xf32", "?x2x3x2xf32"}, "?x2x3x2xf32"),
      functional("conv2d_groups",
                 "conv2d %a0, %a1 strides = [2, 2] padding = [1, 1, 1, 1] "
                 "groups = 2",
                 {"?x5x5x4xf32", "3x3x2x4xf32"}, "?x3x3x4xf32"),
      functional("upsample_nearest", "upsample_nearest %a0 scale = [2, 1]",
                 {"?x2x2x1xf32"}, "?x4x2x1xf32"),
  };
  for (VjpCase &c : cases)
    c.dynamicBatch(2);
  return cases;
}

std::string caseName(const ::testing::TestParamInfo<VjpCase> &info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Elementwise, VjpGradientTest,
                         ::testing::ValuesIn(elementwiseCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Shapes, VjpGradientTest,
                         ::testing::ValuesIn(shapeCases()), caseName);
INSTANTIATE_TEST_SUITE_P(LinearAlgebra, VjpGradientTest,
                         ::testing::ValuesIn(linearAlgebraCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Others, VjpGradientTest,
                         ::testing::ValuesIn(otherCases()), caseName);
INSTANTIATE_TEST_SUITE_P(DynamicBatch, VjpGradientTest,
                         ::testing::ValuesIn(dynamicBatchCases()), caseName);

//===----------------------------------------------------------------------===//
// What the VJPs build besides numbers
//===----------------------------------------------------------------------===//

/// A reshard's cotangent returns to the operand's sharding, closed and
/// without priorities; without an operand sharding it passes through.
TEST_F(VjpTest, ReshardReturnsToOperandSharding) {
  const char *reshard = "%r = sd.reshard %a0 sharding = <@mesh, [{}, "
                        "{\"x\"}]> : tensor<4x6xf32>";
  const char *sharded = "tensor<4x6xf32> {sd.sharding = #sd.sharding<@mesh, "
                        "[{\"x\", ?}, {?}p1]>}";
  auto reshards = opsInVjp<mlir::sd::ReshardOp>(
      custom("sharded", {sharded}, "4x6xf32", reshard).withMesh());
  ASSERT_EQ(reshards.size(), 2u);
  EXPECT_EQ(reshards[1].getSharding(),
            parseAttribute("#sd.sharding<@mesh, [{\"x\"}, {}]>", &context));

  reshards = opsInVjp<mlir::sd::ReshardOp>(
      custom("unsharded", {"4x6xf32"}, "4x6xf32", reshard).withMesh());
  ASSERT_EQ(reshards.size(), 1u);
  auto ret = cast<func::ReturnOp>(vjp.getBody().front().getTerminator());
  EXPECT_EQ(ret.getOperand(0), vjp.getArgument(1));
}

/// A constraint's cotangent gets the same constraint.
TEST_F(VjpTest, ConstraintIsKeptOnCotangent) {
  auto constraints = opsInVjp<mlir::sd::ShardingConstraintOp>(
      custom("constraint", {"4x6xf32"}, "4x6xf32",
             "%r = sd.sharding_constraint %a0 sharding = <@mesh, [{\"x\"}, "
             "{}]> logical = <[batch, embed]> : tensor<4x6xf32>")
          .withMesh());
  ASSERT_EQ(constraints.size(), 2u);
  EXPECT_EQ(constraints[1].getInput(), vjp.getArgument(1));
  EXPECT_EQ(constraints[1]->getAttrDictionary(),
            constraints[0]->getAttrDictionary());
}

/// A null (zero) result cotangent gives null operand cotangents and builds
/// nothing.
TEST_F(VjpTest, ZeroCotangentBuildsNothing) {
  OwningOpRef<ModuleOp> parsed = parse(R"mlir(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
      %r = sd.dot_general %a, %b batch = [] x [] contract = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      return %r : tensor<2x4xf32>
    }
  )mlir");
  ASSERT_TRUE(parsed) << diagnostics;
  func::FuncOp f = lookup(*parsed, "f");
  Operation *dot = &f.getBody().front().front();
  OpBuilder b(dot);
  SmallVector<Value> cotangents;
  ASSERT_TRUE(succeeded(
      cast<mlir::sd::VjpOpInterface>(dot).buildVjp(b, {Value()}, cotangents)));
  EXPECT_EQ(cotangents, SmallVector<Value>(2, Value()));
  EXPECT_EQ(f.getBody().front().getOperations().size(), 2u);
}

/// A pad or concat along a dynamic dimension cannot slice its cotangent.
TEST_F(VjpTest, DynamicPaddedDimensionIsAnError) {
  for (const char *body :
       {"%r = sd.pad %a0 low = [1, 0] high = [0, 0] : (tensor<?x3xf32>) -> "
        "tensor<?x3xf32>",
        "%r = sd.concat %a0, %a0 dim = 0 : (tensor<?x3xf32>, "
        "tensor<?x3xf32>) -> tensor<?x3xf32>"}) {
    diagnostics.clear();
    OwningOpRef<ModuleOp> parsed =
        parse(std::string("func.func @f(%a0: tensor<?x3xf32>) -> "
                          "tensor<?x3xf32> {\n") +
              body + "\n return %r : tensor<?x3xf32>\n}\n");
    ASSERT_TRUE(parsed) << diagnostics;
    Operation *op = &lookup(*parsed, "f").getBody().front().front();
    OpBuilder b(op->getBlock()->getTerminator());
    SmallVector<Value> cotangents;
    EXPECT_TRUE(failed(cast<mlir::sd::VjpOpInterface>(op).buildVjp(
        b, {op->getResult(0)}, cotangents)));
    EXPECT_NE(diagnostics.find("cannot be differentiated along dynamic "
                               "dimension 0 of 'tensor<?x3xf32>'"),
              std::string::npos)
        << diagnostics;
  }
}

} // namespace
