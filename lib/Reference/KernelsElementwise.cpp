//===- KernelsElementwise.cpp - Elementwise reference kernels -------------===//
//
// Unary/binary arithmetic, comparisons, select, convert, iota and the MSE loss.
//
//===----------------------------------------------------------------------===//

#include "KernelsInternal.h"
#include "sd/Reference/Kernels.h"

#include <cassert>
#include <cmath>
#include <limits>

namespace sd::ref {

/// Logistic function, written so exp never overflows: for x < 0 it uses
/// e^x / (1 + e^x) where e^x <= 1.
static double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double applyUnary(UnaryKind kind, double x) {
  switch (kind) {
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Abs:
    return std::fabs(x);
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Rsqrt:
    return 1.0 / std::sqrt(x);
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Sin:
    return std::sin(x);
  case UnaryKind::Cos:
    return std::cos(x);
  case UnaryKind::Sigmoid:
    return sigmoid(x);
  case UnaryKind::Silu:
    return x * sigmoid(x);
  case UnaryKind::GeluTanh: {
    // sqrt(2 / pi), spelled out so the constant is visibly the textbook one.
    const double kPi = 3.14159265358979323846;
    const double kSqrt2OverPi = std::sqrt(2.0 / kPi);
    return 0.5 * x *
           (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  }
  case UnaryKind::GeluErf:
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case UnaryKind::Erf:
    return std::erf(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Tensor unary(UnaryKind kind, const Tensor &x) {
  Tensor result(x.shape(), x.dtype());
  for (int64_t i = 0, e = x.numElements(); i < e; ++i)
    result[i] = applyUnary(kind, x[i]);
  return result;
}

Tensor gelu(const Tensor &x, bool tanhApproximation) {
  return unary(tanhApproximation ? UnaryKind::GeluTanh : UnaryKind::GeluErf, x);
}

double applyBinary(BinaryKind kind, double a, double b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Max:
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<double>::quiet_NaN();
    return a < b ? b : a;
  case BinaryKind::Min:
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<double>::quiet_NaN();
    return b < a ? b : a;
  case BinaryKind::Pow:
    return std::pow(a, b);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Tensor binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs) {
  assert(lhs.shape() == rhs.shape() && "binary operands differ in shape");
  Tensor result(lhs.shape(), lhs.dtype());
  for (int64_t i = 0, e = lhs.numElements(); i < e; ++i)
    result[i] = applyBinary(kind, lhs[i], rhs[i]);
  return result;
}

/// One comparison; the built-in operators already give IEEE NaN semantics.
static bool applyCompare(CompareKind kind, double a, double b) {
  switch (kind) {
  case CompareKind::EQ:
    return a == b;
  case CompareKind::NE:
    return a != b;
  case CompareKind::LT:
    return a < b;
  case CompareKind::LE:
    return a <= b;
  case CompareKind::GT:
    return a > b;
  case CompareKind::GE:
    return a >= b;
  }
  return false;
}

Tensor compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs) {
  assert(lhs.shape() == rhs.shape() && "compare operands differ in shape");
  Tensor result(lhs.shape(), DType::I1);
  for (int64_t i = 0, e = lhs.numElements(); i < e; ++i)
    result[i] = applyCompare(kind, lhs[i], rhs[i]) ? 1.0 : 0.0;
  return result;
}

Tensor select(const Tensor &pred, const Tensor &onTrue, const Tensor &onFalse) {
  assert(onTrue.shape() == onFalse.shape() && "select branches differ");
  assert((pred.rank() == 0 || pred.shape() == onTrue.shape()) &&
         "select predicate must be rank 0 or match the branches");
  bool scalarPred = pred.rank() == 0;
  Tensor result(onTrue.shape(), onTrue.dtype());
  for (int64_t i = 0, e = onTrue.numElements(); i < e; ++i) {
    double p = scalarPred ? pred[0] : pred[i];
    result[i] = p != 0.0 ? onTrue[i] : onFalse[i];
  }
  return result;
}

Tensor convert(const Tensor &x, DType dtype) {
  Tensor result(x.shape(), dtype, x.values());
  if (dtype == DType::I1)
    result.roundToDType();
  return result;
}

Tensor iota(const std::vector<int64_t> &shape, int64_t dim, DType dtype) {
  assert(dim >= 0 && dim < static_cast<int64_t>(shape.size()) &&
         "iota dimension out of range");
  Tensor result(shape, dtype);
  // Index along `dim` of row-major position i is (i / stride) % size.
  int64_t stride = rowMajorStrides(shape)[dim];
  for (int64_t i = 0, e = result.numElements(); i < e; ++i)
    result[i] = static_cast<double>((i / stride) % shape[dim]);
  return result;
}

Tensor mseLoss(const Tensor &pred, const Tensor &target) {
  assert(pred.shape() == target.shape() && "mse operands differ in shape");
  double sum = 0.0;
  int64_t n = pred.numElements();
  for (int64_t i = 0; i < n; ++i) {
    double d = pred[i] - target[i];
    sum += d * d;
  }
  return Tensor::scalar(sum / static_cast<double>(n), DType::F32);
}

std::array<Tensor, 3> adamw(const Tensor &p, const Tensor &g, const Tensor &mu,
                            const Tensor &nu, const AdamWScalars &c) {
  assert(g.shape() == p.shape() && mu.shape() == p.shape() &&
         nu.shape() == p.shape() && "adamw operands differ in shape");
  std::array<Tensor, 3> out = {Tensor(p.shape(), p.dtype()),
                               Tensor(p.shape(), p.dtype()),
                               Tensor(p.shape(), p.dtype())};
  for (int64_t i = 0, n = p.numElements(); i < n; ++i) {
    double m = c.beta1 * mu[i] + c.oneMinusBeta1 * g[i];
    double v = c.beta2 * nu[i] + c.oneMinusBeta2 * (g[i] * g[i]);
    double direction =
        (m / c.correction1) / (std::sqrt(v / c.correction2) + c.epsilon);
    direction += c.weightDecay * p[i];
    out[0][i] = p[i] - c.learningRate * direction;
    out[1][i] = m;
    out[2][i] = v;
  }
  return out;
}

} // namespace sd::ref
