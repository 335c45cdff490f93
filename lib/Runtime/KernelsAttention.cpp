//===- KernelsAttention.cpp - Multi-head scaled dot-product attention -----===//
//
// One head at a time: scores = scale * Q K^T into the thread's scratch, mask,
// row softmax, then scores * V. Work items are (batch, head) pairs, split
// further into blocks of query rows when there are fewer pairs than threads;
// each item runs its two GEMMs single-threaded inside the parallel region, so
// the item decomposition (a function of the team size only) fixes every
// result bit.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace sd::rt::kernels {

int64_t attentionScratchFloats(int64_t sq, int64_t skv, int threads) {
  return static_cast<int64_t>(std::max(threads, 1)) * sq * skv;
}

/// Masks, exponentiates and normalizes one row of scores in place. `mask` is
/// the row's mask (nullptr: attend everywhere); a row with no key to attend
/// becomes zeros.
static void softmaxScoresRow(float *row, const float *mask, int64_t skv) {
  const float negInf = -std::numeric_limits<float>::infinity();
  if (mask) {
#pragma omp simd
    for (int64_t j = 0; j < skv; ++j)
      row[j] = mask[j] == 0.0f ? negInf : row[j];
  }
  float maxValue = detail::maxRow(row, skv);
  if (maxValue == negInf) {
    std::fill(row, row + skv, 0.0f);
    return;
  }
  float inv = static_cast<float>(1.0 / detail::expShifted(row, skv, maxValue));
#pragma omp simd
  for (int64_t j = 0; j < skv; ++j)
    row[j] *= inv;
}

void attention(const float *q, const float *k, const float *v,
               const float *mask, int64_t maskB, int64_t maskH, float *out,
               int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
               int64_t dv, double scale, float *scratch) {
  int64_t pairs = b * h;
  if (pairs == 0 || sq == 0 || dv == 0)
    return;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Split query rows only when heads alone cannot occupy the team.
  int64_t chunks = pairs >= threads ? 1 : (threads + pairs - 1) / pairs;
  chunks = std::min(chunks, sq);
  int64_t rowsPerChunk = (sq + chunks - 1) / chunks;
  auto alpha = static_cast<float>(scale);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t item = 0; item < pairs * chunks; ++item) {
    int64_t pair = item / chunks, chunk = item % chunks;
    int64_t bi = pair / h, hi = pair % h;
    int64_t r0 = chunk * rowsPerChunk, r1 = std::min(sq, r0 + rowsPerChunk);
    if (r0 >= r1)
      continue;
    int64_t rows = r1 - r0;
    float *scores =
        scratch + static_cast<int64_t>(omp_get_thread_num()) * sq * skv;
    const float *qh = q + (pair * sq + r0) * d;
    const float *kh = k + pair * skv * d;
    const float *vh = v + pair * skv * dv;
    float *oh = out + (pair * sq + r0) * dv;
    if (skv == 0) {
      std::fill(oh, oh + rows * dv, 0.0f);
      continue;
    }
    // With no head_dim (k = 0) the scores are zeros.
    detail::tileSgemm(false, true, rows, skv, d, alpha, qh, d, kh, d, 0.0f,
                      scores, skv);
    const float *maskHead = nullptr;
    if (mask)
      maskHead =
          mask +
          ((maskB == 1 ? 0 : bi) * maskH + (maskH == 1 ? 0 : hi)) * sq * skv;
    for (int64_t r = 0; r < rows; ++r)
      softmaxScoresRow(scores + r * skv,
                       maskHead ? maskHead + (r0 + r) * skv : nullptr, skv);
    detail::tileSgemm(false, false, rows, dv, skv, 1.0f, scores, skv, vh, dv,
                      0.0f, oh, dv);
  }
}

} // namespace sd::rt::kernels
