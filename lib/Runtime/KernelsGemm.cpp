//===- KernelsGemm.cpp - Strided batched GEMM over OpenBLAS ---------------===//
//
// Every matrix product of a device program ends here. OpenBLAS's OpenMP build
// runs one sgemm on the calling thread's OpenMP team, and single-threaded when
// called inside a parallel region; both schedules split the output, never the
// contraction, so results are deterministic for a given team size.
//
// A batch of small GEMMs (attention's per-head products, 256x64x256) is
// parallelized over the batch instead: splitting one small GEMM over threads
// costs more in synchronization than it gains.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include <cblas.h>
#include <omp.h>

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

/// One GEMM through cblas_sgemm (row-major, alpha 1).
static void gemmOne(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, float *c, int64_t ldc) {
  if (k == 0) {
    scaleOutput(m, n, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
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
      gemmOne(transA, transB, m, n, k, a + i * strideA, lda, b + i * strideB,
              ldb, beta, c + i * strideC, ldc);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemmOne(transA, transB, m, n, k, a + i * strideA, lda, b + i * strideB, ldb,
            beta, c + i * strideC, ldc);
}

} // namespace sd::rt::kernels
