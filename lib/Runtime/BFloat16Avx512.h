//===- BFloat16Avx512.h - bf16 rounding of sixteen lanes --------*- C++ -*-===//
//
// toBFloat16 on sixteen floats at once, for the runtime's AVX-512 loops
// that round what they compute before storing it: the array conversion
// (BFloat16.cpp) and the attention kernels' rows (KernelsMisc.cpp), so that
// both give toBFloat16's bits. Each includer compiles it into functions
// with the avx512f target; the runtime itself is built for any x86-64.
//
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_BFLOAT16AVX512_H
#define SD_LIB_RUNTIME_BFLOAT16AVX512_H

#include "sd/Runtime/BFloat16.h"

// GCC 12 reports the unmasked AVX-512 shifts' internal _mm512_undefined
// operand as maybe-uninitialized (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace sd::rt::detail {

/// toBFloat16 of the sixteen floats `values` (nearest, ties to even; a NaN
/// kept quiet), stored at `out`.
__attribute__((target("avx512f"))) inline void
storeRoundedAvx512(__m512 values, BFloat16 *out) {
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512i infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quietBit = _mm512_set1_epi32(0x0040);
  __m512i bits = _mm512_castps_si512(values);
  __m512i high = _mm512_srli_epi32(bits, 16);
  __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, absMask), infinity);
  __m512i lowestKept = _mm512_and_si512(high, one);
  __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(bits, half), lowestKept), 16);
  __m512i result =
      _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, quietBit));
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(out),
                      _mm512_cvtepi32_epi16(result));
}

} // namespace sd::rt::detail

#pragma GCC diagnostic pop

#endif // SD_LIB_RUNTIME_BFLOAT16AVX512_H
