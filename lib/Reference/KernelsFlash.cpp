//===- KernelsFlash.cpp - Tiled (flash) attention, forward and backward ---===//
//
// The flash-attention algorithm written out loop by loop in double, so that
// the tiling itself (block and sub-block bounds, partial last blocks, the
// online softmax, the recomputation of P in the backward) has an executable
// specification that tests compare against the untiled `attention`. Nothing
// here is tuned: each block loop is the plain loop of the kernel it mirrors.
// With bf16 operands it rounds the probabilities and score gradients to bf16
// where a product reads them, as the runtime's bf16 tiles do.
//
//===----------------------------------------------------------------------===//

#include "sd/Reference/Kernels.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

namespace sd::ref {

static constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// Calls fn(first, last) for consecutive blocks [first, last) of `size` rows
/// covering [begin, end): the last block is partial when `size` does not
/// divide the length, and a size above the length gives one block. (A size
/// below 1 is a precondition violation; release builds treat it as 1 rather
/// than loop forever.)
template <typename Fn>
static void forEachBlock(int64_t begin, int64_t end, int64_t size, Fn fn) {
  assert(size >= 1 && "block sizes must be positive");
  size = std::max<int64_t>(size, 1);
  for (int64_t first = begin; first < end; first += size)
    fn(first, std::min(first + size, end));
}

/// The operands of one (batch, head) pair: row-major [S, D] matrices and the
/// [Sq, Skv] mask slab (null: attend everywhere).
struct HeadOperands {
  const double *q, *k, *v, *mask;
  int64_t sq, skv, d, dv;
  double scale;
  /// bf16 operands: P and dS are rounded to bf16 where a product reads them
  /// (P·V, Pᵀ·dO, dS·K, dSᵀ·Q), as the runtime's bf16 tiles do.
  bool bf16Products;

  /// `x` as the operand of a product.
  double productOperand(double x) const {
    return bf16Products ? roundTo(DType::BF16, x) : x;
  }

  bool allowed(int64_t i, int64_t j) const {
    return !mask || mask[i * skv + j] != 0.0;
  }
  /// scale * q_i . k_j, or -inf where the mask forbids the pair (so that its
  /// exponential is 0 in the online softmax).
  double logit(int64_t i, int64_t j) const {
    if (!allowed(i, j))
      return kNegInf;
    double dot = 0.0;
    for (int64_t c = 0; c < d; ++c)
      dot += q[i * d + c] * k[j * d + c];
    return scale * dot;
  }
};

/// Asserts the shapes `attention` documents.
static void assertAttentionOperands(const Tensor &q, const Tensor &k,
                                    const Tensor &v, const Tensor *mask) {
  assert(q.rank() == 4 && k.rank() == 4 && v.rank() == 4 &&
         "expected [B, H, S, D] operands");
  assert(k.dim(0) == q.dim(0) && k.dim(1) == q.dim(1) && k.dim(3) == q.dim(3) &&
         "key shape does not match the query");
  assert(v.dim(0) == k.dim(0) && v.dim(1) == k.dim(1) && v.dim(2) == k.dim(2) &&
         "value shape does not match the key");
  assert((!mask || (mask->rank() == 4 &&
                    (mask->dim(0) == q.dim(0) || mask->dim(0) == 1) &&
                    (mask->dim(1) == q.dim(1) || mask->dim(1) == 1) &&
                    mask->dim(2) == q.dim(2) && mask->dim(3) == k.dim(2))) &&
         "mask must be [B or 1, H or 1, Sq, Skv]");
  (void)q, (void)k, (void)v, (void)mask;
}

/// The operands of batch `bi`, head `hi`; size-1 mask dimensions broadcast.
static HeadOperands headOperands(const Tensor &q, const Tensor &k,
                                 const Tensor &v, const Tensor *mask,
                                 double scale, int64_t bi, int64_t hi) {
  int64_t h = q.dim(1), sq = q.dim(2), skv = k.dim(2);
  int64_t d = q.dim(3), dv = v.dim(3);
  int64_t head = bi * h + hi;
  const double *mh = nullptr;
  if (mask) {
    int64_t mb = mask->dim(0) == 1 ? 0 : bi;
    int64_t mhd = mask->dim(1) == 1 ? 0 : hi;
    mh = mask->values().data() + (mb * mask->dim(1) + mhd) * sq * skv;
  }
  return {q.values().data() + head * sq * d,
          k.values().data() + head * skv * d,
          v.values().data() + head * skv * dv,
          mh,
          sq,
          skv,
          d,
          dv,
          scale,
          q.dtype() == DType::BF16};
}

FlashForward flashAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                            const Tensor *mask, double scale,
                            const FlashBlockSizes &blocks) {
  assertAttentionOperands(q, k, v, mask);
  int64_t b = q.dim(0), h = q.dim(1), sq = q.dim(2), dv = v.dim(3);
  FlashForward result{Tensor({b, h, sq, dv}, q.dtype()),
                      Tensor({b, h, sq}, q.dtype(), kNegInf)};

  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi) {
      HeadOperands op = headOperands(q, k, v, mask, scale, bi, hi);
      double *out = result.out.values().data() + (bi * h + hi) * sq * dv;
      double *lse = result.lse.values().data() + (bi * h + hi) * sq;
      forEachBlock(0, sq, blocks.blockQ, [&](int64_t q0, int64_t q1) {
        int64_t rows = q1 - q0;
        // Online-softmax state of the block's rows: running maximum m, sum
        // l = sum exp(s - m) and accumulator acc = sum exp(s - m) v.
        std::vector<double> m(rows, kNegInf), l(rows, 0.0), acc(rows * dv);
        forEachBlock(0, op.skv, blocks.blockKv, [&](int64_t k0, int64_t k1) {
          forEachBlock(k0, k1, blocks.blockKvCompute,
                       [&](int64_t c0, int64_t c1) {
                         int64_t cols = c1 - c0;
                         // The logit tile S = scale Q_blk K_sub^T (-inf where
                         // masked).
                         std::vector<double> s(rows * cols);
                         for (int64_t r = 0; r < rows; ++r)
                           for (int64_t j = 0; j < cols; ++j)
                             s[r * cols + j] = op.logit(q0 + r, c0 + j);
                         for (int64_t r = 0; r < rows; ++r) {
                           double mNew = m[r];
                           for (int64_t j = 0; j < cols; ++j)
                             mNew = std::max(mNew, s[r * cols + j]);
                           // No key allowed so far: the state stays empty.
                           if (mNew == kNegInf)
                             continue;
                           // Rescale the old state to the new maximum
                           // (exp(-inf) = 0 when the state was empty).
                           double alpha = std::exp(m[r] - mNew);
                           l[r] *= alpha;
                           for (int64_t c = 0; c < dv; ++c)
                             acc[r * dv + c] *= alpha;
                           for (int64_t j = 0; j < cols; ++j) {
                             double p = std::exp(s[r * cols + j] - mNew);
                             l[r] += p;
                             double pv = op.productOperand(p);
                             for (int64_t c = 0; c < dv; ++c)
                               acc[r * dv + c] += pv * op.v[(c0 + j) * dv + c];
                           }
                           m[r] = mNew;
                         }
                       });
        });
        // Normalize; a row that allowed no key keeps out 0 and lse -inf.
        for (int64_t r = 0; r < rows; ++r) {
          if (m[r] == kNegInf)
            continue;
          for (int64_t c = 0; c < dv; ++c)
            out[(q0 + r) * dv + c] = acc[r * dv + c] / l[r];
          lse[q0 + r] = m[r] + std::log(l[r]);
        }
      });
    }
  return result;
}

FlashGradients flashAttentionBackward(const Tensor &q, const Tensor &k,
                                      const Tensor &v, const Tensor *mask,
                                      const Tensor &out, const Tensor &lse,
                                      const Tensor &dOut, double scale,
                                      const FlashBlockSizes &blocks) {
  assertAttentionOperands(q, k, v, mask);
  int64_t b = q.dim(0), h = q.dim(1), sq = q.dim(2), d = q.dim(3);
  int64_t skv = k.dim(2), dv = v.dim(3);
  assert(out.shape() == std::vector<int64_t>({b, h, sq, dv}) &&
         dOut.shape() == out.shape() && "out and dOut must be [B, H, Sq, Dv]");
  assert(lse.shape() == std::vector<int64_t>({b, h, sq}) &&
         "lse must be [B, H, Sq]");
  FlashGradients grads{Tensor(q.shape(), q.dtype()),
                       Tensor(k.shape(), k.dtype()),
                       Tensor(v.shape(), v.dtype())};

  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi) {
      HeadOperands op = headOperands(q, k, v, mask, scale, bi, hi);
      int64_t head = bi * h + hi;
      const double *o = out.values().data() + head * sq * dv;
      const double *dO = dOut.values().data() + head * sq * dv;
      const double *rowLse = lse.values().data() + head * sq;
      double *dq = grads.dq.values().data() + head * sq * d;
      double *dk = grads.dk.values().data() + head * skv * d;
      double *dvOut = grads.dv.values().data() + head * skv * dv;

      // D_i = rowsum(dOut o out), computed once per row before the block
      // loops (flash's preprocessing step).
      std::vector<double> rowD(sq, 0.0);
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t c = 0; c < dv; ++c)
          rowD[i] += dO[i * dv + c] * o[i * dv + c];
      // P_ij recomputed from the saved lse, never renormalized; 0 where
      // masked or where the row attends to nothing (lse -inf).
      auto prob = [&](int64_t i, int64_t j) {
        if (rowLse[i] == kNegInf || !op.allowed(i, j))
          return 0.0;
        return std::exp(op.logit(i, j) - rowLse[i]);
      };
      // dS_ij = P_ij (dP_ij - D_i) with dP_ij = dOut_i . v_j.
      auto dScore = [&](int64_t i, int64_t j, double p) {
        double dp = 0.0;
        for (int64_t c = 0; c < dv; ++c)
          dp += dO[i * dv + c] * op.v[j * dv + c];
        return p * (dp - rowD[i]);
      };

      // dK/dV: each key block accumulates over all query blocks, visiting
      // its compute sub-blocks for each query block.
      forEachBlock(0, skv, blocks.blockKvDkv, [&](int64_t k0, int64_t k1) {
        std::vector<double> dkBlock((k1 - k0) * d), dvBlock((k1 - k0) * dv);
        forEachBlock(0, sq, blocks.blockQDkv, [&](int64_t q0, int64_t q1) {
          forEachBlock(
              k0, k1, blocks.blockKvDkvCompute, [&](int64_t c0, int64_t c1) {
                for (int64_t i = q0; i < q1; ++i)
                  for (int64_t j = c0; j < c1; ++j) {
                    double p = prob(i, j);
                    double ds = op.productOperand(dScore(i, j, p));
                    p = op.productOperand(p);
                    for (int64_t c = 0; c < dv; ++c)
                      dvBlock[(j - k0) * dv + c] += p * dO[i * dv + c];
                    for (int64_t c = 0; c < d; ++c)
                      dkBlock[(j - k0) * d + c] += scale * ds * op.q[i * d + c];
                    if (blocks.fusedBackward)
                      for (int64_t c = 0; c < d; ++c)
                        dq[i * d + c] += scale * ds * op.k[j * d + c];
                  }
              });
        });
        std::copy(dkBlock.begin(), dkBlock.end(), dk + k0 * d);
        std::copy(dvBlock.begin(), dvBlock.end(), dvOut + k0 * dv);
      });
      if (blocks.fusedBackward)
        continue;

      // dQ: each query block accumulates over all key blocks.
      forEachBlock(0, sq, blocks.blockQDq, [&](int64_t q0, int64_t q1) {
        std::vector<double> dqBlock((q1 - q0) * d);
        forEachBlock(0, skv, blocks.blockKvDq, [&](int64_t k0, int64_t k1) {
          for (int64_t i = q0; i < q1; ++i)
            for (int64_t j = k0; j < k1; ++j) {
              double ds = op.productOperand(dScore(i, j, prob(i, j)));
              for (int64_t c = 0; c < d; ++c)
                dqBlock[(i - q0) * d + c] += scale * ds * op.k[j * d + c];
            }
        });
        std::copy(dqBlock.begin(), dqBlock.end(), dq + q0 * d);
      });
    }
  return grads;
}

} // namespace sd::ref
