//===- KernelsDetail.h - Row primitives shared by the kernels ---*- C++ -*-===//
//
// The vectorized row operations that KernelsMisc.cpp defines and the
// attention kernels (KernelsAttention.cpp, KernelsFlash.cpp) share. Each
// picks the AVX-512, AVX2 or scalar path the CPU allows; the vector paths
// give the same bits (kernels::expShiftedRow tests them one by one).
//
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_KERNELSDETAIL_H
#define SD_LIB_RUNTIME_KERNELSDETAIL_H

#include <cstdint>

namespace sd::rt::kernels::detail {

/// row[i] = exp(row[i] - shift) for i < n, returning the sum (sixteen float
/// lanes, element i in lane i % 16, added in double in lane order; -inf
/// entries give 0).
double expShifted(float *row, int64_t n, float shift);

/// The maximum of row[0..n), n > 0.
float maxRow(const float *row, int64_t n);

/// Softmax of one contiguous row in place; a row of only -inf becomes NaN.
void softmaxRow(float *row, int64_t n);

} // namespace sd::rt::kernels::detail

#endif // SD_LIB_RUNTIME_KERNELSDETAIL_H
