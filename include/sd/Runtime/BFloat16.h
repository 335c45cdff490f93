//===- BFloat16.h - bfloat16 numbers and their conversions ------*- C++ -*-===//
//
// bfloat16 keeps an f32's sign, its 8 exponent bits and the top 7 bits of
// its mantissa: the upper 16 bits of the f32. Converting from f32 rounds to
// the nearest bfloat16, ties to even (what oneDNN, PyTorch and XLA do);
// NaN stays NaN (quiet, with its sign), and a finite value that rounds past
// the largest bfloat16 becomes infinity. Converting to f32 is exact.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_BFLOAT16_H
#define SD_RUNTIME_BFLOAT16_H

#include "sd/Runtime/VectorPath.h"

#include <cstdint>
#include <cstring>

namespace sd::rt {

/// A bfloat16 number: its bits.
struct BFloat16 {
  uint16_t bits = 0;
};

/// `value` rounded to the nearest bfloat16, ties to even.
inline BFloat16 toBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    // NaN: keep the sign and the top of the payload, and make it quiet (a
    // payload only in the discarded bits would otherwise become infinity).
    return {static_cast<uint16_t>((bits >> 16) | 0x0040u)};
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa moves to the exponent, up to infinity.
  uint32_t lowestKept = (bits >> 16) & 1u;
  return {static_cast<uint16_t>((bits + 0x7fffu + lowestKept) >> 16)};
}

/// The f32 of `value` (exact).
inline float toFloat(BFloat16 value) {
  uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

/// `count` f32 values to bfloat16, and back: sixteen (AVX-512) or eight
/// (AVX2) lanes at a time on `path` (Best: the widest the CPU runs; another
/// path only where hasVectorPath says the CPU runs it), the same bits as
/// toBFloat16 and toFloat element by element.
void convertToBFloat16(const float *in, BFloat16 *out, int64_t count,
                       VectorPath path = VectorPath::Best);
void convertToFloat(const BFloat16 *in, float *out, int64_t count,
                    VectorPath path = VectorPath::Best);

} // namespace sd::rt

#endif // SD_RUNTIME_BFLOAT16_H
