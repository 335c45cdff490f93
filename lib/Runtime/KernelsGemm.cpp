//===- KernelsGemm.cpp - Strided batched GEMM over oneDNN and OpenBLAS ----===//
//
// Every matrix product of a device program ends here (detail::sgemm), and
// the attention kernels' tiles too (detail::tileSgemm). Two libraries, each
// where it measured faster on the GEMM shapes of a DiT training step
// (bench/sgemm_bench.cpp's StepShapes, both libraries side by side):
// oneDNN's sgemm (JIT-generated AVX-512/AVX2 kernels) for every program
// product but one form, 6-22% faster than OpenBLAS 0.3.21, and for every
// attention tile, 4-40% faster; OpenBLAS for the program's Aᵀ·B (the
// weight gradients' form: both operands stored with the contraction on
// rows, tokens by the thousand), where oneDNN 2.6 measured 6-16% slower. Both
// are Debian's OpenMP builds: one called from a device thread runs on that
// thread's OpenMP team, and single-threaded inside a parallel region. Neither's
// result depends on anything but the shapes and the team size, so runs repeat
// bitwise.
//
// A batch of small GEMMs (attention's per-head products, 256x64x256) is
// parallelized over the batch instead: splitting one small GEMM over threads
// costs more in synchronization than it gains.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>

namespace sd::rt::kernels {

/// Below this many multiply-adds per GEMM (about 256x384x384), a batch runs
/// one GEMM per thread. Provisional: measurements on the shared 2-core
/// development machine were too noisy to place the crossover precisely.
static constexpr int64_t kSmallGemmMacs = int64_t(1) << 25;

/// C = beta * C for an m x n block when there is nothing to contract.
static void scaleOutput(int64_t m, int64_t n, float beta, float *c,
                        int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/// One GEMM through oneDNN (`useOneDnn`, when it accepts it) or OpenBLAS.
static void sgemmWith(bool useOneDnn, bool transA, bool transB, int64_t m,
                      int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    scaleOutput(m, n, beta, c, ldc);
    return;
  }
  // oneDNN refuses nothing valid; its status is checked all the same, and a
  // refusal falls back to OpenBLAS.
  if (useOneDnn &&
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda,
                 b, ldb, beta, c, ldc) == dnnl_success)
    return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

void detail::sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
  sgemmWith(!(transA && !transB), transA, transB, m, n, k, alpha, a, lda, b,
            ldb, beta, c, ldc);
}

void detail::tileSgemm(bool transA, bool transB, int64_t m, int64_t n,
                       int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c,
                       int64_t ldc) {
  sgemmWith(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, const float *a, int64_t lda, int64_t strideA,
          const float *b, int64_t ldb, int64_t strideB, float beta, float *c,
          int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Parallel over the batch only when every thread gets the same number of
  // GEMMs (or enough that the remainder does not matter).
  bool overBatch = threads > 1 && m * n * k < kSmallGemmMacs &&
                   (batch % threads == 0 || batch >= 4 * threads);
  if (overBatch) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      detail::sgemm(transA, transB, m, n, k, 1.0f, a + i * strideA, lda,
                    b + i * strideB, ldb, beta, c + i * strideC, ldc);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    detail::sgemm(transA, transB, m, n, k, 1.0f, a + i * strideA, lda,
                  b + i * strideB, ldb, beta, c + i * strideC, ldc);
}

} // namespace sd::rt::kernels
