//===- Kernels.h - The runtime's compute kernels ----------------*- C++ -*-===//
//
// The non-fused kernels of ProgramABI.h's SdApi, in f32 on the calling
// thread's OpenMP team. Each is deterministic for a given team size (static
// schedules, no atomics, fixed summation order). Semantics follow the sd op
// of the same name; sd/Reference's double-precision kernels are the oracle of
// their tests.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_KERNELS_H
#define SD_RUNTIME_KERNELS_H

#include "sd/Runtime/ProgramABI.h"
#include "sd/Runtime/VectorPath.h"

#include <cstdint>
#include <string>

namespace sd::rt::kernels {

/// See SdApi::gemm (oneDNN's or OpenBLAS's sgemm by the product's form:
/// KernelsGemm.cpp).
void gemm(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, const float *a, int64_t lda, int64_t strideA,
          const float *b, int64_t ldb, int64_t strideB, float beta, float *c,
          int64_t ldc, int64_t strideC);
/// See SdApi::gemm_bf16 (oneDNN's matmul primitive on bf16 operands,
/// accumulating in f32; `cIsBF16` rounds C to bf16 once).
void gemmBF16(int64_t batch, bool transA, bool transB, int64_t m, int64_t n,
              int64_t k, const sd_bf16 *a, int64_t lda, int64_t strideA,
              const sd_bf16 *b, int64_t ldb, int64_t strideB, void *c,
              bool cIsBF16, int64_t ldc, int64_t strideC);
/// How gemmBF16 runs on this CPU: on its bf16 dot-product instructions
/// (`native`: AVX512_BF16 or AMX), or by widening to f32 first; `isa` is
/// oneDNN's effective instruction set ("avx512_core_bf16", "avx2", ...).
struct BF16ProductPath {
  bool native;
  const char *isa;
};
BF16ProductPath bf16ProductPath();
/// The oneDNN implementation (e.g. "brg:avx512_core_bf16") of the matmul a
/// gemmBF16 call with these sizes and strides runs; empty where the call
/// widens to the f32 GEMMs instead (no bf16 units, or oneDNN refuses it).
std::string gemmBF16Implementation(int64_t batch, bool transA, bool transB,
                                   int64_t m, int64_t n, int64_t k, int64_t lda,
                                   int64_t strideA, int64_t ldb,
                                   int64_t strideB, bool cIsBF16, int64_t ldc,
                                   int64_t strideC);
/// Whether f32 Aᵀ·B products go to oneDNN rather than OpenBLAS: on CPUs with
/// AMX, and on CPUs with AVX-512 where OpenBLAS runs narrower kernels (its
/// core held to an AVX2 one, as OPENBLAS_CORETYPE=Haswell does); decided
/// once per process (KernelsGemm.cpp says why).
bool oneDnnForTransposedA();

/// See SdApi::transpose: elements of `elementBytes` (4 or 2) are moved.
void transpose(const void *in, void *out, int32_t rank, const int64_t *inShape,
               const int64_t *perm, int32_t elementBytes = 4);
void softmax(const float *in, float *out, int32_t rank, const int64_t *shape,
             int32_t dim);
void layerNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t rows, int64_t cols, double epsilon);
void rmsNorm(const float *in, const float *scale, float *out, int64_t rows,
             int64_t cols, double epsilon);
/// softmax, layerNorm and rmsNorm on bf16 tensors (see SdApi::softmax_bf16):
/// bitwise the f32 kernels' results on the widened operands, rounded.
void softmaxBF16(const sd_bf16 *in, sd_bf16 *out, int32_t rank,
                 const int64_t *shape, int32_t dim);
void layerNormBF16(const sd_bf16 *in, const sd_bf16 *scale, const sd_bf16 *bias,
                   sd_bf16 *out, int64_t rows, int64_t cols, double epsilon);
void rmsNormBF16(const sd_bf16 *in, const sd_bf16 *scale, sd_bf16 *out,
                 int64_t rows, int64_t cols, double epsilon);
void groupNorm(const float *in, const float *scale, const float *bias,
               float *out, int64_t n, int64_t spatial, int64_t channels,
               int64_t groups, double epsilon);
/// SdApi::group_norm_bf16: bitwise groupNorm between converts.
void groupNormBF16(const sd_bf16 *in, const sd_bf16 *scale, const sd_bf16 *bias,
                   sd_bf16 *out, int64_t n, int64_t spatial, int64_t channels,
                   int64_t groups, double epsilon);
/// Scratch for one head's scores per thread (with bf16 operands, also its
/// probabilities in bf16 and its f32 output rows) comes from `scratch`, a
/// caller buffer of at least attentionScratchFloats(...) floats for the
/// operands' `element` type and the team the kernel will run on.
int64_t attentionScratchFloats(int64_t sq, int64_t skv, int64_t dv, int threads,
                               SdElementType element = SD_F32);
void attention(const float *q, const float *k, const float *v,
               const float *mask, int64_t maskB, int64_t maskH, float *out,
               int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
               int64_t dv, double scale, float *scratch);
/// SdApi::attention_bf16: bf16 products with f32 sums, P rounded to bf16.
void attention(const sd_bf16 *q, const sd_bf16 *k, const sd_bf16 *v,
               const float *mask, int64_t maskB, int64_t maskH, sd_bf16 *out,
               int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
               int64_t dv, double scale, float *scratch);
/// FlashAttention-2 (see SdApi::flash_attention and
/// SdApi::flash_attention_backward; `dqOut`, `dkOut`, `dvOut` are the
/// gradients d_q, d_k, d_v), on f32 or bf16 operands (see
/// flash_attention_bf16: bf16 tile products, f32 softmax statistics and
/// accumulators). The tiles of each thread, and for the backward the row
/// terms Di and the fused dQ partials, come from `scratch`, a caller buffer
/// of at least the matching ...ScratchFloats(...) floats for the operands'
/// `element` type, where `threads` is the team the kernel will run on
/// (omp_get_max_threads() outside a parallel region; the size also covers a
/// call from inside one).
int64_t flashAttentionScratchFloats(int64_t b, int64_t h, int64_t sq,
                                    int64_t skv, int64_t d, int64_t dv,
                                    const SdFlashBlocks &blocks, int threads,
                                    SdElementType element = SD_F32);
void flashAttention(const float *q, const float *k, const float *v,
                    const float *mask, int64_t maskB, int64_t maskH, float *out,
                    float *lse, int64_t b, int64_t h, int64_t sq, int64_t skv,
                    int64_t d, int64_t dv, double scale,
                    const SdFlashBlocks &blocks, float *scratch);
void flashAttention(const sd_bf16 *q, const sd_bf16 *k, const sd_bf16 *v,
                    const float *mask, int64_t maskB, int64_t maskH,
                    sd_bf16 *out, float *lse, int64_t b, int64_t h, int64_t sq,
                    int64_t skv, int64_t d, int64_t dv, double scale,
                    const SdFlashBlocks &blocks, float *scratch);
int64_t flashAttentionBackwardScratchFloats(int64_t b, int64_t h, int64_t sq,
                                            int64_t skv, int64_t d, int64_t dv,
                                            const SdFlashBlocks &blocks,
                                            int threads,
                                            SdElementType element = SD_F32);
void flashAttentionBackward(const float *q, const float *k, const float *v,
                            const float *mask, int64_t maskB, int64_t maskH,
                            const float *out, const float *lse,
                            const float *dOut, float *dqOut, float *dkOut,
                            float *dvOut, int64_t b, int64_t h, int64_t sq,
                            int64_t skv, int64_t d, int64_t dv, double scale,
                            const SdFlashBlocks &blocks, float *scratch);
void flashAttentionBackward(const sd_bf16 *q, const sd_bf16 *k,
                            const sd_bf16 *v, const float *mask, int64_t maskB,
                            int64_t maskH, const sd_bf16 *out, const float *lse,
                            const sd_bf16 *dOut, sd_bf16 *dqOut, sd_bf16 *dkOut,
                            sd_bf16 *dvOut, int64_t b, int64_t h, int64_t sq,
                            int64_t skv, int64_t d, int64_t dv, double scale,
                            const SdFlashBlocks &blocks, float *scratch);
/// out = x + scale * y over `n` floats, the device's threads splitting
/// them: one pass as a fused elementwise loop of a device program makes
/// (sdrun --calibrate times it as the bandwidth of such loops).
void addScaled(const float *x, const float *y, float scale, float *out,
               int64_t n);
void rng(bool normal, uint64_t seed, float *out, int32_t rank,
         const int64_t *shape, const int64_t *globalShape,
         const int64_t *offsets, double a, double b);
/// sd.conv2d (SdApi::conv2d) and its gradients (SdApi::conv2d_input_grad,
/// conv2d_filter_grad): the shapes are the forward's (input, kernel,
/// result); `scratch` holds conv2dScratchFloats (ConvScratch.h) of the
/// forward's shapes for the pass and the operands' element type.
void conv2d(const float *in, const float *kernel, const float *bias, float *out,
            const int64_t *inShape, const int64_t *kernelShape,
            const int64_t *outShape, const int64_t *strides,
            const int64_t *padding, int64_t groups, float *scratch);
void conv2dInputGrad(const float *dy, const float *kernel, float *dx,
                     const int64_t *inShape, const int64_t *kernelShape,
                     const int64_t *outShape, const int64_t *strides,
                     const int64_t *padding, int64_t groups, float *scratch);
void conv2dFilterGrad(const float *in, const float *dy, float *dkernel,
                      const int64_t *inShape, const int64_t *kernelShape,
                      const int64_t *outShape, const int64_t *strides,
                      const int64_t *padding, int64_t groups, float *scratch);
/// The three on bf16 operands (SdApi::conv2d_bf16 and its gradients): bf16
/// products with f32 sums, each result rounded once after what the f32
/// kernels add to it; the filter gradient into an f32 or (`dkernelIsBF16`)
/// bf16 `dkernel`.
void conv2d(const sd_bf16 *in, const sd_bf16 *kernel, const sd_bf16 *bias,
            sd_bf16 *out, const int64_t *inShape, const int64_t *kernelShape,
            const int64_t *outShape, const int64_t *strides,
            const int64_t *padding, int64_t groups, float *scratch);
void conv2dInputGrad(const sd_bf16 *dy, const sd_bf16 *kernel, sd_bf16 *dx,
                     const int64_t *inShape, const int64_t *kernelShape,
                     const int64_t *outShape, const int64_t *strides,
                     const int64_t *padding, int64_t groups, float *scratch);
void conv2dFilterGrad(const sd_bf16 *in, const sd_bf16 *dy, void *dkernel,
                      bool dkernelIsBF16, const int64_t *inShape,
                      const int64_t *kernelShape, const int64_t *outShape,
                      const int64_t *strides, const int64_t *padding,
                      int64_t groups, float *scratch);

/// The vector paths of the softmax and attention kernels' exponentials.
using ::sd::rt::hasVectorPath;
using ::sd::rt::VectorPath;

/// row[i] = exp(row[i] - shift) for i < n, as softmax and (flash) attention
/// compute their probabilities; returns the sum of the results, kept in
/// sixteen float lanes (element i in lane i % 16, in order) and added in
/// double in lane order. With `low`, each result is also rounded to bf16
/// there (as the bf16 attention kernels' products read P). Every vector
/// path gives the same bits; `path` forces one (which the CPU must have),
/// for the tests that check so.
double expShiftedRow(float *row, int64_t n, float shift, sd_bf16 *low = nullptr,
                     VectorPath path = VectorPath::Best);
/// ds[i] = p[i]·(ds[i] - di) for i < n, each also rounded to bf16 into
/// low[i]: the bf16 flash backward's score gradients. Every path gives the
/// same bits.
void scoreGradsRow(const float *p, float *ds, float di, int64_t n, sd_bf16 *low,
                   VectorPath path = VectorPath::Best);

} // namespace sd::rt::kernels

#endif // SD_RUNTIME_KERNELS_H
