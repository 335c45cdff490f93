//===- KernelsGemm.cpp - Strided batched GEMM over oneDNN and OpenBLAS ----===//
//
// Every matrix product of a device program ends here (detail::sgemm), and
// the attention kernels' tiles too (detail::tileSgemm). Two libraries, each
// where it measured faster on the GEMM shapes of a DiT training step
// (bench/sgemm_bench.cpp's StepShapes, both libraries side by side):
// oneDNN's sgemm (JIT-generated AVX-512/AVX2 kernels) for every program
// product but one form, and for every attention tile. The program's Aᵀ·B
// (the weight gradients' form: both operands stored with the contraction on
// rows, tokens by the thousand) goes to OpenBLAS, which measured 6-16%
// faster there than oneDNN 2.6 on the AVX-512 development machine (the
// other forms 6-22% slower, the attention tiles 4-40% slower), except on a
// CPU with AMX: on an Intel Xeon with AMX (Sapphire Rapids), OpenBLAS
// 0.3.21 (its SkylakeX kernels) ran every step shape at 15-26 GFLOP/s on
// one thread and oneDNN at 80-128, Aᵀ·B 4.4x faster (bench/sgemm_bench.cpp's
// StepShapes on both); and except where OpenBLAS runs narrower kernels than
// the CPU has: on the AVX-512 machine with OPENBLAS_CORETYPE=Haswell (its
// AVX2 kernels) the f32 step's Aᵀ·B products ran at 95-99 GFLOP/s a device
// against 170-199 for oneDNN's forms. The choice is made once per process
// from the CPU and OpenBLAS's core, so a machine's runs in one environment
// repeat bitwise. Both libraries are Debian's OpenMP builds: one
// called from a device thread runs on that thread's OpenMP team, and
// single-threaded inside a parallel region. Neither's result depends on
// anything but the shapes and the team size.
//
// A batch of small GEMMs (attention's per-head products, 256x64x256) is
// parallelized over the batch instead: splitting one small GEMM over threads
// costs more in synchronization than it gains.
//
// bf16 products (gemmBF16) go through oneDNN's matmul primitive, which uses
// the CPU's bf16 dot-product instructions (AVX512_BF16, AMX) where it has
// them and converts to f32 where it has not; products accumulate in f32
// either way. Debian's OpenBLAS is built without sbgemm, so there is no
// second library to choose from. On a CPU without those instructions, and
// should oneDNN refuse a shape, the operands are widened to f32 (exact) for
// the f32 GEMMs and the result rounded once: oneDNN's own conversion
// measured slower.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include "sd/Runtime/BFloat16.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

/// Whether OpenBLAS runs its AVX-512 kernels: its core is one of its
/// AVX-512 targets (OPENBLAS_CORETYPE may hold it to an older one).
static bool openBlasUsesAvx512() {
  std::string core = openblas_get_corename();
  std::transform(core.begin(), core.end(), core.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return core == "skylakex" || core == "cooperlake" || core == "sapphirerapids";
}

bool oneDnnForTransposedA() {
  static const bool oneDnn = [] {
    dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    if (isa == dnnl::cpu_isa::avx512_core_amx)
      return true;
    bool avx512 = isa == dnnl::cpu_isa::avx512_core ||
                  isa == dnnl::cpu_isa::avx512_core_vnni ||
                  isa == dnnl::cpu_isa::avx512_core_bf16;
    return avx512 && !openBlasUsesAvx512();
  }();
  return oneDnn;
}

void detail::sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
  sgemmWith(!(transA && !transB) || oneDnnForTransposedA(), transA, transB, m,
            n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void detail::tileSgemm(bool transA, bool transB, int64_t m, int64_t n,
                       int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, float *c,
                       int64_t ldc) {
  sgemmWith(true, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// Runs `product(i)` for each of a batch's `batch` GEMMs of m x n x k: in
/// parallel over the batch when every thread gets the same number of GEMMs
/// (or enough that the remainder does not matter) and each is small, each
/// GEMM then single-threaded; otherwise one after the other, each on the
/// whole team.
template <typename Product>
static void forEachProduct(int64_t batch, int64_t m, int64_t n, int64_t k,
                           Product product) {
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  bool overBatch = threads > 1 && m * n * k < kSmallGemmMacs &&
                   (batch % threads == 0 || batch >= 4 * threads);
  if (overBatch) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      product(i);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    product(i);
}

void gemm(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, const float *a, int64_t lda, int64_t strideA,
          const float *b, int64_t ldb, int64_t strideB, float beta, float *c,
          int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  forEachProduct(batch, m, n, k, [&](int64_t i) {
    detail::sgemm(transA, transB, m, n, k, 1.0f, a + i * strideA, lda,
                  b + i * strideB, ldb, beta, c + i * strideC, ldc);
  });
}

BF16ProductPath bf16ProductPath() {
  switch (dnnl::get_effective_cpu_isa()) {
  case dnnl::cpu_isa::avx512_core_amx:
    return {true, "avx512_core_amx"};
  case dnnl::cpu_isa::avx512_core_bf16:
    return {true, "avx512_core_bf16"};
  case dnnl::cpu_isa::avx512_core_vnni:
    return {false, "avx512_core_vnni"};
  case dnnl::cpu_isa::avx512_core:
    return {false, "avx512_core"};
  case dnnl::cpu_isa::avx2_vnni:
    return {false, "avx2_vnni"};
  case dnnl::cpu_isa::avx2:
    return {false, "avx2"};
  default:
    return {false, "older than avx2"};
  }
}

/// A bf16 GEMM's shape and layout, and the scale and accumulation its
/// attributes fold in: what its oneDNN primitive depends on.
using MatmulKey = std::array<int64_t, 14>;

static const dnnl::engine &cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A created matmul primitive, its description (the memory layouts) and
/// one memory object per argument, made once: a call points them at its
/// operands and executes through the C API with a fixed argument array.
/// Making three memory objects and a std::unordered_map of arguments on
/// every call (the C++ API's execute) cost 3% of a bf16 flash attention
/// backward at DiT-S/2's shape on one thread, whose 256 x 64 tiles are
/// products of a few microseconds each.
struct Matmul {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

/// The primitive a gemmBF16 call runs: the whole batch when C's batch
/// stride is m·ldc (oneDNN's only one), else one product a call. One
/// product a call has no batch stride; oneDNN still reads the one it is
/// given, and for anything but a dense one (a caller's 0, say) it picks its
/// scalar reference matmul (`ref:any`, minutes for a 2048³ product), so
/// such calls describe the dense layout.
/// `alpha` scales the product (oneDNN's output scale) and `accumulate` adds
/// it to C (a sum post-op), as the attention kernels' tiles ask.
static MatmulKey matmulKey(int64_t batch, bool transA, bool transB, int64_t m,
                           int64_t n, int64_t k, int64_t lda, int64_t strideA,
                           int64_t ldb, int64_t strideB, bool cIsBF16,
                           int64_t ldc, int64_t strideC, float alpha = 1.0f,
                           bool accumulate = false) {
  int64_t perCall = strideC == m * ldc ? batch : 1;
  if (perCall == 1) {
    strideA = (transA ? k : m) * lda;
    strideB = (transB ? n : k) * ldb;
  }
  uint32_t alphaBits;
  std::memcpy(&alphaBits, &alpha, sizeof(alphaBits));
  return {perCall, transA, transB,  m,       n,       k,         lda,
          ldb,     ldc,    strideA, strideB, cIsBF16, alphaBits, accumulate};
}

/// The matmul of `key` (created on first use, kept per thread, as each
/// device thread runs its own), or null when oneDNN refuses it.
static const Matmul *matmulFor(const MatmulKey &key) {
  thread_local std::map<MatmulKey, std::unique_ptr<Matmul>> cache;
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted)
    return it->second.get();
  auto [batch, transA, transB, m, n, k, lda, ldb, ldc, strideA, strideB,
        cIsBF16, alphaBits, accumulate] = key;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  dnnl::memory::desc a({batch, m, k}, dt::bf16,
                       transA ? dims{strideA, 1, lda} : dims{strideA, lda, 1});
  dnnl::memory::desc b({batch, k, n}, dt::bf16,
                       transB ? dims{strideB, 1, ldb} : dims{strideB, ldb, 1});
  dnnl::memory::desc c({batch, m, n}, cIsBF16 ? dt::bf16 : dt::f32,
                       dims{m * ldc, ldc, 1});
  dnnl::primitive_attr attr;
  float alpha;
  uint32_t bits = static_cast<uint32_t>(alphaBits);
  std::memcpy(&alpha, &bits, sizeof(alpha));
  if (alpha != 1.0f)
    attr.set_output_scales(0, {alpha});
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr,
                                    cpuEngine());
    const dnnl::engine &engine = cpuEngine();
    it->second = std::make_unique<Matmul>(
        Matmul{pd, dnnl::matmul(pd),
               dnnl::memory(pd.src_desc(), engine, DNNL_MEMORY_NONE),
               dnnl::memory(pd.weights_desc(), engine, DNNL_MEMORY_NONE),
               dnnl::memory(pd.dst_desc(), engine, DNNL_MEMORY_NONE)});
  } catch (const dnnl::error &) {
    // Left null: the caller falls back to sgemm.
  }
  return it->second.get();
}

/// Runs `matmul` over a batch of `batch` products, `perCall` of them a call
/// (C's stride in bytes: its element type is the primitive's).
static void runMatmul(const Matmul &matmul, int64_t batch, int64_t perCall,
                      const sd_bf16 *a, int64_t strideA, const sd_bf16 *b,
                      int64_t strideB, void *c, int64_t strideCBytes) {
  thread_local dnnl::stream stream(cpuEngine());
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, matmul.a.get()},
                                  {DNNL_ARG_WEIGHTS, matmul.b.get()},
                                  {DNNL_ARG_DST, matmul.c.get()}};
  for (int64_t i = 0; i < batch; i += perCall) {
    // The handles of plain (unpadded) layouts are set without touching the
    // memory, and the primitive's arguments are these objects: no other
    // thread uses them (the cache is per thread).
    dnnl::error::wrap_c_api(
        dnnl_memory_set_data_handle(matmul.a.get(),
                                    const_cast<sd_bf16 *>(a + i * strideA)),
        "could not set a matmul operand");
    dnnl::error::wrap_c_api(
        dnnl_memory_set_data_handle(matmul.b.get(),
                                    const_cast<sd_bf16 *>(b + i * strideB)),
        "could not set a matmul operand");
    dnnl::error::wrap_c_api(
        dnnl_memory_set_data_handle(matmul.c.get(),
                                    static_cast<char *>(c) + i * strideCBytes),
        "could not set a matmul result");
    dnnl::error::wrap_c_api(
        dnnl_primitive_execute(matmul.primitive.get(), stream.get(),
                               static_cast<int>(std::size(args)), args),
        "could not execute a matmul");
  }
  stream.wait();
}

namespace {
/// A thread's grow-only f32 buffer, left uninitialized: a std::vector's
/// resize would write zeros over every element it grows by, each time a
/// larger product follows a smaller one.
class Scratch {
public:
  float *get(int64_t count) {
    if (count > capacity) {
      data.reset(new float[static_cast<size_t>(count)]);
      capacity = count;
    }
    return data.get();
  }

private:
  std::unique_ptr<float[]> data;
  int64_t capacity = 0;
};
} // namespace

/// gemmBF16 through the f32 GEMMs, one product of the batch at a time (as
/// gemm batches them): its A and B widened (exactly) into the thread's
/// buffers, the product by detail::sgemm, and C rounded to bf16 once when it
/// is bf16, while the product's widened operands and result are still in
/// the core's caches (the batched per-head products of attention widened
/// and rounded whole measured 25-30% slower than f32 on AVX2 with two
/// devices' threads running). An operand shared by the batch (stride 0) is
/// widened once. The widened copies are transient and outside the device's
/// pool; the results are the bits gemm gives on the widened operands.
static void gemmBF16Widened(int64_t batch, bool transA, bool transB, int64_t m,
                            int64_t n, int64_t k, const sd_bf16 *a, int64_t lda,
                            int64_t strideA, const sd_bf16 *b, int64_t ldb,
                            int64_t strideB, void *c, bool cIsBF16, int64_t ldc,
                            int64_t strideC) {
  int64_t extentA = (transA ? k : m) * lda, extentB = (transB ? n : k) * ldb;
  auto widen = [](const sd_bf16 *from, int64_t extent, Scratch &into) {
    float *wide = into.get(extent);
    convertToFloat(reinterpret_cast<const BFloat16 *>(from), wide, extent);
    return wide;
  };
  // Operands shared by every product, widened once by this thread.
  thread_local Scratch sharedA, sharedB;
  const float *wideA0 = strideA == 0 ? widen(a, extentA, sharedA) : nullptr;
  const float *wideB0 = strideB == 0 ? widen(b, extentB, sharedB) : nullptr;
  forEachProduct(batch, m, n, k, [&](int64_t i) {
    thread_local Scratch wideA, wideB, wideC;
    const float *wa = wideA0 ? wideA0 : widen(a + i * strideA, extentA, wideA);
    const float *wb = wideB0 ? wideB0 : widen(b + i * strideB, extentB, wideB);
    float *out =
        cIsBF16 ? wideC.get(m * ldc) : static_cast<float *>(c) + i * strideC;
    detail::sgemm(transA, transB, m, n, k, 1.0f, wa, lda, wb, ldb, 0.0f, out,
                  ldc);
    if (!cIsBF16)
      return;
    auto *into =
        reinterpret_cast<BFloat16 *>(static_cast<sd_bf16 *>(c) + i * strideC);
    for (int64_t r = 0; r < m; ++r)
      convertToBFloat16(out + r * ldc, into + r * ldc, n);
  });
}

void gemmBF16(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
              int64_t k, const sd_bf16 *a, int64_t lda, int64_t strideA,
              const sd_bf16 *b, int64_t ldb, int64_t strideB, void *c,
              bool cIsBF16, int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t r = 0; r < m; ++r) {
        size_t offset = static_cast<size_t>(i * strideC + r * ldc);
        if (cIsBF16)
          std::fill_n(static_cast<sd_bf16 *>(c) + offset, n, sd_bf16{0});
        else
          std::fill_n(static_cast<float *>(c) + offset, n, 0.0f);
      }
    return;
  }
  // Without bf16 units oneDNN's matmul converts to f32 inside its own
  // kernels, slower than widening once and using the f32 GEMMs (DiT-S/2's
  // training step on AVX2: bench/bf16_step.sh).
  static const bool native = bf16ProductPath().native;
  if (!native) {
    gemmBF16Widened(batch, transA, transB, m, n, k, a, lda, strideA, b, ldb,
                    strideB, c, cIsBF16, ldc, strideC);
    return;
  }
  MatmulKey key = matmulKey(batch, transA, transB, m, n, k, lda, strideA, ldb,
                            strideB, cIsBF16, ldc, strideC);
  int64_t perCall = key[0];
  const Matmul *matmul = matmulFor(key);
  if (!matmul) {
    gemmBF16Widened(batch, transA, transB, m, n, k, a, lda, strideA, b, ldb,
                    strideB, c, cIsBF16, ldc, strideC);
    return;
  }
  runMatmul(*matmul, batch, perCall, a, strideA, b, strideB, c,
            strideC * static_cast<int64_t>(cIsBF16 ? sizeof(sd_bf16)
                                                   : sizeof(float)));
}

void detail::tileGemmBF16(bool transA, bool transB, int64_t m, int64_t n,
                          int64_t k, float alpha, const sd_bf16 *a, int64_t lda,
                          const sd_bf16 *b, int64_t ldb, float beta, float *c,
                          int64_t ldc, float *tmp) {
  if (m <= 0 || n <= 0)
    return;
  bool accumulate = beta != 0.0f;
  int64_t strideA = (transA ? k : m) * lda, strideB = (transB ? n : k) * ldb;
  static const bool native = bf16ProductPath().native;
  if (native && k > 0) {
    if (const Matmul *matmul = matmulFor(
            matmulKey(1, transA, transB, m, n, k, lda, strideA, ldb, strideB,
                      /*cIsBF16=*/false, ldc, m * ldc, alpha, accumulate))) {
      runMatmul(*matmul, 1, 1, a, strideA, b, strideB, c,
                m * ldc * static_cast<int64_t>(sizeof(float)));
      return;
    }
  }
  // The product alone, then scaled and added in a pass of its own.
  float *product = accumulate ? tmp : c;
  int64_t ldp = accumulate ? n : ldc;
  gemmBF16(1, transA, transB, m, n, k, a, lda, strideA, b, ldb, strideB,
           product, /*cIsBF16=*/false, ldp, m * ldp);
  for (int64_t r = 0; r < m; ++r) {
    float *cRow = c + r * ldc;
    const float *pRow = product + r * ldp;
    if (!accumulate) {
      if (alpha != 1.0f) {
#pragma omp simd
        for (int64_t j = 0; j < n; ++j)
          cRow[j] *= alpha;
      }
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      cRow[j] += alpha * pRow[j];
  }
}

std::string gemmBF16Implementation(int64_t batch, bool transA, bool transB,
                                   int64_t m, int64_t n, int64_t k, int64_t lda,
                                   int64_t strideA, int64_t ldb,
                                   int64_t strideB, bool cIsBF16, int64_t ldc,
                                   int64_t strideC) {
  if (!bf16ProductPath().native)
    return "";
  const Matmul *matmul =
      matmulFor(matmulKey(batch, transA, transB, m, n, k, lda, strideA, ldb,
                          strideB, cIsBF16, ldc, strideC));
  return matmul ? matmul->desc.impl_info_str() : "";
}

} // namespace sd::rt::kernels
