//===- sgemm_bench.cpp - The f32 GEMM ceiling, OpenBLAS and oneDNN ------===//
//
// The practical f32 compute ceiling of this machine: sgemm on square n×n
// matrices with the two libraries sd's kernels use, OpenBLAS's and oneDNN's
// OpenMP builds, threads from OMP_NUM_THREADS (default: all cores). sd's
// training step and attention are judged as a fraction of the faster one
// (bench/train_step.sh, bench/attention.sh).
//
//   sd_sgemm_bench                         Google Benchmark, n = 2048 (and
//                                          512, 1024), each library,
//                                          GFLOP/s as a counter
//   OMP_NUM_THREADS=1 sd_sgemm_bench --benchmark_filter=StepShapes
//                                          DiT-S/2's per-device GEMMs at
//                                          batch 8 on data:2 (M×N×K and
//                                          transposes) and attention's
//                                          tiles, each library, with warm
//                                          caches and with the caches
//                                          evicted before each call, as
//                                          inside a training step: what
//                                          KernelsGemm.cpp's choice of
//                                          library rests on
//   sd_sgemm_bench --table [--n=N] [--reps=R]
//                                          a line a library for scripts:
//                                          sgemm library=openblas n=2048
//                                          threads=2 gflops=150.3
//
//===----------------------------------------------------------------------===//

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

/// OMP_NUM_THREADS when set, else every core OpenMP sees.
int benchThreads() {
  if (const char *env = std::getenv("OMP_NUM_THREADS"))
    if (int n = std::atoi(env); n > 0)
      return n;
  return omp_get_num_procs();
}

enum Library { OpenBlas, OneDnn };
constexpr const char *kLibraryNames[] = {"openblas", "onednn"};

/// Row-major C = op(A)·op(B) through `library`.
void sgemm(Library library, bool transA, bool transB, int m, int n, int k,
           const float *a, int lda, const float *b, int ldb, float *c,
           int ldc) {
  if (library == OneDnn) {
    dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
               ldb, 0.0f, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
              0.0f, c, ldc);
}

struct Matrices {
  explicit Matrices(int n) : n(n), a(size_t(n) * n), b(a.size()), c(a.size()) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
    }
  }
  void multiply(Library library) {
    sgemm(library, false, false, n, n, n, a.data(), n, b.data(), n, c.data(),
          n);
  }
  int n;
  std::vector<float> a, b, c;
};

double flopsOf(int n) { return 2.0 * double(n) * n * n; }

/// args n, library.
void BM_Sgemm(benchmark::State &state) {
  int n = static_cast<int>(state.range(0));
  auto library = static_cast<Library>(state.range(1));
  int threads = benchThreads();
  openblas_set_num_threads(threads);
  Matrices m(n);
  m.multiply(library); // warm-up: thread pool start, JIT, page faults
  for (auto _ : state) {
    m.multiply(library);
    benchmark::DoNotOptimize(m.c.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
  // Per-iteration FLOPs as a rate: GFLOP/s is the counter / 1e9.
  state.counters["FLOPS"] = benchmark::Counter(
      flopsOf(n), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.SetLabel("n=" + std::to_string(n) + " " + kLibraryNames[library]);
}
BENCHMARK(BM_Sgemm)
    ->ArgsProduct({{512, 1024, 2048}, {OpenBlas, OneDnn}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

/// One GEMM of DiT-S/2's step on one device (4 samples of 256 tokens), or
/// of its flash attention's tiles: args m, n, k, transA, transB, cold,
/// library. Cold calls first write a buffer larger than the last-level
/// cache share a step's other tensors occupy (256 MiB), outside the timing.
void BM_SgemmStepShapes(benchmark::State &state) {
  int m = static_cast<int>(state.range(0)),
      n = static_cast<int>(state.range(1)),
      k = static_cast<int>(state.range(2));
  bool transA = state.range(3) != 0, transB = state.range(4) != 0;
  bool cold = state.range(5) != 0;
  auto library = static_cast<Library>(state.range(6));
  int threads = benchThreads();
  openblas_set_num_threads(threads);
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(k) * n, 0.25f),
      c(size_t(m) * n);
  std::vector<float> evict(cold ? size_t(64) << 20 : 0);
  auto multiply = [&] {
    sgemm(library, transA, transB, m, n, k, a.data(), transA ? m : k, b.data(),
          transB ? k : n, c.data(), n);
  };
  multiply();
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      for (size_t i = 0; i < evict.size(); i += 16)
        evict[i] += 1.0f;
      benchmark::ClobberMemory();
      state.ResumeTiming();
    }
    multiply();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
  state.counters["FLOPS"] = benchmark::Counter(
      2.0 * double(m) * n * k, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.SetLabel(std::to_string(m) + "x" + std::to_string(n) + "x" +
                 std::to_string(k) + (transA ? " tA" : "") +
                 (transB ? " tB" : "") + (cold ? " cold " : " warm ") +
                 kLibraryNames[library]);
}
BENCHMARK(BM_SgemmStepShapes)
    // The MLP's products: forward, input gradient, weight gradient.
    ->ArgsProduct({{1024}, {1536}, {384}, {0}, {0}, {0, 1}, {OpenBlas, OneDnn}})
    ->ArgsProduct({{1024}, {384}, {1536}, {0}, {1}, {0, 1}, {OpenBlas, OneDnn}})
    ->ArgsProduct({{384}, {1536}, {1024}, {1}, {0}, {0, 1}, {OpenBlas, OneDnn}})
    // The attention projection's forward and weight gradient.
    ->ArgsProduct({{1024}, {1152}, {384}, {0}, {0}, {0, 1}, {OpenBlas, OneDnn}})
    ->ArgsProduct({{384}, {1152}, {1024}, {1}, {0}, {0, 1}, {OpenBlas, OneDnn}})
    // Flash attention's tiles (N 256, D 64), in cache: Q·Kᵀ, P·V, and the
    // backward's Pᵀ·dO (dSᵀ·Q alike).
    ->ArgsProduct({{256}, {256}, {64}, {0}, {1}, {0}, {OpenBlas, OneDnn}})
    ->ArgsProduct({{256}, {64}, {256}, {0}, {0}, {0}, {OpenBlas, OneDnn}})
    ->ArgsProduct({{256}, {64}, {256}, {1}, {0}, {0}, {OpenBlas, OneDnn}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

/// --table: for each library, the best of `reps` timed multiplies after one
/// warm-up.
int runTable(int n, int reps) {
  int threads = benchThreads();
  openblas_set_num_threads(threads);
  Matrices m(n);
  for (Library library : {OpenBlas, OneDnn}) {
    m.multiply(library);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto start = std::chrono::steady_clock::now();
      m.multiply(library);
      double s = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count();
      best = std::min(best, s);
    }
    std::printf("sgemm library=%s n=%d threads=%d gflops=%.1f\n",
                kLibraryNames[library], n, threads, flopsOf(n) / best / 1e9);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  bool table = false;
  int n = 2048, reps = 10;
  std::vector<char *> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--table"))
      table = true;
    else if (!std::strncmp(argv[i], "--n=", 4))
      n = std::atoi(argv[i] + 4);
    else if (!std::strncmp(argv[i], "--reps=", 7))
      reps = std::atoi(argv[i] + 7);
    else
      rest.push_back(argv[i]);
  }
  if (table) {
    if (n <= 0 || reps <= 0) {
      std::fprintf(stderr, "sd_sgemm_bench: --n and --reps must be positive\n");
      return 2;
    }
    return runTable(n, reps);
  }
  int restArgc = static_cast<int>(rest.size());
  benchmark::Initialize(&restArgc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(restArgc, rest.data()))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
