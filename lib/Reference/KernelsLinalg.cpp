//===- KernelsLinalg.cpp - dot_general, convolution, attention ------------===//

#include "KernelsInternal.h"
#include "sd/Reference/Kernels.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace sd::ref {

using detail::areValidDims;

/// Dimensions of a rank-`rank` operand that are neither batch nor contracting,
/// in increasing order.
static std::vector<int64_t> freeDims(int64_t rank,
                                     const std::vector<int64_t> &batch,
                                     const std::vector<int64_t> &contracting) {
  std::vector<int64_t> result;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contracting.begin(), contracting.end(), d) ==
            contracting.end())
      result.push_back(d);
  return result;
}

/// Concatenation of three dimension lists (a permutation for `transpose`).
static std::vector<int64_t> join(const std::vector<int64_t> &a,
                                 const std::vector<int64_t> &b,
                                 const std::vector<int64_t> &c) {
  std::vector<int64_t> result(a);
  result.insert(result.end(), b.begin(), b.end());
  result.insert(result.end(), c.begin(), c.end());
  return result;
}

/// Product of x's sizes along `dims`.
static int64_t sizeOf(const Tensor &x, const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= x.dim(d);
  return n;
}

Tensor dotGeneral(const Tensor &lhs, const Tensor &rhs,
                  const std::vector<int64_t> &lhsBatch,
                  const std::vector<int64_t> &rhsBatch,
                  const std::vector<int64_t> &lhsContracting,
                  const std::vector<int64_t> &rhsContracting) {
  assert(lhsBatch.size() == rhsBatch.size() &&
         lhsContracting.size() == rhsContracting.size() &&
         "unpaired dot_general dimensions");
  std::vector<int64_t> lhsFree = freeDims(lhs.rank(), lhsBatch, lhsContracting);
  std::vector<int64_t> rhsFree = freeDims(rhs.rank(), rhsBatch, rhsContracting);
  std::vector<int64_t> lhsPerm = join(lhsBatch, lhsFree, lhsContracting);
  std::vector<int64_t> rhsPerm = join(rhsBatch, rhsContracting, rhsFree);
  assert(areValidDims(lhsPerm, lhs.rank()) &&
         areValidDims(rhsPerm, rhs.rank()) && "bad dot_general dimensions");
  for (size_t i = 0; i < lhsBatch.size(); ++i)
    assert(lhs.dim(lhsBatch[i]) == rhs.dim(rhsBatch[i]) &&
           "batch sizes differ");
  for (size_t i = 0; i < lhsContracting.size(); ++i)
    assert(lhs.dim(lhsContracting[i]) == rhs.dim(rhsContracting[i]) &&
           "contracting sizes differ");

  // Canonicalize to a batched matmul [B, M, K] x [B, K, N] -> [B, M, N]:
  // transposing puts the dimensions in that order and the row-major layout
  // then lets each group be read as one flattened dimension.
  int64_t b = sizeOf(lhs, lhsBatch), m = sizeOf(lhs, lhsFree),
          k = sizeOf(lhs, lhsContracting), n = sizeOf(rhs, rhsFree);
  Tensor l = transpose(lhs, lhsPerm);
  Tensor r = transpose(rhs, rhsPerm);

  std::vector<int64_t> resultShape;
  for (int64_t d : lhsBatch)
    resultShape.push_back(lhs.dim(d));
  for (int64_t d : lhsFree)
    resultShape.push_back(lhs.dim(d));
  for (int64_t d : rhsFree)
    resultShape.push_back(rhs.dim(d));
  Tensor result(resultShape, lhs.dtype());

  // i-k-j loop order: the innermost loop runs over contiguous rows of r and
  // the result; each result element still sums its products in k order.
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < m; ++i) {
      double *out = result.values().data() + (bi * m + i) * n;
      for (int64_t ki = 0; ki < k; ++ki) {
        double a = l[(bi * m + i) * k + ki];
        const double *row = r.values().data() + (bi * k + ki) * n;
        for (int64_t j = 0; j < n; ++j)
          out[j] += a * row[j];
      }
    }
  return result;
}

namespace {
/// A convolution's sizes: input [N, H, W, Cin], kernel [KH, KW, Cin/G, Cout],
/// result [N, Ho, Wo, Cout], and the geometry that relates them.
struct ConvGeometry {
  int64_t n, h, w, cin, kh, kw, cinG, cout, ho, wo, groups;
  std::array<int64_t, 2> strides;
  std::array<int64_t, 4> padding;

  /// Calls `visit(xOffset, wOffset, yOffset)` for every sample, output
  /// pixel, tap, output channel and input channel of its group whose tap
  /// reads the input (not the padding): the linear offsets of the input,
  /// kernel and result elements that one multiply-add pairs.
  template <typename Fn> void forEachProduct(Fn visit) const {
    int64_t coutG = cout / groups;
    for (int64_t ni = 0; ni < n; ++ni)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          int64_t yAt = ((ni * ho + oy) * wo + ox) * cout;
          for (int64_t ky = 0; ky < kh; ++ky) {
            int64_t iy = oy * strides[0] - padding[0] + ky;
            if (iy < 0 || iy >= h)
              continue;
            for (int64_t kx = 0; kx < kw; ++kx) {
              int64_t ix = ox * strides[1] - padding[2] + kx;
              if (ix < 0 || ix >= w)
                continue;
              int64_t xAt = ((ni * h + iy) * w + ix) * cin;
              int64_t wAt = (ky * kw + kx) * cinG * cout;
              for (int64_t o = 0; o < cout; ++o) {
                int64_t firstIn = (o / coutG) * cinG;
                for (int64_t c = 0; c < cinG; ++c)
                  visit(xAt + firstIn + c, wAt + c * cout + o, yAt + o);
              }
            }
          }
        }
  }
};

ConvGeometry makeGeometry(const std::vector<int64_t> &x,
                          const std::vector<int64_t> &w,
                          std::array<int64_t, 2> strides,
                          std::array<int64_t, 4> padding, int64_t groups) {
  assert(x.size() == 4 && w.size() == 4 && "expected NHWC input, HWIO kernel");
  ConvGeometry g{x[0], x[1], x[2], x[3],   w[0],    w[1],   w[2],
                 w[3], 0,    0,    groups, strides, padding};
  assert(groups > 0 && g.cin == g.cinG * groups && g.cout % groups == 0 &&
         "channels do not split into groups");
  assert(strides[0] > 0 && strides[1] > 0 && "strides must be positive");
  g.ho = (g.h + padding[0] + padding[1] - g.kh) / strides[0] + 1;
  g.wo = (g.w + padding[2] + padding[3] - g.kw) / strides[1] + 1;
  assert(g.ho >= 0 && g.wo >= 0 && "kernel larger than padded input");
  return g;
}
} // namespace

Tensor conv2d(const Tensor &x, const Tensor &w, const Tensor *bias,
              std::array<int64_t, 2> strides, std::array<int64_t, 4> padding,
              int64_t groups) {
  ConvGeometry g = makeGeometry(x.shape(), w.shape(), strides, padding, groups);
  assert((!bias || (bias->rank() == 1 && bias->dim(0) == g.cout)) &&
         "bias must be [Cout]");
  Tensor result({g.n, g.ho, g.wo, g.cout}, x.dtype());
  double *y = result.values().data();
  if (bias)
    for (int64_t p = 0; p < g.n * g.ho * g.wo; ++p)
      for (int64_t o = 0; o < g.cout; ++o)
        y[p * g.cout + o] = (*bias)[o];
  const double *in = x.values().data(), *ker = w.values().data();
  g.forEachProduct(
      [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += in[xi] * ker[wi]; });
  return result;
}

Tensor conv2dInputGrad(const Tensor &dy, const Tensor &w,
                       const std::vector<int64_t> &inputShape,
                       std::array<int64_t, 2> strides,
                       std::array<int64_t, 4> padding, int64_t groups) {
  ConvGeometry g =
      makeGeometry(inputShape, w.shape(), strides, padding, groups);
  assert(dy.shape() == std::vector<int64_t>({g.n, g.ho, g.wo, g.cout}) &&
         "dy must have the convolution's result shape");
  Tensor result(inputShape, dy.dtype());
  double *dx = result.values().data();
  const double *grad = dy.values().data(), *ker = w.values().data();
  g.forEachProduct([&](int64_t xi, int64_t wi, int64_t yi) {
    dx[xi] += grad[yi] * ker[wi];
  });
  return result;
}

Tensor conv2dFilterGrad(const Tensor &x, const Tensor &dy,
                        const std::vector<int64_t> &kernelShape,
                        std::array<int64_t, 2> strides,
                        std::array<int64_t, 4> padding, int64_t groups) {
  ConvGeometry g =
      makeGeometry(x.shape(), kernelShape, strides, padding, groups);
  assert(dy.shape() == std::vector<int64_t>({g.n, g.ho, g.wo, g.cout}) &&
         "dy must have the convolution's result shape");
  Tensor result(kernelShape, dy.dtype());
  double *dw = result.values().data();
  const double *in = x.values().data(), *grad = dy.values().data();
  g.forEachProduct(
      [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += in[xi] * grad[yi]; });
  return result;
}

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, double scale) {
  assert(q.rank() == 4 && k.rank() == 4 && v.rank() == 4 &&
         "expected [B, H, S, D] operands");
  int64_t b = q.dim(0), h = q.dim(1), sq = q.dim(2), d = q.dim(3);
  int64_t skv = k.dim(2), dv = v.dim(3);
  assert(k.dim(0) == b && k.dim(1) == h && k.dim(3) == d &&
         "key shape does not match the query");
  assert(v.dim(0) == b && v.dim(1) == h && v.dim(2) == skv &&
         "value shape does not match the key");
  assert((!mask ||
          (mask->rank() == 4 && (mask->dim(0) == b || mask->dim(0) == 1) &&
           (mask->dim(1) == h || mask->dim(1) == 1) && mask->dim(2) == sq &&
           mask->dim(3) == skv)) &&
         "mask must be [B or 1, H or 1, Sq, Skv]");

  Tensor result({b, h, sq, dv}, q.dtype());
  bool bf16Products = q.dtype() == DType::BF16;
  std::vector<double> logits(skv);
  std::vector<bool> attend(skv);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi) {
      const double *qh = q.values().data() + (bi * h + hi) * sq * d;
      const double *kh = k.values().data() + (bi * h + hi) * skv * d;
      const double *vh = v.values().data() + (bi * h + hi) * skv * dv;
      // Size-1 mask dimensions broadcast over batch / heads.
      const double *mh = nullptr;
      if (mask) {
        int64_t mb = mask->dim(0) == 1 ? 0 : bi;
        int64_t mhd = mask->dim(1) == 1 ? 0 : hi;
        mh = mask->values().data() + (mb * mask->dim(1) + mhd) * sq * skv;
      }
      for (int64_t i = 0; i < sq; ++i) {
        double maxLogit = -std::numeric_limits<double>::infinity();
        bool any = false;
        for (int64_t j = 0; j < skv; ++j) {
          attend[j] = !mh || mh[i * skv + j] != 0.0;
          if (!attend[j])
            continue;
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += qh[i * d + c] * kh[j * d + c];
          logits[j] = scale * dot;
          maxLogit = any ? std::max(maxLogit, logits[j]) : logits[j];
          any = true;
        }
        double *out = result.values().data() + ((bi * h + hi) * sq + i) * dv;
        // Nothing to attend to: the output row stays zero.
        if (!any)
          continue;
        double denom = 0.0;
        for (int64_t j = 0; j < skv; ++j)
          if (attend[j]) {
            logits[j] = std::exp(logits[j] - maxLogit);
            denom += logits[j];
          }
        for (int64_t j = 0; j < skv; ++j)
          if (attend[j]) {
            double p = logits[j] / denom;
            if (bf16Products)
              p = roundTo(DType::BF16, p);
            for (int64_t c = 0; c < dv; ++c)
              out[c] += p * vh[j * dv + c];
          }
      }
    }
  return result;
}

} // namespace sd::ref
