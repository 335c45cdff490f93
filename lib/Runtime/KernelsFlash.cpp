//===- KernelsFlash.cpp - FlashAttention-2 forward and backward -----------===//
//
// Tiled attention that never materializes a [Sq, Skv] score matrix
// (FlashAttention-2, Dao 2023). The forward keeps, per query row, the running
// maximum m and sum l of the exponentiated scores and rescales its output
// accumulator as K/V blocks stream by; it also returns lse = m + log(l). The
// backward recomputes the probabilities from lse (P = exp(S - lse), never
// renormalized, so that a call over a slice of the keys is that slice's exact
// share: ring attention sums such calls) and accumulates dK, dV per K/V block
// and dQ per query block, or dQ within the K/V pass into per-block partials.
//
// Work items are (batch-head pair, block) so that a single head still keeps
// the team busy; each item runs its GEMMs single-threaded inside the parallel
// region and writes rows no other item writes. Item boundaries depend only on
// the block sizes and the team size, and every sum has a fixed order, so the
// results are bitwise reproducible for a given team size and block sizes.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace sd::rt::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Scratch regions start on 64-byte boundaries (16 floats) so that threads
/// never share a cache line.
int64_t roundUp(int64_t floats) { return (floats + 15) / 16 * 16; }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The team the kernels run on: the caller's when already inside a parallel
/// region (then 1), else omp_get_max_threads().
int teamSize() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

/// `block` clamped to [1, max(length, 1)].
int64_t clampBlock(int64_t block, int64_t length) {
  return std::clamp<int64_t>(block, 1, std::max<int64_t>(length, 1));
}

/// The clamped block along a dimension whose blocks, times `pairs`, make the
/// work items; shrunk when that would leave threads of the team idle.
int64_t itemBlock(int64_t block, int64_t length, int64_t pairs, int threads) {
  int64_t clamped = clampBlock(block, length);
  if (pairs * ceilDiv(length, clamped) >= threads)
    return clamped;
  int64_t perPair = ceilDiv(threads, pairs);
  return std::max<int64_t>(1, std::min(clamped, ceilDiv(length, perPair)));
}

/// One call's operands and sizes, shared by the passes.
struct Problem {
  const float *q, *k, *v, *mask;
  int64_t maskB, maskH, h, sq, skv, d, dv;
  float alpha;

  /// The [Sq, Skv] mask of `pair`, or null.
  const float *maskOf(int64_t pair) const {
    if (!mask)
      return nullptr;
    int64_t bi = pair / h, hi = pair % h;
    return mask +
           ((maskB == 1 ? 0 : bi) * maskH + (maskH == 1 ? 0 : hi)) * sq * skv;
  }
};

using detail::tileSgemm;

/// Whether a `rows` x `n` tile of the mask (row stride `ld`) allows any key.
/// A tile that allows none contributes nothing and is skipped whole.
bool anyAllowed(const float *mask, int64_t ld, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = mask + r * ld;
    int allowed = 0;
#pragma omp simd reduction(| : allowed)
    for (int64_t j = 0; j < n; ++j)
      allowed |= row[j] != 0.0f;
    if (allowed)
      return true;
  }
  return false;
}

/// s[rows, n] = alpha * qBlk * kSubᵀ, masked entries -inf. `mask` is the
/// tile's first entry in the [Sq, Skv] mask, or null.
void maskedScores(const Problem &p, const float *qBlk, const float *kSub,
                  const float *mask, int64_t rows, int64_t n, float *s) {
  // With no head_dim (k = 0) the scores are zeros.
  tileSgemm(false, true, rows, n, p.d, p.alpha, qBlk, p.d, kSub, p.d, 0.0f, s,
            n);
  if (!mask)
    return;
  for (int64_t r = 0; r < rows; ++r) {
    float *row = s + r * n;
    const float *maskRow = mask + r * p.skv;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      row[j] = maskRow[j] == 0.0f ? kNegInf : row[j];
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Effective block sizes of the forward and the scratch of one thread: the
/// score tile, then the running maximum and sum of each query row.
struct ForwardPlan {
  int64_t blockQ, blockKv, blockKvCompute, qBlocks, perThread;
};

ForwardPlan planForward(int64_t pairs, int64_t sq, int64_t skv,
                        const SdFlashBlocks &blocks, int threads) {
  ForwardPlan plan;
  plan.blockQ = itemBlock(blocks.block_q, sq, pairs, threads);
  plan.blockKv = clampBlock(blocks.block_kv, skv);
  plan.blockKvCompute = clampBlock(blocks.block_kv_compute, plan.blockKv);
  plan.qBlocks = ceilDiv(sq, plan.blockQ);
  plan.perThread =
      roundUp(plan.blockQ * plan.blockKvCompute) + 2 * roundUp(plan.blockQ);
  return plan;
}

/// Rows [r0, r0 + rows) of head `pair`: out and lse of those rows.
void forwardItem(const Problem &p, const ForwardPlan &plan, int64_t pair,
                 int64_t r0, int64_t rows, float *out, float *lse,
                 float *work) {
  float *s = work;
  float *runMax = s + roundUp(plan.blockQ * plan.blockKvCompute);
  float *runSum = runMax + roundUp(plan.blockQ);
  const float *qBlk = p.q + (pair * p.sq + r0) * p.d;
  const float *kh = p.k + pair * p.skv * p.d;
  const float *vh = p.v + pair * p.skv * p.dv;
  const float *maskHead = p.maskOf(pair);
  const float *maskBlk = maskHead ? maskHead + r0 * p.skv : nullptr;
  float *oBlk = out + (pair * p.sq + r0) * p.dv;
  std::fill(oBlk, oBlk + rows * p.dv, 0.0f);
  std::fill(runMax, runMax + rows, kNegInf);
  std::fill(runSum, runSum + rows, 0.0f);
  for (int64_t kv0 = 0; kv0 < p.skv; kv0 += plan.blockKv) {
    int64_t kv1 = std::min(p.skv, kv0 + plan.blockKv);
    for (int64_t c0 = kv0; c0 < kv1; c0 += plan.blockKvCompute) {
      int64_t n = std::min(kv1, c0 + plan.blockKvCompute) - c0;
      const float *maskTile = maskBlk ? maskBlk + c0 : nullptr;
      if (maskTile && !anyAllowed(maskTile, p.skv, rows, n))
        continue;
      maskedScores(p, qBlk, kh + c0 * p.d, maskTile, rows, n, s);
      // Online softmax: exponentiate against the new running maximum and
      // rescale what the row accumulated so far.
      for (int64_t r = 0; r < rows; ++r) {
        float *row = s + r * n;
        float newMax = std::max(runMax[r], detail::maxRow(row, n));
        if (newMax == kNegInf) {
          // No key of this row allowed yet: contributes nothing.
          std::fill(row, row + n, 0.0f);
          continue;
        }
        double sum = detail::expShifted(row, n, newMax);
        float correction = std::exp(runMax[r] - newMax);
        runSum[r] = static_cast<float>(
            static_cast<double>(runSum[r]) * correction + sum);
        runMax[r] = newMax;
        if (correction != 1.0f) {
          float *oRow = oBlk + r * p.dv;
#pragma omp simd
          for (int64_t j = 0; j < p.dv; ++j)
            oRow[j] *= correction;
        }
      }
      tileSgemm(false, false, rows, p.dv, n, 1.0f, s, n, vh + c0 * p.dv, p.dv,
                1.0f, oBlk, p.dv);
    }
  }
  float *lseBlk = lse + pair * p.sq + r0;
  for (int64_t r = 0; r < rows; ++r) {
    float *oRow = oBlk + r * p.dv;
    if (runMax[r] == kNegInf) {
      // A fully masked row (or no keys): zeros, and lse = log(0).
      std::fill(oRow, oRow + p.dv, 0.0f);
      lseBlk[r] = kNegInf;
      continue;
    }
    float inv = 1.0f / runSum[r];
#pragma omp simd
    for (int64_t j = 0; j < p.dv; ++j)
      oRow[j] *= inv;
    lseBlk[r] = runMax[r] + std::log(runSum[r]);
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Effective block sizes of the backward and its scratch: Di per query row,
/// the fused dQ partials (one [Sq, D] buffer per K/V item), then one
/// thread's P and dS tiles (the larger of the two passes' tiles).
struct BackwardPlan {
  bool fused;
  int64_t blockKvDkv, blockQDkv, blockKvDkvCompute, kvBlocks;
  int64_t blockQDq, blockKvDq, qBlocksDq;
  int64_t diFloats, partialFloats, perThread;
};

BackwardPlan planBackward(int64_t pairs, int64_t sq, int64_t skv, int64_t d,
                          const SdFlashBlocks &blocks, int threads) {
  BackwardPlan plan;
  plan.fused = blocks.fused_bwd != 0;
  plan.blockKvDkv = itemBlock(blocks.block_kv_dkv, skv, pairs, threads);
  plan.blockQDkv = clampBlock(blocks.block_q_dkv, sq);
  plan.blockKvDkvCompute =
      clampBlock(blocks.block_kv_dkv_compute, plan.blockKvDkv);
  plan.kvBlocks = ceilDiv(skv, plan.blockKvDkv);
  plan.blockQDq =
      plan.fused ? 1 : itemBlock(blocks.block_q_dq, sq, pairs, threads);
  plan.blockKvDq = plan.fused ? 1 : clampBlock(blocks.block_kv_dq, skv);
  plan.qBlocksDq = ceilDiv(sq, plan.blockQDq);
  plan.diFloats = roundUp(pairs * sq);
  plan.partialFloats = plan.fused ? roundUp(pairs * plan.kvBlocks * sq * d) : 0;
  int64_t dkvTiles = 2 * roundUp(plan.blockQDkv * plan.blockKvDkvCompute);
  int64_t dqTiles =
      plan.fused ? 0 : 2 * roundUp(plan.blockQDq * plan.blockKvDq);
  plan.perThread = std::max(dkvTiles, dqTiles);
  return plan;
}

/// The inputs of the backward beyond the forward's.
struct Gradients {
  const float *lse, *dOut, *di;
};

/// For query rows [r0, r0 + rows) of `pair` against keys [c0, c0 + n):
/// prob = P = exp(S - lse) (0 where masked or lse = -inf) and
/// ds = P ∘ (dO·Vᵀ - Di). Returns false, computing nothing, when the mask
/// allows no key of the tile.
bool probabilitiesAndScoreGrads(const Problem &p, const Gradients &g,
                                int64_t pair, int64_t r0, int64_t rows,
                                int64_t c0, int64_t n, float *prob, float *ds) {
  const float *maskHead = p.maskOf(pair);
  const float *maskTile = maskHead ? maskHead + r0 * p.skv + c0 : nullptr;
  if (maskTile && !anyAllowed(maskTile, p.skv, rows, n))
    return false;
  int64_t row0 = pair * p.sq + r0;
  maskedScores(p, p.q + row0 * p.d, p.k + (pair * p.skv + c0) * p.d, maskTile,
               rows, n, prob);
  for (int64_t r = 0; r < rows; ++r) {
    float *row = prob + r * n;
    float rowLse = g.lse[row0 + r];
    if (rowLse == kNegInf)
      std::fill(row, row + n, 0.0f);
    else
      detail::expShifted(row, n, rowLse);
  }
  // dP = dO·Vᵀ (zeros with no value head_dim).
  tileSgemm(false, true, rows, n, p.dv, 1.0f, g.dOut + row0 * p.dv, p.dv,
            p.v + (pair * p.skv + c0) * p.dv, p.dv, 0.0f, ds, n);
  for (int64_t r = 0; r < rows; ++r) {
    const float *pRow = prob + r * n;
    float *dsRow = ds + r * n;
    float di = g.di[row0 + r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      dsRow[j] = pRow[j] * (dsRow[j] - di);
  }
  return true;
}

/// K/V block `kb` of `pair`: its dK and dV rows, and with `partial` (the
/// item's [Sq, D] buffer) the block's share of dQ.
void dkvItem(const Problem &p, const Gradients &g, const BackwardPlan &plan,
             int64_t pair, int64_t kb, float *dk, float *dvGrad, float *partial,
             float *work) {
  float *prob = work;
  float *ds = prob + roundUp(plan.blockQDkv * plan.blockKvDkvCompute);
  int64_t k0 = kb * plan.blockKvDkv;
  int64_t k1 = std::min(p.skv, k0 + plan.blockKvDkv);
  std::fill(dk + (pair * p.skv + k0) * p.d, dk + (pair * p.skv + k1) * p.d,
            0.0f);
  std::fill(dvGrad + (pair * p.skv + k0) * p.dv,
            dvGrad + (pair * p.skv + k1) * p.dv, 0.0f);
  if (partial)
    std::fill(partial, partial + p.sq * p.d, 0.0f);
  for (int64_t r0 = 0; r0 < p.sq; r0 += plan.blockQDkv) {
    int64_t rows = std::min(p.sq, r0 + plan.blockQDkv) - r0;
    const float *qBlk = p.q + (pair * p.sq + r0) * p.d;
    const float *doBlk = g.dOut + (pair * p.sq + r0) * p.dv;
    for (int64_t c0 = k0; c0 < k1; c0 += plan.blockKvDkvCompute) {
      int64_t n = std::min(k1, c0 + plan.blockKvDkvCompute) - c0;
      if (!probabilitiesAndScoreGrads(p, g, pair, r0, rows, c0, n, prob, ds))
        continue;
      // dV += Pᵀ·dO, dK += scale·dSᵀ·Q, dQ partial += scale·dS·K.
      tileSgemm(true, false, n, p.dv, rows, 1.0f, prob, n, doBlk, p.dv, 1.0f,
                dvGrad + (pair * p.skv + c0) * p.dv, p.dv);
      tileSgemm(true, false, n, p.d, rows, p.alpha, ds, n, qBlk, p.d, 1.0f,
                dk + (pair * p.skv + c0) * p.d, p.d);
      if (partial)
        tileSgemm(false, false, rows, p.d, n, p.alpha, ds, n,
                  p.k + (pair * p.skv + c0) * p.d, p.d, 1.0f,
                  partial + r0 * p.d, p.d);
    }
  }
}

/// Query rows [r0, r0 + rows) of `pair`: their dQ over all keys.
void dqItem(const Problem &p, const Gradients &g, const BackwardPlan &plan,
            int64_t pair, int64_t r0, int64_t rows, float *dq, float *work) {
  float *prob = work;
  float *ds = prob + roundUp(plan.blockQDq * plan.blockKvDq);
  float *dqBlk = dq + (pair * p.sq + r0) * p.d;
  std::fill(dqBlk, dqBlk + rows * p.d, 0.0f);
  if (p.d == 0)
    return;
  for (int64_t c0 = 0; c0 < p.skv; c0 += plan.blockKvDq) {
    int64_t n = std::min(p.skv, c0 + plan.blockKvDq) - c0;
    if (!probabilitiesAndScoreGrads(p, g, pair, r0, rows, c0, n, prob, ds))
      continue;
    tileSgemm(false, false, rows, p.d, n, p.alpha, ds, n,
              p.k + (pair * p.skv + c0) * p.d, p.d, 1.0f, dqBlk, p.d);
  }
}

/// The scratch of `plan` for a team of `threads` and of one thread (a call
/// from inside a parallel region), whichever is larger.
template <typename PlanFn, typename SizeFn>
int64_t scratchForTeams(int threads, PlanFn planFn, SizeFn sizeFn) {
  threads = std::max(threads, 1);
  return std::max(sizeFn(planFn(threads), threads), sizeFn(planFn(1), 1));
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

int64_t flashAttentionScratchFloats(int64_t b, int64_t h, int64_t sq,
                                    int64_t skv, int64_t d, int64_t dv,
                                    const SdFlashBlocks &blocks, int threads) {
  return scratchForTeams(
      threads,
      [&](int team) { return planForward(b * h, sq, skv, blocks, team); },
      [](const ForwardPlan &plan, int team) { return team * plan.perThread; });
}

void flashAttention(const float *q, const float *k, const float *v,
                    const float *mask, int64_t maskB, int64_t maskH, float *out,
                    float *lse, int64_t b, int64_t h, int64_t sq, int64_t skv,
                    int64_t d, int64_t dv, double scale,
                    const SdFlashBlocks &blocks, float *scratch) {
  int64_t pairs = b * h;
  if (pairs == 0 || sq == 0)
    return;
  int threads = teamSize();
  ForwardPlan plan = planForward(pairs, sq, skv, blocks, threads);
  Problem p{q, k,  v,   mask, maskB, maskH,
            h, sq, skv, d,    dv,    static_cast<float>(scale)};
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t item = 0; item < pairs * plan.qBlocks; ++item) {
    int64_t pair = item / plan.qBlocks;
    int64_t r0 = item % plan.qBlocks * plan.blockQ;
    int64_t rows = std::min(sq, r0 + plan.blockQ) - r0;
    forwardItem(p, plan, pair, r0, rows, out, lse,
                scratch + omp_get_thread_num() * plan.perThread);
  }
}

int64_t flashAttentionBackwardScratchFloats(int64_t b, int64_t h, int64_t sq,
                                            int64_t skv, int64_t d, int64_t dv,
                                            const SdFlashBlocks &blocks,
                                            int threads) {
  return scratchForTeams(
      threads,
      [&](int team) { return planBackward(b * h, sq, skv, d, blocks, team); },
      [](const BackwardPlan &plan, int team) {
        return plan.diFloats + plan.partialFloats + team * plan.perThread;
      });
}

void flashAttentionBackward(const float *q, const float *k, const float *v,
                            const float *mask, int64_t maskB, int64_t maskH,
                            const float *out, const float *lse,
                            const float *dOut, float *dqOut, float *dkOut,
                            float *dvOut, int64_t b, int64_t h, int64_t sq,
                            int64_t skv, int64_t d, int64_t dv, double scale,
                            const SdFlashBlocks &blocks, float *scratch) {
  int64_t pairs = b * h;
  if (pairs == 0)
    return;
  int threads = teamSize();
  BackwardPlan plan = planBackward(pairs, sq, skv, d, blocks, threads);
  // A null d_q skips the dQ pass, null d_k and d_v the dK/dV pass; dQ is
  // accumulated by the K/V items only when both are wanted.
  bool wantDkv = dkOut && dvOut, wantDq = dqOut != nullptr;
  plan.fused = plan.fused && wantDkv && wantDq;
  Problem p{q, k,  v,   mask, maskB, maskH,
            h, sq, skv, d,    dv,    static_cast<float>(scale)};
  float *di = scratch;
  float *partials = scratch + plan.diFloats;
  float *work = partials + plan.partialFloats;
  Gradients g{lse, dOut, di};
#pragma omp parallel num_threads(threads)
  {
    float *threadWork = work + omp_get_thread_num() * plan.perThread;
    // Di = rowsum(dO ∘ O), from the final forward output.
#pragma omp for schedule(static)
    for (int64_t row = 0; row < pairs * sq; ++row) {
      const float *oRow = out + row * dv, *doRow = dOut + row * dv;
      double sum = 0.0;
      for (int64_t j = 0; j < dv; ++j)
        sum += static_cast<double>(oRow[j]) * doRow[j];
      di[row] = static_cast<float>(sum);
    }
    if (wantDkv) {
#pragma omp for schedule(static)
      for (int64_t item = 0; item < pairs * plan.kvBlocks; ++item)
        dkvItem(p, g, plan, item / plan.kvBlocks, item % plan.kvBlocks, dkOut,
              dvOut, plan.fused ? partials + item * sq * d : nullptr,
                threadWork);
    }
    if (!wantDq) {
      // Nothing more to do.
    } else if (plan.fused) {
      // dQ = the K/V items' partials of the pair, summed in block order.
#pragma omp for schedule(static)
      for (int64_t row = 0; row < pairs * sq; ++row) {
        int64_t pair = row / sq, r = row % sq;
        float *dqRow = dqOut + row * d;
        std::fill(dqRow, dqRow + d, 0.0f);
        for (int64_t kb = 0; kb < plan.kvBlocks; ++kb) {
          const float *part =
              partials + ((pair * plan.kvBlocks + kb) * sq + r) * d;
#pragma omp simd
          for (int64_t j = 0; j < d; ++j)
            dqRow[j] += part[j];
        }
      }
    } else {
#pragma omp for schedule(static)
      for (int64_t item = 0; item < pairs * plan.qBlocksDq; ++item) {
        int64_t r0 = item % plan.qBlocksDq * plan.blockQDq;
        dqItem(p, g, plan, item / plan.qBlocksDq, r0,
               std::min(sq, r0 + plan.blockQDq) - r0, dqOut, threadWork);
      }
    }
  }
}

} // namespace sd::rt::kernels
