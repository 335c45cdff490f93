//===- BFloat16.cpp - bfloat16 conversions of arrays ----------------------===//

#include "sd/Runtime/BFloat16.h"

namespace sd::rt {

void convertToBFloat16(const float *in, BFloat16 *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = toBFloat16(in[i]);
}

void convertToFloat(const BFloat16 *in, float *out, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = toFloat(in[i]);
}

} // namespace sd::rt
