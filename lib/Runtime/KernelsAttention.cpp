//===- KernelsAttention.cpp - Multi-head scaled dot-product attention -----===//
//
// One head at a time: scores = scale * Q K^T into the thread's scratch, mask,
// row softmax, then scores * V. Work items are (batch, head) pairs, split
// further into blocks of query rows when there are fewer pairs than threads;
// each item runs its two GEMMs single-threaded inside the parallel region, so
// the item decomposition (a function of the team size only) fixes every
// result bit.
//
// With bf16 operands both products run on the CPU's bf16 units (oneDNN's
// bf16 matmul, as the flash kernels' tiles) with f32 sums: the scores and
// their softmax are f32, the probabilities are rounded to bf16 for the
// product with V, and each output row is rounded to bf16 once. That is where
// the bf16 flash kernels and the backward's recomputed probabilities round,
// and where sd/Reference's attention rounds for bf16 operands.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include "sd/Runtime/BFloat16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace sd::rt::kernels {

namespace {

using detail::narrow;
using detail::roundUp;

/// One thread's scratch: the f32 scores of a head (or a block of its query
/// rows), then with bf16 operands the probabilities rounded to bf16 and the
/// f32 output rows.
struct ThreadScratch {
  int64_t scores, probabilities, output;
  int64_t total() const { return scores + probabilities + output; }
};

ThreadScratch threadScratch(int64_t sq, int64_t skv, int64_t dv,
                            SdElementType element) {
  ThreadScratch t{roundUp(sq * skv), 0, 0};
  if (element == SD_BF16) {
    t.probabilities = roundUp((sq * skv + 1) / 2);
    t.output = roundUp(sq * dv);
  }
  return t;
}

} // namespace

int64_t attentionScratchFloats(int64_t sq, int64_t skv, int64_t dv, int threads,
                               SdElementType element) {
  return static_cast<int64_t>(std::max(threads, 1)) *
         threadScratch(sq, skv, dv, element).total();
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

template <typename Elem>
static void attentionImpl(const Elem *q, const Elem *k, const Elem *v,
                          const float *mask, int64_t maskB, int64_t maskH,
                          Elem *out, int64_t b, int64_t h, int64_t sq,
                          int64_t skv, int64_t d, int64_t dv, double scale,
                          float *scratch) {
  constexpr bool kF32 = std::is_same_v<Elem, float>;
  int64_t pairs = b * h;
  if (pairs == 0 || sq == 0 || dv == 0)
    return;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Split query rows only when heads alone cannot occupy the team.
  int64_t chunks = pairs >= threads ? 1 : (threads + pairs - 1) / pairs;
  chunks = std::min(chunks, sq);
  int64_t rowsPerChunk = (sq + chunks - 1) / chunks;
  auto alpha = static_cast<float>(scale);
  ThreadScratch layout = threadScratch(sq, skv, dv, kF32 ? SD_F32 : SD_BF16);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t item = 0; item < pairs * chunks; ++item) {
    int64_t pair = item / chunks, chunk = item % chunks;
    int64_t bi = pair / h, hi = pair % h;
    int64_t r0 = chunk * rowsPerChunk, r1 = std::min(sq, r0 + rowsPerChunk);
    if (r0 >= r1)
      continue;
    int64_t rows = r1 - r0;
    float *scores =
        scratch + static_cast<int64_t>(omp_get_thread_num()) * layout.total();
    const Elem *qh = q + (pair * sq + r0) * d;
    const Elem *kh = k + pair * skv * d;
    const Elem *vh = v + pair * skv * dv;
    Elem *oh = out + (pair * sq + r0) * dv;
    if (skv == 0) {
      std::fill(oh, oh + rows * dv, Elem{});
      continue;
    }
    // With no head_dim (k = 0) the scores are zeros.
    detail::tileProduct(false, true, rows, skv, d, alpha, qh, d, kh, d, 0.0f,
                        scores, skv, nullptr);
    const float *maskHead = nullptr;
    if (mask)
      maskHead =
          mask +
          ((maskB == 1 ? 0 : bi) * maskH + (maskH == 1 ? 0 : hi)) * sq * skv;
    for (int64_t r = 0; r < rows; ++r)
      softmaxScoresRow(scores + r * skv,
                       maskHead ? maskHead + (r0 + r) * skv : nullptr, skv);
    if constexpr (kF32) {
      detail::tileProduct(false, false, rows, dv, skv, 1.0f, scores, skv, vh,
                          dv, 0.0f, oh, dv, nullptr);
    } else {
      // P rounded to bf16 for the product with V (as the bf16 flash kernel
      // and the backward's recomputed P), summed in f32, rounded once.
      auto *p = reinterpret_cast<sd_bf16 *>(scores + layout.scores);
      float *acc = scores + layout.scores + layout.probabilities;
      narrow(scores, p, rows * skv);
      detail::tileProduct(false, false, rows, dv, skv, 1.0f, p, skv, vh, dv,
                          0.0f, acc, dv, nullptr);
      narrow(acc, oh, rows * dv);
    }
  }
}

void attention(const float *q, const float *k, const float *v,
               const float *mask, int64_t maskB, int64_t maskH, float *out,
               int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
               int64_t dv, double scale, float *scratch) {
  attentionImpl(q, k, v, mask, maskB, maskH, out, b, h, sq, skv, d, dv, scale,
                scratch);
}

void attention(const sd_bf16 *q, const sd_bf16 *k, const sd_bf16 *v,
               const float *mask, int64_t maskB, int64_t maskH, sd_bf16 *out,
               int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
               int64_t dv, double scale, float *scratch) {
  attentionImpl(q, k, v, mask, maskB, maskH, out, b, h, sq, skv, d, dv, scale,
                scratch);
}

} // namespace sd::rt::kernels
