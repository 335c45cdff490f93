//===- KernelsDetail.h - Row primitives shared by the kernels ---*- C++ -*-===//
//
// What the attention kernels (KernelsAttention.cpp, KernelsFlash.cpp) share
// with the others: the vectorized row operations KernelsMisc.cpp defines and
// the GEMM of KernelsGemm.cpp; and with each other, their tile products on
// f32 or bf16 operands, bf16 rounding and scratch alignment. Each
// row operation picks the AVX-512, AVX2 or scalar path the CPU allows; the
// vector paths give the same bits (kernels::expShiftedRow tests them one by
// one).
//
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_KERNELSDETAIL_H
#define SD_LIB_RUNTIME_KERNELSDETAIL_H

#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/ProgramABI.h"

#include <cstdint>

namespace sd::rt::kernels::detail {

/// row[i] = exp(row[i] - shift) for i < n, returning the sum (sixteen float
/// lanes, element i in lane i % 16, added in double in lane order; -inf
/// entries give 0).
double expShifted(float *row, int64_t n, float shift);

/// expShifted, each exponential also rounded to bf16 into low[0..n) (the
/// bits narrow gives) in the same pass: the attention kernels' P rows where
/// a bf16 product reads them.
double expShiftedNarrow(float *row, int64_t n, float shift, sd_bf16 *low);

/// ds[j] = p[j]·(ds[j] - di) for j < n (attention's score gradients from
/// the probabilities and dP), each also rounded to bf16 into low[j] in the
/// same pass.
void scoreGradsNarrow(const float *p, float *ds, float di, int64_t n,
                      sd_bf16 *low);

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

/// Scratch regions start on 64-byte boundaries (16 floats) so that threads
/// never share a cache line.
inline int64_t roundUp(int64_t floats) { return (floats + 15) / 16 * 16; }

/// `count` f32 values rounded to bf16 (to nearest, ties to even).
inline void narrow(const float *in, sd_bf16 *out, int64_t count) {
  convertToBFloat16(in, reinterpret_cast<BFloat16 *>(out), count);
}

/// C[m, n] (f32, row stride ldc) = alpha·op(A)·op(B) + beta·C with beta 0 or
/// 1, single-threaded inside an attention kernel's parallel loop: tileSgemm
/// for f32 operands, tileGemmBF16 for bf16 ones (`tmp`, m·n floats, holds
/// the product where it cannot fold beta in; unused for beta 0).
inline void tileProduct(bool transA, bool transB, int64_t m, int64_t n,
                        int64_t k, float alpha, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c,
                        int64_t ldc, float *) {
  tileSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void tileProduct(bool transA, bool transB, int64_t m, int64_t n,
                        int64_t k, float alpha, const sd_bf16 *a, int64_t lda,
                        const sd_bf16 *b, int64_t ldb, float beta, float *c,
                        int64_t ldc, float *tmp) {
  tileGemmBF16(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
               tmp);
}

} // namespace sd::rt::kernels::detail

#endif // SD_LIB_RUNTIME_KERNELSDETAIL_H
