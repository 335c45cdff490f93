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
// The kernels take f32 or bf16 operands (the Elem parameter). With bf16 the
// tile products run on oneDNN's bf16 matmul (the CPU's bf16 units), as
// FlashAttention and Pallas's TPU kernel do on theirs: Q, K, V and dO are
// read as stored, the probabilities P and score gradients dS are computed in
// f32 and rounded to bf16 where a product reads them, and every product,
// softmax statistic and output accumulates in f32, rounded to bf16 once when
// the item writes its rows. sd/Reference's flash kernels round at the same
// points.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include "sd/Runtime/BFloat16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace sd::rt::kernels {

namespace {

using detail::narrow;
using detail::roundUp;
using detail::tileProduct;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The floats of scratch that `count` elements of Elem take, rounded up.
template <typename Elem> int64_t floatsOf(int64_t count) {
  return roundUp(ceilDiv(count * static_cast<int64_t>(sizeof(Elem)),
                         static_cast<int64_t>(sizeof(float))));
}

template <typename Elem> constexpr bool kIsF32 = std::is_same_v<Elem, float>;

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

//===----------------------------------------------------------------------===//
// Elements and tile products
//===----------------------------------------------------------------------===//

float widen(float value) { return value; }
float widen(sd_bf16 value) { return toFloat(BFloat16{value.bits}); }

/// The product operand of a tile computed in f32 (`tile`): the tile itself
/// with f32 operands, its bf16 copy (`low`, which the pass that computed the
/// tile rounded into) with bf16 ones.
template <typename Elem>
const Elem *roundedOperand(const float *tile, const Elem *low) {
  if constexpr (kIsF32<Elem>) {
    (void)low;
    return tile;
  } else {
    (void)tile;
    return low;
  }
}

/// row[j] = exp(row[j] - shift), returning the sum (detail::expShifted);
/// with bf16 operands each exponential is also rounded into `low` (when
/// given) in the same pass, where a product reads it.
template <typename Elem>
double expRow(float *row, int64_t n, float shift, Elem *low) {
  if constexpr (!kIsF32<Elem>)
    if (low)
      return detail::expShiftedNarrow(row, n, shift, low);
  (void)low;
  return detail::expShifted(row, n, shift);
}

/// One call's operands and sizes, shared by the passes.
template <typename Elem> struct Problem {
  const Elem *q, *k, *v;
  const float *mask;
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
template <typename Elem>
void maskedScores(const Problem<Elem> &p, const Elem *qBlk, const Elem *kSub,
                  const float *mask, int64_t rows, int64_t n, float *s) {
  // With no head_dim (k = 0) the scores are zeros.
  tileProduct(false, true, rows, n, p.d, p.alpha, qBlk, p.d, kSub, p.d, 0.0f, s,
              n, nullptr);
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

/// An f32 accumulator of `rows` rows of `cols`: the output rows themselves
/// in f32, a scratch region (`region`) in bf16, rounded into them by
/// `store`.
template <typename Elem> struct Accumulator {
  float *rows;
  static Accumulator of(Elem *out, float *region) {
    if constexpr (kIsF32<Elem>) {
      (void)region;
      return {out};
    } else {
      (void)out;
      return {region};
    }
  }
  void store(Elem *out, int64_t count) const {
    if constexpr (!kIsF32<Elem>)
      narrow(rows, out, count);
    else
      (void)out, (void)count;
  }
};

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Effective block sizes of the forward and the scratch of one thread: the
/// score tile, the running maximum and sum of each query row, and with bf16
/// operands the output accumulator, the rounded P tile and a product tile.
struct ForwardPlan {
  int64_t blockQ, blockKv, blockKvCompute, qBlocks;
  int64_t scoreFloats, accFloats, lowFloats, perThread;
};

template <typename Elem>
ForwardPlan planForward(int64_t pairs, int64_t sq, int64_t skv, int64_t dv,
                        const SdFlashBlocks &blocks, int threads) {
  ForwardPlan plan;
  plan.blockQ = itemBlock(blocks.block_q, sq, pairs, threads);
  plan.blockKv = clampBlock(blocks.block_kv, skv);
  plan.blockKvCompute = clampBlock(blocks.block_kv_compute, plan.blockKv);
  plan.qBlocks = ceilDiv(sq, plan.blockQ);
  plan.scoreFloats = roundUp(plan.blockQ * plan.blockKvCompute);
  plan.accFloats = kIsF32<Elem> ? 0 : roundUp(plan.blockQ * dv);
  plan.lowFloats =
      kIsF32<Elem> ? 0 : floatsOf<Elem>(plan.blockQ * plan.blockKvCompute);
  plan.perThread = plan.scoreFloats + 2 * roundUp(plan.blockQ) +
                   2 * plan.accFloats + plan.lowFloats;
  return plan;
}

/// Rows [r0, r0 + rows) of head `pair`: out and lse of those rows.
template <typename Elem>
void forwardItem(const Problem<Elem> &p, const ForwardPlan &plan, int64_t pair,
                 int64_t r0, int64_t rows, Elem *out, float *lse, float *work) {
  float *s = work;
  float *runMax = s + plan.scoreFloats;
  float *runSum = runMax + roundUp(plan.blockQ);
  float *accRegion = runSum + roundUp(plan.blockQ);
  float *tmp = accRegion + plan.accFloats;
  Elem *pLow =
      kIsF32<Elem> ? nullptr : reinterpret_cast<Elem *>(tmp + plan.accFloats);
  const Elem *qBlk = p.q + (pair * p.sq + r0) * p.d;
  const Elem *kh = p.k + pair * p.skv * p.d;
  const Elem *vh = p.v + pair * p.skv * p.dv;
  const float *maskHead = p.maskOf(pair);
  const float *maskBlk = maskHead ? maskHead + r0 * p.skv : nullptr;
  Elem *oBlk = out + (pair * p.sq + r0) * p.dv;
  Accumulator<Elem> acc = Accumulator<Elem>::of(oBlk, accRegion);
  std::fill(acc.rows, acc.rows + rows * p.dv, 0.0f);
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
          if constexpr (!kIsF32<Elem>)
            narrow(row, pLow + r * n, n);
          continue;
        }
        double sum = expRow(row, n, newMax, pLow ? pLow + r * n : nullptr);
        float correction = std::exp(runMax[r] - newMax);
        runSum[r] = static_cast<float>(
            static_cast<double>(runSum[r]) * correction + sum);
        runMax[r] = newMax;
        if (correction != 1.0f) {
          float *oRow = acc.rows + r * p.dv;
#pragma omp simd
          for (int64_t j = 0; j < p.dv; ++j)
            oRow[j] *= correction;
        }
      }
      tileProduct(false, false, rows, p.dv, n, 1.0f, roundedOperand(s, pLow), n,
                  vh + c0 * p.dv, p.dv, 1.0f, acc.rows, p.dv, tmp);
    }
  }
  float *lseBlk = lse + pair * p.sq + r0;
  for (int64_t r = 0; r < rows; ++r) {
    float *oRow = acc.rows + r * p.dv;
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
  acc.store(oBlk, rows * p.dv);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Effective block sizes of the backward and its scratch: Di per query row,
/// the fused dQ partials (one [Sq, D] buffer per K/V item), then one
/// thread's work of the larger pass: the P and dS tiles, and with bf16
/// operands their rounded copies, the gradient accumulators and a product
/// tile.
struct BackwardPlan {
  bool fused;
  int64_t blockKvDkv, blockQDkv, blockKvDkvCompute, kvBlocks;
  int64_t blockQDq, blockKvDq, qBlocksDq;
  int64_t diFloats, partialFloats, perThread;
  /// Per thread, by pass: tile floats (P or dS), rounded tile floats,
  /// accumulator floats (dK then dV, or dQ) and product-tile floats.
  int64_t dkvTile, dkvLow, dkAcc, dvAcc, dkvTmp;
  int64_t dqTile, dqLow, dqAcc, dqTmp;
};

template <typename Elem>
BackwardPlan planBackward(int64_t pairs, int64_t sq, int64_t skv, int64_t d,
                          int64_t dv, const SdFlashBlocks &blocks,
                          int threads) {
  constexpr bool f32 = kIsF32<Elem>;
  BackwardPlan plan;
  plan.fused = blocks.fused_bwd != 0;
  plan.blockKvDkv = itemBlock(blocks.block_kv_dkv, skv, pairs, threads);
  plan.blockQDkv = clampBlock(blocks.block_q_dkv, sq);
  plan.blockKvDkvCompute =
      clampBlock(blocks.block_kv_dkv_compute, plan.blockKvDkv);
  plan.kvBlocks = ceilDiv(skv, plan.blockKvDkv);
  // A fused plan computes dQ inside the K/V items; a call that wants dQ
  // alone (context parallelism's dQ of gathered keys) then runs the dQ pass
  // with the dK/dV pass's tiles, the fused blocks' only dQ-sized ones (with
  // 1 x 1 tiles that pass ran a hundred times slower).
  plan.blockQDq = itemBlock(plan.fused ? blocks.block_q_dkv : blocks.block_q_dq,
                            sq, pairs, threads);
  plan.blockKvDq = clampBlock(
      plan.fused ? blocks.block_kv_dkv_compute : blocks.block_kv_dq, skv);
  plan.qBlocksDq = ceilDiv(sq, plan.blockQDq);
  plan.diFloats = roundUp(pairs * sq);
  plan.partialFloats = plan.fused ? roundUp(pairs * plan.kvBlocks * sq * d) : 0;

  int64_t dkvCells = plan.blockQDkv * plan.blockKvDkvCompute;
  plan.dkvTile = roundUp(dkvCells);
  plan.dkvLow = f32 ? 0 : floatsOf<Elem>(dkvCells);
  plan.dkAcc = f32 ? 0 : roundUp(plan.blockKvDkv * d);
  plan.dvAcc = f32 ? 0 : roundUp(plan.blockKvDkv * dv);
  plan.dkvTmp = f32 ? 0
                    : roundUp(std::max(plan.blockKvDkvCompute * std::max(d, dv),
                                       plan.blockQDkv * d));
  int64_t dkvFloats = 2 * plan.dkvTile + 2 * plan.dkvLow + plan.dkAcc +
                      plan.dvAcc + plan.dkvTmp;

  // Sized even when fused: a call that wants dQ alone runs this pass.
  int64_t dqCells = plan.blockQDq * plan.blockKvDq;
  plan.dqTile = roundUp(dqCells);
  plan.dqLow = f32 ? 0 : floatsOf<Elem>(dqCells);
  plan.dqAcc = f32 ? 0 : roundUp(plan.blockQDq * d);
  plan.dqTmp = plan.dqAcc;
  int64_t dqFloats = 2 * plan.dqTile + 2 * plan.dqLow + plan.dqAcc + plan.dqTmp;
  // The fused dQ sum of a bf16 call adds each row in f32 first.
  int64_t sumFloats = f32 ? 0 : roundUp(d);
  plan.perThread = std::max({dkvFloats, dqFloats, sumFloats});
  return plan;
}

/// The inputs of the backward beyond the forward's.
template <typename Elem> struct Gradients {
  const float *lse;
  const Elem *dOut;
  const float *di;
};

/// For query rows [r0, r0 + rows) of `pair` against keys [c0, c0 + n):
/// prob = P = exp(S - lse) (0 where masked or lse = -inf) and
/// ds = P ∘ (dO·Vᵀ - Di). Returns false, computing nothing, when the mask
/// allows no key of the tile. With bf16 operands the rows of dS, and where
/// `probLow` is given those of P, are also rounded into `dsLow` and
/// `probLow` (the products' operands) as each row is done, rather than in
/// passes over the whole tiles after it (4.5 → 4.3 ms a DiT-S/2 backward on
/// one thread, with Di's partial sums below).
template <typename Elem>
bool probabilitiesAndScoreGrads(const Problem<Elem> &p,
                                const Gradients<Elem> &g, int64_t pair,
                                int64_t r0, int64_t rows, int64_t c0, int64_t n,
                                float *prob, float *ds, Elem *probLow,
                                Elem *dsLow) {
  const float *maskHead = p.maskOf(pair);
  const float *maskTile = maskHead ? maskHead + r0 * p.skv + c0 : nullptr;
  if (maskTile && !anyAllowed(maskTile, p.skv, rows, n))
    return false;
  int64_t row0 = pair * p.sq + r0;
  maskedScores(p, p.q + row0 * p.d, p.k + (pair * p.skv + c0) * p.d, maskTile,
               rows, n, prob);
  for (int64_t r = 0; r < rows; ++r) {
    float *row = prob + r * n;
    Elem *lowRow = probLow ? probLow + r * n : nullptr;
    float rowLse = g.lse[row0 + r];
    if (rowLse != kNegInf) {
      expRow(row, n, rowLse, lowRow);
      continue;
    }
    std::fill(row, row + n, 0.0f);
    if constexpr (!kIsF32<Elem>)
      if (lowRow)
        narrow(row, lowRow, n);
  }
  // dP = dO·Vᵀ (zeros with no value head_dim).
  tileProduct(false, true, rows, n, p.dv, 1.0f, g.dOut + row0 * p.dv, p.dv,
              p.v + (pair * p.skv + c0) * p.dv, p.dv, 0.0f, ds, n, nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    const float *pRow = prob + r * n;
    float *dsRow = ds + r * n;
    float di = g.di[row0 + r];
    if constexpr (kIsF32<Elem>) {
      (void)dsLow;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        dsRow[j] = pRow[j] * (dsRow[j] - di);
    } else {
      detail::scoreGradsNarrow(pRow, dsRow, di, n, dsLow + r * n);
    }
  }
  return true;
}

/// K/V block `kb` of `pair`: its dK and dV rows, and with `partial` (the
/// item's [Sq, D] buffer) the block's share of dQ.
template <typename Elem>
void dkvItem(const Problem<Elem> &p, const Gradients<Elem> &g,
             const BackwardPlan &plan, int64_t pair, int64_t kb, Elem *dk,
             Elem *dvGrad, float *partial, float *work) {
  float *prob = work;
  float *ds = prob + plan.dkvTile;
  Elem *probLow = reinterpret_cast<Elem *>(ds + plan.dkvTile);
  Elem *dsLow = reinterpret_cast<Elem *>(ds + plan.dkvTile + plan.dkvLow);
  float *dkRegion = ds + plan.dkvTile + 2 * plan.dkvLow;
  float *dvRegion = dkRegion + plan.dkAcc;
  float *tmp = dvRegion + plan.dvAcc;
  int64_t k0 = kb * plan.blockKvDkv;
  int64_t k1 = std::min(p.skv, k0 + plan.blockKvDkv);
  Elem *dkBlk = dk + (pair * p.skv + k0) * p.d;
  Elem *dvBlk = dvGrad + (pair * p.skv + k0) * p.dv;
  Accumulator<Elem> dkAcc = Accumulator<Elem>::of(dkBlk, dkRegion);
  Accumulator<Elem> dvAcc = Accumulator<Elem>::of(dvBlk, dvRegion);
  std::fill(dkAcc.rows, dkAcc.rows + (k1 - k0) * p.d, 0.0f);
  std::fill(dvAcc.rows, dvAcc.rows + (k1 - k0) * p.dv, 0.0f);
  if (partial)
    std::fill(partial, partial + p.sq * p.d, 0.0f);
  for (int64_t r0 = 0; r0 < p.sq; r0 += plan.blockQDkv) {
    int64_t rows = std::min(p.sq, r0 + plan.blockQDkv) - r0;
    const Elem *qBlk = p.q + (pair * p.sq + r0) * p.d;
    const Elem *doBlk = g.dOut + (pair * p.sq + r0) * p.dv;
    for (int64_t c0 = k0; c0 < k1; c0 += plan.blockKvDkvCompute) {
      int64_t n = std::min(k1, c0 + plan.blockKvDkvCompute) - c0;
      if (!probabilitiesAndScoreGrads(p, g, pair, r0, rows, c0, n, prob, ds,
                                      probLow, dsLow))
        continue;
      // dV += Pᵀ·dO, dK += scale·dSᵀ·Q, dQ partial += scale·dS·K.
      const Elem *probOp = roundedOperand(prob, probLow);
      const Elem *dsOp = roundedOperand(ds, dsLow);
      tileProduct(true, false, n, p.dv, rows, 1.0f, probOp, n, doBlk, p.dv,
                  1.0f, dvAcc.rows + (c0 - k0) * p.dv, p.dv, tmp);
      tileProduct(true, false, n, p.d, rows, p.alpha, dsOp, n, qBlk, p.d, 1.0f,
                  dkAcc.rows + (c0 - k0) * p.d, p.d, tmp);
      if (partial)
        tileProduct(false, false, rows, p.d, n, p.alpha, dsOp, n,
                    p.k + (pair * p.skv + c0) * p.d, p.d, 1.0f,
                    partial + r0 * p.d, p.d, tmp);
    }
  }
  dkAcc.store(dkBlk, (k1 - k0) * p.d);
  dvAcc.store(dvBlk, (k1 - k0) * p.dv);
}

/// Query rows [r0, r0 + rows) of `pair`: their dQ over all keys.
template <typename Elem>
void dqItem(const Problem<Elem> &p, const Gradients<Elem> &g,
            const BackwardPlan &plan, int64_t pair, int64_t r0, int64_t rows,
            Elem *dq, float *work) {
  float *prob = work;
  float *ds = prob + plan.dqTile;
  Elem *dsLow = reinterpret_cast<Elem *>(ds + plan.dqTile + plan.dqLow);
  float *dqRegion = ds + plan.dqTile + 2 * plan.dqLow;
  float *tmp = dqRegion + plan.dqAcc;
  Elem *dqBlk = dq + (pair * p.sq + r0) * p.d;
  Accumulator<Elem> acc = Accumulator<Elem>::of(dqBlk, dqRegion);
  std::fill(acc.rows, acc.rows + rows * p.d, 0.0f);
  if (p.d != 0) {
    for (int64_t c0 = 0; c0 < p.skv; c0 += plan.blockKvDq) {
      int64_t n = std::min(p.skv, c0 + plan.blockKvDq) - c0;
      if (!probabilitiesAndScoreGrads(p, g, pair, r0, rows, c0, n, prob, ds,
                                      static_cast<Elem *>(nullptr), dsLow))
        continue;
      tileProduct(false, false, rows, p.d, n, p.alpha,
                  roundedOperand(ds, dsLow), n, p.k + (pair * p.skv + c0) * p.d,
                  p.d, 1.0f, acc.rows, p.d, tmp);
    }
  }
  acc.store(dqBlk, rows * p.d);
}

/// The scratch of `plan` for a team of `threads` and of one thread (a call
/// from inside a parallel region), whichever is larger.
template <typename PlanFn, typename SizeFn>
int64_t scratchForTeams(int threads, PlanFn planFn, SizeFn sizeFn) {
  threads = std::max(threads, 1);
  return std::max(sizeFn(planFn(threads), threads), sizeFn(planFn(1), 1));
}

template <typename Elem>
int64_t forwardScratch(int64_t b, int64_t h, int64_t sq, int64_t skv,
                       int64_t dv, const SdFlashBlocks &blocks, int threads) {
  return scratchForTeams(
      threads,
      [&](int team) {
        return planForward<Elem>(b * h, sq, skv, dv, blocks, team);
      },
      [](const ForwardPlan &plan, int team) { return team * plan.perThread; });
}

template <typename Elem>
int64_t backwardScratch(int64_t b, int64_t h, int64_t sq, int64_t skv,
                        int64_t d, int64_t dv, const SdFlashBlocks &blocks,
                        int threads) {
  return scratchForTeams(
      threads,
      [&](int team) {
        return planBackward<Elem>(b * h, sq, skv, d, dv, blocks, team);
      },
      [](const BackwardPlan &plan, int team) {
        return plan.diFloats + plan.partialFloats + team * plan.perThread;
      });
}

template <typename Elem>
void forward(const Elem *q, const Elem *k, const Elem *v, const float *mask,
             int64_t maskB, int64_t maskH, Elem *out, float *lse, int64_t b,
             int64_t h, int64_t sq, int64_t skv, int64_t d, int64_t dv,
             double scale, const SdFlashBlocks &blocks, float *scratch) {
  int64_t pairs = b * h;
  if (pairs == 0 || sq == 0)
    return;
  int threads = teamSize();
  ForwardPlan plan = planForward<Elem>(pairs, sq, skv, dv, blocks, threads);
  Problem<Elem> p{q, k,  v,   mask, maskB, maskH,
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

template <typename Elem>
void backward(const Elem *q, const Elem *k, const Elem *v, const float *mask,
              int64_t maskB, int64_t maskH, const Elem *out, const float *lse,
              const Elem *dOut, Elem *dqOut, Elem *dkOut, Elem *dvOut,
              int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
              int64_t dv, double scale, const SdFlashBlocks &blocks,
              float *scratch) {
  int64_t pairs = b * h;
  if (pairs == 0)
    return;
  int threads = teamSize();
  BackwardPlan plan =
      planBackward<Elem>(pairs, sq, skv, d, dv, blocks, threads);
  // A null d_q skips the dQ pass, null d_k and d_v the dK/dV pass; dQ is
  // accumulated by the K/V items only when both are wanted.
  bool wantDkv = dkOut && dvOut, wantDq = dqOut != nullptr;
  plan.fused = plan.fused && wantDkv && wantDq;
  Problem<Elem> p{q, k,  v,   mask, maskB, maskH,
                  h, sq, skv, d,    dv,    static_cast<float>(scale)};
  float *di = scratch;
  float *partials = scratch + plan.diFloats;
  float *work = partials + plan.partialFloats;
  Gradients<Elem> g{lse, dOut, di};
#pragma omp parallel num_threads(threads)
  {
    float *threadWork = work + omp_get_thread_num() * plan.perThread;
    // Di = rowsum(dO ∘ O), from the final forward output, in double: eight
    // partial sums (which vectorize; one running sum is a chain of
    // dependent scalar adds), added pairwise.
#pragma omp for schedule(static)
    for (int64_t row = 0; row < pairs * sq; ++row) {
      const Elem *oRow = out + row * dv, *doRow = dOut + row * dv;
      double lanes[8] = {};
      int64_t j = 0;
      for (; j + 8 <= dv; j += 8)
#pragma omp simd
        for (int l = 0; l < 8; ++l)
          lanes[l] +=
              static_cast<double>(widen(oRow[j + l])) * widen(doRow[j + l]);
      double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                   ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      for (; j < dv; ++j)
        sum += static_cast<double>(widen(oRow[j])) * widen(doRow[j]);
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
        Elem *dqRow = dqOut + row * d;
        Accumulator<Elem> sum = Accumulator<Elem>::of(dqRow, threadWork);
        std::fill(sum.rows, sum.rows + d, 0.0f);
        for (int64_t kb = 0; kb < plan.kvBlocks; ++kb) {
          const float *part =
              partials + ((pair * plan.kvBlocks + kb) * sq + r) * d;
#pragma omp simd
          for (int64_t j = 0; j < d; ++j)
            sum.rows[j] += part[j];
        }
        sum.store(dqRow, d);
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

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

int64_t flashAttentionScratchFloats(int64_t b, int64_t h, int64_t sq,
                                    int64_t skv, int64_t d, int64_t dv,
                                    const SdFlashBlocks &blocks, int threads,
                                    SdElementType element) {
  (void)d;
  return element == SD_BF16
             ? forwardScratch<sd_bf16>(b, h, sq, skv, dv, blocks, threads)
             : forwardScratch<float>(b, h, sq, skv, dv, blocks, threads);
}

void flashAttention(const float *q, const float *k, const float *v,
                    const float *mask, int64_t maskB, int64_t maskH, float *out,
                    float *lse, int64_t b, int64_t h, int64_t sq, int64_t skv,
                    int64_t d, int64_t dv, double scale,
                    const SdFlashBlocks &blocks, float *scratch) {
  forward(q, k, v, mask, maskB, maskH, out, lse, b, h, sq, skv, d, dv, scale,
          blocks, scratch);
}

void flashAttention(const sd_bf16 *q, const sd_bf16 *k, const sd_bf16 *v,
                    const float *mask, int64_t maskB, int64_t maskH,
                    sd_bf16 *out, float *lse, int64_t b, int64_t h, int64_t sq,
                    int64_t skv, int64_t d, int64_t dv, double scale,
                    const SdFlashBlocks &blocks, float *scratch) {
  forward(q, k, v, mask, maskB, maskH, out, lse, b, h, sq, skv, d, dv, scale,
          blocks, scratch);
}

int64_t flashAttentionBackwardScratchFloats(int64_t b, int64_t h, int64_t sq,
                                            int64_t skv, int64_t d, int64_t dv,
                                            const SdFlashBlocks &blocks,
                                            int threads,
                                            SdElementType element) {
  return element == SD_BF16
             ? backwardScratch<sd_bf16>(b, h, sq, skv, d, dv, blocks, threads)
             : backwardScratch<float>(b, h, sq, skv, d, dv, blocks, threads);
}

void flashAttentionBackward(const float *q, const float *k, const float *v,
                            const float *mask, int64_t maskB, int64_t maskH,
                            const float *out, const float *lse,
                            const float *dOut, float *dqOut, float *dkOut,
                            float *dvOut, int64_t b, int64_t h, int64_t sq,
                            int64_t skv, int64_t d, int64_t dv, double scale,
                            const SdFlashBlocks &blocks, float *scratch) {
  backward(q, k, v, mask, maskB, maskH, out, lse, dOut, dqOut, dkOut, dvOut, b,
           h, sq, skv, d, dv, scale, blocks, scratch);
}

void flashAttentionBackward(const sd_bf16 *q, const sd_bf16 *k,
                            const sd_bf16 *v, const float *mask, int64_t maskB,
                            int64_t maskH, const sd_bf16 *out, const float *lse,
                            const sd_bf16 *dOut, sd_bf16 *dqOut, sd_bf16 *dkOut,
                            sd_bf16 *dvOut, int64_t b, int64_t h, int64_t sq,
                            int64_t skv, int64_t d, int64_t dv, double scale,
                            const SdFlashBlocks &blocks, float *scratch) {
  backward(q, k, v, mask, maskB, maskH, out, lse, dOut, dqOut, dkOut, dvOut, b,
           h, sq, skv, d, dv, scale, blocks, scratch);
}

} // namespace sd::rt::kernels
