//===- BFloat16.cpp - bfloat16 conversions of arrays ----------------------===//
//
// The array conversions run sixteen lanes at a time where the CPU has
// AVX-512 (the runtime is built for any x86-64, so the vector path is
// chosen when the process starts). The vector path does toBFloat16's
// integer arithmetic lane by lane, so both paths give the same bits
// (BFloat16Test compares them on every class of value). AVX512_BF16's
// conversion instruction is not used: it flushes subnormals to zero.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/BFloat16.h"

// GCC 12 reports the unmasked AVX-512 shifts' internal _mm512_undefined
// operand as maybe-uninitialized (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

namespace sd::rt {

static bool hasAvx512() {
  static const bool result = __builtin_cpu_supports("avx512f");
  return result;
}

__attribute__((target("avx512f"))) static int64_t
convertToBFloat16Avx512(const float *in, BFloat16 *out, int64_t count) {
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512i infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quietBit = _mm512_set1_epi32(0x0040);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512i bits = _mm512_loadu_si512(in + i);
    __m512i high = _mm512_srli_epi32(bits, 16);
    __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, absMask), infinity);
    __m512i lowestKept = _mm512_and_si512(high, one);
    __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(bits, half), lowestKept), 16);
    __m512i result =
        _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, quietBit));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i),
                        _mm512_cvtepi32_epi16(result));
  }
  return i;
}

__attribute__((target("avx512f"))) static int64_t
convertToFloatAvx512(const BFloat16 *in, float *out, int64_t count) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m256i halves =
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i));
    _mm512_storeu_si512(out + i,
                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
  }
  return i;
}

#pragma GCC diagnostic pop

void convertToBFloat16(const float *in, BFloat16 *out, int64_t count) {
  int64_t i = hasAvx512() ? convertToBFloat16Avx512(in, out, count) : 0;
  for (; i < count; ++i)
    out[i] = toBFloat16(in[i]);
}

void convertToFloat(const BFloat16 *in, float *out, int64_t count) {
  int64_t i = hasAvx512() ? convertToFloatAvx512(in, out, count) : 0;
  for (; i < count; ++i)
    out[i] = toFloat(in[i]);
}

} // namespace sd::rt
