//===- gemm_bf16_bench.cpp - sd's bf16 GEMM against the f32 ceiling -------===//
//
// Square n×n GEMM four ways on the same operands (random bf16 numbers, and
// their exact f32 widening for the f32 products): OpenBLAS's and oneDNN's
// sgemm, the f32 ceiling of bench/sgemm_bench.cpp, and sd's
// kernels::gemmBF16 (oneDNN's matmul primitive on bf16 operands, f32
// accumulation) with an f32 C and with a bf16 C. Threads from
// OMP_NUM_THREADS (default: all cores). bench/bf16_gemm.sh runs it.
//
//   sd_gemm_bf16_bench                     Google Benchmark, n = 2048, each
//                                          implementation, GFLOP/s as a
//                                          counter
//   sd_gemm_bf16_bench --table [--n=N] [--reps=R] [--impls=A,B]
//                                          a line an implementation for
//                                          scripts, the best of R calls
//                                          after one warm-up (the
//                                          implementations take turns):
//                                          gemm impl=bf16_f32c n=2048
//                                          threads=2 gflops=612.3
//   sd_gemm_bf16_bench --check [--n=N]     gemmBF16's C (both types)
//                                          against oneDNN's sgemm on the
//                                          widened operands, as a fraction
//                                          of the round-off bound; exits 1
//                                          above it
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/Kernels.h"

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

using sd::rt::BFloat16;

/// OMP_NUM_THREADS when set, else every core OpenMP sees.
int benchThreads() {
  if (const char *env = std::getenv("OMP_NUM_THREADS"))
    if (int n = std::atoi(env); n > 0)
      return n;
  return omp_get_num_procs();
}

/// Both libraries and gemmBF16's OpenMP team on `threads` threads.
void setThreads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

enum Impl { SgemmOpenBlas, SgemmOneDnn, BF16F32C, BF16BF16C, NumImpls };
constexpr const char *kImplNames[] = {"sgemm_openblas", "sgemm_onednn",
                                      "bf16_f32c", "bf16_bf16c"};

/// C = A·B, all n×n row-major, in every implementation.
struct Operands {
  explicit Operands(int n)
      : n(n), a16(size_t(n) * n), b16(a16.size()), a(a16.size()), b(a16.size()),
        c(a16.size()), c16(a16.size()) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < a16.size(); ++i) {
      a16[i] = {sd::rt::toBFloat16(dist(rng)).bits};
      b16[i] = {sd::rt::toBFloat16(dist(rng)).bits};
    }
    sd::rt::convertToFloat(reinterpret_cast<const BFloat16 *>(a16.data()),
                           a.data(), static_cast<int64_t>(a.size()));
    sd::rt::convertToFloat(reinterpret_cast<const BFloat16 *>(b16.data()),
                           b.data(), static_cast<int64_t>(b.size()));
  }

  void multiply(Impl impl) {
    switch (impl) {
    case SgemmOpenBlas:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                  a.data(), n, b.data(), n, 0.0f, c.data(), n);
      break;
    case SgemmOneDnn:
      dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                 c.data(), n);
      break;
    case BF16F32C:
    case BF16BF16C: {
      bool cIsBF16 = impl == BF16BF16C;
      int64_t size = int64_t(n) * n;
      sd::rt::kernels::gemmBF16(1, false, false, n, n, n, a16.data(), n, size,
                                b16.data(), n, size,
                                cIsBF16 ? static_cast<void *>(c16.data())
                                        : static_cast<void *>(c.data()),
                                cIsBF16, n, size);
      break;
    }
    case NumImpls:
      break;
    }
  }

  int n;
  std::vector<sd_bf16> a16, b16;
  std::vector<float> a, b, c;
  std::vector<sd_bf16> c16;
};

double flopsOf(int n) { return 2.0 * double(n) * n * n; }

/// args n, impl.
void BM_Gemm(benchmark::State &state) {
  int n = static_cast<int>(state.range(0));
  auto impl = static_cast<Impl>(state.range(1));
  int threads = benchThreads();
  setThreads(threads);
  Operands ops(n);
  ops.multiply(impl); // warm-up: thread pool start, JIT, page faults
  for (auto _ : state) {
    ops.multiply(impl);
    benchmark::DoNotOptimize(ops.c.data());
    benchmark::DoNotOptimize(ops.c16.data());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
  // Per-iteration FLOPs as a rate: GFLOP/s is the counter / 1e9.
  state.counters["FLOPS"] = benchmark::Counter(
      flopsOf(n), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
  state.SetLabel("n=" + std::to_string(n) + " " + kImplNames[impl]);
}
BENCHMARK(BM_Gemm)
    ->ArgsProduct({{2048}, {SgemmOpenBlas, SgemmOneDnn, BF16F32C, BF16BF16C}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

/// --table: the best of `reps` timed calls of each implementation after one
/// warm-up each; the implementations take turns, so that a change of load
/// during the run falls on all of them.
int runTable(int n, int reps, const std::vector<Impl> &impls) {
  int threads = benchThreads();
  setThreads(threads);
  Operands ops(n);
  for (Impl impl : impls)
    ops.multiply(impl);
  std::vector<double> best(NumImpls, 1e30);
  for (int r = 0; r < reps; ++r)
    for (Impl impl : impls) {
      auto start = std::chrono::steady_clock::now();
      ops.multiply(impl);
      double s = std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count();
      best[impl] = std::min(best[impl], s);
    }
  for (Impl impl : impls)
    std::printf("gemm impl=%s n=%d threads=%d gflops=%.1f best_s=%.6f\n",
                kImplNames[impl], n, threads, flopsOf(n) / best[impl] / 1e9,
                best[impl]);
  return 0;
}

/// --check: gemmBF16 against oneDNN's sgemm of the widened operands. Each
/// f32-accumulated result is within gamma·S of the exact product
/// (gamma = n·2^-23, S = Σ|a||b|: bf16 products are exact in f32), so the
/// two differ by at most 2·gamma·S; a bf16 C adds half a bf16 ulp, at most
/// 2^-8·|c|. Prints the largest difference as a fraction of that bound.
int runCheck(int n) {
  setThreads(benchThreads());
  Operands ops(n);
  ops.multiply(SgemmOneDnn);
  std::vector<float> reference = ops.c;
  // S through sgemm on |A|, |B| (its own round-off is gamma relative).
  std::vector<float> absA(ops.a.size()), absB(ops.b.size()),
      sumAbs(ops.c.size());
  for (size_t i = 0; i < absA.size(); ++i) {
    absA[i] = std::fabs(ops.a[i]);
    absB[i] = std::fabs(ops.b[i]);
  }
  dnnl_sgemm('N', 'N', n, n, n, 1.0f, absA.data(), n, absB.data(), n, 0.0f,
             sumAbs.data(), n);
  ops.multiply(BF16F32C);
  ops.multiply(BF16BF16C);
  double gamma = n * std::ldexp(1.0, -23);
  double worstF32 = 0.0, worstBF16 = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    double ref = reference[i], s = 2.0 * gamma * sumAbs[i];
    double f32 = ops.c[i];
    double bf16 = sd::rt::toFloat(BFloat16{ops.c16[i].bits});
    double f32Ratio = std::fabs(f32 - ref) / s;
    double bf16Ratio = std::fabs(bf16 - ref) /
                       (s + std::ldexp(1.0, -8) * (std::fabs(ref) + s));
    // NaN compares false: counted as out of bound.
    worstF32 = f32Ratio <= worstF32 ? worstF32 : f32Ratio;
    worstBF16 = bf16Ratio <= worstBF16 ? worstBF16 : bf16Ratio;
  }
  bool ok = worstF32 <= 1.0 && worstBF16 <= 1.0;
  std::printf("check n=%d f32c_err_over_bound=%.3g bf16c_err_over_bound=%.3g "
              "result=%s\n",
              n, worstF32, worstBF16, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

/// "a,b" of kImplNames into `impls`; false on an unknown name.
bool parseImpls(const char *list, std::vector<Impl> &impls) {
  impls.clear();
  std::string rest = list;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string name = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    auto *it = std::find_if(std::begin(kImplNames), std::end(kImplNames),
                            [&](const char *known) { return name == known; });
    if (it == std::end(kImplNames))
      return false;
    impls.push_back(static_cast<Impl>(it - std::begin(kImplNames)));
  }
  return !impls.empty();
}

} // namespace

int main(int argc, char **argv) {
  bool table = false, check = false;
  int n = 2048, reps = 10;
  std::vector<Impl> impls = {SgemmOpenBlas, SgemmOneDnn, BF16F32C, BF16BF16C};
  std::vector<char *> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--table")) {
      table = true;
    } else if (!std::strcmp(argv[i], "--check")) {
      check = true;
    } else if (!std::strncmp(argv[i], "--n=", 4)) {
      n = std::atoi(argv[i] + 4);
    } else if (!std::strncmp(argv[i], "--reps=", 7)) {
      reps = std::atoi(argv[i] + 7);
    } else if (!std::strncmp(argv[i], "--impls=", 8)) {
      if (!parseImpls(argv[i] + 8, impls)) {
        std::fprintf(stderr,
                     "sd_gemm_bf16_bench: --impls takes a comma-separated "
                     "list of sgemm_openblas, sgemm_onednn, bf16_f32c, "
                     "bf16_bf16c\n");
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (table || check) {
    if (n <= 0 || reps <= 0) {
      std::fprintf(stderr,
                   "sd_gemm_bf16_bench: --n and --reps must be positive\n");
      return 2;
    }
    return check ? runCheck(n) : runTable(n, reps, impls);
  }
  int restArgc = static_cast<int>(rest.size());
  benchmark::Initialize(&restArgc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(restArgc, rest.data()))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
