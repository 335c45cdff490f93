//===- KernelsDetail.h - Row primitives shared by the kernels ---*- C++ -*-===//
//
// What the attention kernels (KernelsAttention.cpp, KernelsFlash.cpp) share
// with the others: the vectorized row operations KernelsMisc.cpp defines and
// the GEMM of KernelsGemm.cpp. Each
// row operation picks the AVX-512, AVX2 or scalar path the CPU allows; the
// vector paths give the same bits (kernels::expShiftedRow tests them one by
// one).
//
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_KERNELSDETAIL_H
#define SD_LIB_RUNTIME_KERNELSDETAIL_H

#include "sd/Runtime/ProgramABI.h"

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

/// One row-major C = alpha·op(A)·op(B) + beta·C of a program's product
/// (KernelsGemm.cpp: oneDNN or OpenBLAS by the product's form); nothing for
/// an empty C, C = beta·C for k = 0.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

/// sgemm for the attention kernels' in-cache tiles: oneDNN in every form.
void tileSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc);

/// C[m, n] (f32) = alpha·op(A)·op(B) + beta·C with beta 0 or 1 on bf16 tiles
/// of the attention kernels, single-threaded: one oneDNN matmul whose output
/// scale and sum post-op fold alpha and beta in, where the CPU has bf16
/// units; elsewhere gemmBF16's product, landing in `tmp` (m·n floats) when
/// it must be added, then scaled and added in a pass of its own.
void tileGemmBF16(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  float alpha, const sd_bf16 *a, int64_t lda, const sd_bf16 *b,
                  int64_t ldb, float beta, float *c, int64_t ldc, float *tmp);

} // namespace sd::rt::kernels::detail

#endif // SD_LIB_RUNTIME_KERNELSDETAIL_H
