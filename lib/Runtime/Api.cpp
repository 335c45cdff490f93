//===- Api.cpp - The function table compiled programs call ----------------===//
//
// Thin adapters from ProgramABI.h's C calls to devices, pools, the transport
// and the kernels. Every failure is recorded on the calling device (the
// program only sees a non-zero return) so that the runtime can report the
// real cause: which tensor did not fit, which collective was aborted.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/ConvScratch.h"
#include "sd/Runtime/Kernels.h"
#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_format.h"

#include <omp.h>

#include <chrono>
#include <cstring>
#include <type_traits>

using namespace sd;
using namespace sd::rt;

namespace {

Device &toDevice(SdDevice *dev) { return *reinterpret_cast<Device *>(dev); }

std::string nameOf(const char *name) { return name ? name : "<unnamed>"; }

/// The pool of `space`, or an error naming the bad space.
absl::StatusOr<MemoryPool *> poolOf(Device &device, int32_t space,
                                    const char *name) {
  if (space != SD_DEVICE_MEMORY && space != SD_HOST_MEMORY)
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d: unknown memory space %d for '%s'",
                        device.id(), space, nameOf(name)));
  return &device.pool(static_cast<SdMemorySpace>(space));
}

void *allocBuffer(SdDevice *dev, int64_t bytes, int32_t space,
                  const char *name) {
  Device &device = toDevice(dev);
  absl::StatusOr<MemoryPool *> pool = poolOf(device, space, name);
  if (!pool.ok()) {
    device.fail(pool.status());
    return nullptr;
  }
  absl::StatusOr<void *> buffer = (*pool)->allocate(bytes, nameOf(name));
  if (!buffer.ok()) {
    device.fail(buffer.status());
    return nullptr;
  }
  return *buffer;
}

void releaseBuffer(SdDevice *dev, void *buffer) {
  if (!buffer)
    return;
  Device &device = toDevice(dev);
  for (SdMemorySpace space : {SD_DEVICE_MEMORY, SD_HOST_MEMORY}) {
    MemoryPool &pool = device.pool(space);
    if (pool.owns(buffer)) {
      pool.release(buffer);
      return;
    }
  }
  device.fail(absl::InternalError(absl::StrFormat(
      "device %d: releasing a buffer that none of its pools owns",
      device.id())));
}

int32_t moveBuffer(SdDevice *dev, const void *src, int64_t bytes,
                   int32_t toSpace, void **dst, const char *name) {
  Device &device = toDevice(dev);
  absl::StatusOr<MemoryPool *> pool = poolOf(device, toSpace, name);
  if (!pool.ok())
    return device.fail(pool.status());
  absl::StatusOr<void *> buffer = (*pool)->allocate(bytes, nameOf(name));
  if (!buffer.ok())
    return device.fail(buffer.status());
  if (bytes > 0)
    std::memcpy(*buffer, src, static_cast<size_t>(bytes));
  *dst = *buffer;
  DeviceCounters &counters = device.counters();
  (toSpace == SD_HOST_MEMORY ? counters.offloadBytes : counters.reloadBytes) +=
      bytes;
  return 0;
}

int64_t axisIndex(SdDevice *dev, const int32_t *axes, int32_t numAxes) {
  Device &device = toDevice(dev);
  const std::vector<MeshAxis> &meshAxes = device.transport().mesh().axes();
  int64_t index = 0;
  for (int32_t i = 0; i < numAxes; ++i)
    index = index * meshAxes[axes[i]].size() + device.coordinates()[axes[i]];
  return index;
}

/// Runs `call` (a transport call for `op`) and adds its time to the
/// device's collective seconds of `op`'s axes.
template <typename Call>
int32_t timedCollective(Device &device, const SdCollective *op, Call call) {
  if (!op)
    return device.fail(absl::InvalidArgumentError(absl::StrFormat(
        "device %d: a collective without a descriptor", device.id())));
  auto begin = std::chrono::steady_clock::now();
  absl::Status status = call();
  device.counters().collectiveSeconds[collectiveAxisMask(*op)] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return status.ok() ? 0 : device.fail(std::move(status));
}

int32_t runCollective(SdDevice *dev, const SdCollective *op, const void *in,
                      void *out) {
  Device &device = toDevice(dev);
  return timedCollective(device, op, [&] {
    return device.transport().collective(device, *op, in, out);
  });
}

int32_t startCollective(SdDevice *dev, const SdCollective *op, const void *in,
                        void *out) {
  Device &device = toDevice(dev);
  return timedCollective(device, op, [&] {
    return device.transport().startCollective(device, *op, in, out);
  });
}

int32_t finishCollective(SdDevice *dev, const SdCollective *op, void *out) {
  Device &device = toDevice(dev);
  return timedCollective(device, op, [&] {
    return device.transport().finishCollective(device, *op, out);
  });
}

void gemm(SdDevice *, int64_t batch, int32_t transA, int32_t transB, int64_t m,
          int64_t n, int64_t k, const float *a, int64_t lda, int64_t strideA,
          const float *b, int64_t ldb, int64_t strideB, float beta, float *c,
          int64_t ldc, int64_t strideC) {
  kernels::gemm(batch, transA != 0, transB != 0, m, n, k, a, lda, strideA, b,
                ldb, strideB, beta, c, ldc, strideC);
}

void gemmBF16(SdDevice *, int64_t batch, int32_t transA, int32_t transB,
              int64_t m, int64_t n, int64_t k, const sd_bf16 *a, int64_t lda,
              int64_t strideA, const sd_bf16 *b, int64_t ldb, int64_t strideB,
              void *c, int32_t cType, int64_t ldc, int64_t strideC) {
  kernels::gemmBF16(batch, transA != 0, transB != 0, m, n, k, a, lda, strideA,
                    b, ldb, strideB, c, cType == SD_BF16, ldc, strideC);
}

void transpose(SdDevice *, const void *in, void *out, int32_t rank,
               const int64_t *inShape, const int64_t *perm,
               int32_t elementBytes) {
  kernels::transpose(in, out, rank, inShape, perm, elementBytes);
}

void softmax(SdDevice *, const float *in, float *out, int32_t rank,
             const int64_t *shape, int32_t dim) {
  kernels::softmax(in, out, rank, shape, dim);
}

void softmaxBF16(SdDevice *, const sd_bf16 *in, sd_bf16 *out, int32_t rank,
                 const int64_t *shape, int32_t dim) {
  kernels::softmaxBF16(in, out, rank, shape, dim);
}

void layerNormBF16(SdDevice *, const sd_bf16 *in, const sd_bf16 *scale,
                   const sd_bf16 *bias, sd_bf16 *out, int64_t rows,
                   int64_t cols, double epsilon) {
  kernels::layerNormBF16(in, scale, bias, out, rows, cols, epsilon);
}

void rmsNormBF16(SdDevice *, const sd_bf16 *in, const sd_bf16 *scale,
                 sd_bf16 *out, int64_t rows, int64_t cols, double epsilon) {
  kernels::rmsNormBF16(in, scale, out, rows, cols, epsilon);
}

void layerNorm(SdDevice *, const float *in, const float *scale,
               const float *bias, float *out, int64_t rows, int64_t cols,
               double epsilon) {
  kernels::layerNorm(in, scale, bias, out, rows, cols, epsilon);
}

void rmsNorm(SdDevice *, const float *in, const float *scale, float *out,
             int64_t rows, int64_t cols, double epsilon) {
  kernels::rmsNorm(in, scale, out, rows, cols, epsilon);
}

void groupNorm(SdDevice *, const float *in, const float *scale,
               const float *bias, float *out, int64_t n, int64_t spatial,
               int64_t channels, int64_t groups, double epsilon) {
  kernels::groupNorm(in, scale, bias, out, n, spatial, channels, groups,
                     epsilon);
}

void groupNormBF16(SdDevice *, const sd_bf16 *in, const sd_bf16 *scale,
                   const sd_bf16 *bias, sd_bf16 *out, int64_t n,
                   int64_t spatial, int64_t channels, int64_t groups,
                   double epsilon) {
  kernels::groupNormBF16(in, scale, bias, out, n, spatial, channels, groups,
                         epsilon);
}

/// Runs `kernel` on a scratch buffer of `floats` from the device pool named
/// `what`; fails the device when the pool cannot provide it.
template <typename Kernel>
int32_t withScratch(Device &device, int64_t floats, const char *what,
                    Kernel kernel) {
  MemoryPool &pool = device.pool(SD_DEVICE_MEMORY);
  absl::StatusOr<void *> scratch =
      pool.allocate(floats * static_cast<int64_t>(sizeof(float)), what);
  if (!scratch.ok())
    return device.fail(scratch.status());
  kernel(static_cast<float *>(*scratch));
  pool.release(*scratch);
  return 0;
}

template <typename Elem>
int32_t attention(SdDevice *dev, const Elem *q, const Elem *k, const Elem *v,
                  const float *mask, int64_t maskB, int64_t maskH, Elem *out,
                  int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
                  int64_t dv, double scale) {
  Device &device = toDevice(dev);
  // One head's scores per thread of the team the kernel will use.
  int64_t floats = kernels::attentionScratchFloats(
      sq, skv, dv, omp_get_max_threads(),
      std::is_same_v<Elem, float> ? SD_F32 : SD_BF16);
  return withScratch(device, floats, "attention scores", [&](float *s) {
    kernels::attention(q, k, v, mask, maskB, maskH, out, b, h, sq, skv, d, dv,
                       scale, s);
  });
}

template <typename Elem>
int32_t flashAttention(SdDevice *dev, const Elem *q, const Elem *k,
                       const Elem *v, const float *mask, int64_t maskB,
                       int64_t maskH, Elem *out, float *lse, int64_t b,
                       int64_t h, int64_t sq, int64_t skv, int64_t d,
                       int64_t dv, double scale, const SdFlashBlocks *blocks) {
  Device &device = toDevice(dev);
  if (!blocks)
    return device.fail(absl::InvalidArgumentError(absl::StrFormat(
        "device %d: flash_attention without block sizes", device.id())));
  // Each thread's tiles for the team the kernel will use.
  int64_t floats = kernels::flashAttentionScratchFloats(
      b, h, sq, skv, d, dv, *blocks, omp_get_max_threads(),
      std::is_same_v<Elem, float> ? SD_F32 : SD_BF16);
  return withScratch(device, floats, "flash attention tiles", [&](float *s) {
    kernels::flashAttention(q, k, v, mask, maskB, maskH, out, lse, b, h, sq,
                            skv, d, dv, scale, *blocks, s);
  });
}

template <typename Elem>
int32_t flashAttentionBackward(SdDevice *dev, const Elem *q, const Elem *k,
                               const Elem *v, const float *mask, int64_t maskB,
                               int64_t maskH, const Elem *out, const float *lse,
                               const Elem *dOut, Elem *dq, Elem *dk,
                               Elem *dvGrad, int64_t b, int64_t h, int64_t sq,
                               int64_t skv, int64_t d, int64_t dv, double scale,
                               const SdFlashBlocks *blocks) {
  Device &device = toDevice(dev);
  if (!blocks)
    return device.fail(absl::InvalidArgumentError(
        absl::StrFormat("device %d: flash_attention_backward without block "
                        "sizes",
                        device.id())));
  // Di, the fused dQ partials and each thread's tiles.
  int64_t floats = kernels::flashAttentionBackwardScratchFloats(
      b, h, sq, skv, d, dv, *blocks, omp_get_max_threads(),
      std::is_same_v<Elem, float> ? SD_F32 : SD_BF16);
  return withScratch(
      device, floats, "flash attention backward scratch", [&](float *s) {
        kernels::flashAttentionBackward(q, k, v, mask, maskB, maskH, out, lse,
                                        dOut, dq, dk, dvGrad, b, h, sq, skv, d,
                                        dv, scale, *blocks, s);
      });
}

void rng(SdDevice *, int32_t normal, uint64_t seed, float *out, int32_t rank,
         const int64_t *shape, const int64_t *globalShape,
         const int64_t *offsets, double a, double b) {
  kernels::rng(normal != 0, seed, out, rank, shape, globalShape, offsets, a, b);
}

/// Runs one of the convolution kernels (`pass`, on `Elem` operands) with
/// the scratch it borrows from the device pool, which the memory model
/// counts (CostOpInterface::getWorkspaceBytes; both from ConvScratch.h).
template <typename Elem, typename Kernel>
static int32_t
withConvScratch(SdDevice *dev, ConvPass pass, const int64_t *inShape,
                const int64_t *kernelShape, const int64_t *outShape,
                const int64_t *strides, const int64_t *padding, int64_t groups,
                const char *what, Kernel kernel) {
  int64_t floats =
      conv2dScratchFloats(pass, inShape, kernelShape, outShape, strides,
                          padding, groups, std::is_same_v<Elem, sd_bf16>);
  if (floats == 0) {
    kernel(nullptr);
    return 0;
  }
  return withScratch(toDevice(dev), floats, what, kernel);
}

template <typename Elem>
int32_t conv2d(SdDevice *dev, const Elem *in, const Elem *kernel,
               const Elem *bias, Elem *out, const int64_t *inShape,
               const int64_t *kernelShape, const int64_t *outShape,
               const int64_t *strides, const int64_t *padding, int64_t groups) {
  return withConvScratch<Elem>(
      dev, ConvPass::Forward, inShape, kernelShape, outShape, strides, padding,
      groups, "conv2d im2col rows", [&](float *cols) {
        kernels::conv2d(in, kernel, bias, out, inShape, kernelShape, outShape,
                        strides, padding, groups, cols);
      });
}

template <typename Elem>
int32_t conv2dInputGrad(SdDevice *dev, const Elem *dy, const Elem *kernel,
                        Elem *dx, const int64_t *inShape,
                        const int64_t *kernelShape, const int64_t *outShape,
                        const int64_t *strides, const int64_t *padding,
                        int64_t groups) {
  return withConvScratch<Elem>(
      dev, ConvPass::InputGrad, inShape, kernelShape, outShape, strides,
      padding, groups, "conv2d_input_grad im2col rows", [&](float *cols) {
        kernels::conv2dInputGrad(dy, kernel, dx, inShape, kernelShape, outShape,
                                 strides, padding, groups, cols);
      });
}

int32_t conv2dFilterGrad(SdDevice *dev, const float *in, const float *dy,
                         float *dkernel, const int64_t *inShape,
                         const int64_t *kernelShape, const int64_t *outShape,
                         const int64_t *strides, const int64_t *padding,
                         int64_t groups) {
  return withConvScratch<float>(
      dev, ConvPass::FilterGrad, inShape, kernelShape, outShape, strides,
      padding, groups, "conv2d_filter_grad im2col rows", [&](float *cols) {
        kernels::conv2dFilterGrad(in, dy, dkernel, inShape, kernelShape,
                                  outShape, strides, padding, groups, cols);
      });
}

int32_t conv2dFilterGradBF16(SdDevice *dev, const sd_bf16 *in,
                             const sd_bf16 *dy, void *dkernel,
                             int32_t dkernelType, const int64_t *inShape,
                             const int64_t *kernelShape,
                             const int64_t *outShape, const int64_t *strides,
                             const int64_t *padding, int64_t groups) {
  return withConvScratch<sd_bf16>(
      dev, ConvPass::FilterGrad, inShape, kernelShape, outShape, strides,
      padding, groups, "conv2d_filter_grad im2col rows", [&](float *cols) {
        kernels::conv2dFilterGrad(in, dy, dkernel, dkernelType == SD_BF16,
                                  inShape, kernelShape, outShape, strides,
                                  padding, groups, cols);
      });
}

// Programs call these around every kernel, so with tracing off they are a
// flag test each.
void traceBegin(SdDevice *dev, const char *name, const char *category,
                double flops, double bytes) {
  TraceRecorder &trace = toDevice(dev).trace();
  if (trace.enabled())
    trace.begin(name, category, flops, bytes);
}

void traceEnd(SdDevice *dev) {
  TraceRecorder &trace = toDevice(dev).trace();
  if (trace.enabled())
    trace.end();
}

} // namespace

const SdApi *MeshRuntime::api() {
  static const SdApi table = {
      /*abi_version=*/SD_ABI_VERSION,
      /*alloc=*/allocBuffer,
      /*release=*/releaseBuffer,
      /*move=*/moveBuffer,
      /*axis_index=*/axisIndex,
      /*collective=*/runCollective,
      /*collective_start=*/startCollective,
      /*collective_done=*/finishCollective,
      /*gemm=*/gemm,
      /*gemm_bf16=*/gemmBF16,
      /*transpose=*/transpose,
      /*softmax=*/softmax,
      /*layer_norm=*/layerNorm,
      /*rms_norm=*/rmsNorm,
      /*softmax_bf16=*/softmaxBF16,
      /*layer_norm_bf16=*/layerNormBF16,
      /*rms_norm_bf16=*/rmsNormBF16,
      /*group_norm=*/groupNorm,
      /*group_norm_bf16=*/groupNormBF16,
      /*attention=*/attention<float>,
      /*attention_bf16=*/attention<sd_bf16>,
      /*flash_attention=*/flashAttention<float>,
      /*flash_attention_backward=*/flashAttentionBackward<float>,
      /*flash_attention_bf16=*/flashAttention<sd_bf16>,
      /*flash_attention_backward_bf16=*/flashAttentionBackward<sd_bf16>,
      /*rng=*/rng,
      /*conv2d=*/conv2d<float>,
      /*conv2d_input_grad=*/conv2dInputGrad<float>,
      /*conv2d_filter_grad=*/conv2dFilterGrad,
      /*conv2d_bf16=*/conv2d<sd_bf16>,
      /*conv2d_input_grad_bf16=*/conv2dInputGrad<sd_bf16>,
      /*conv2d_filter_grad_bf16=*/conv2dFilterGradBF16,
      /*trace_begin=*/traceBegin,
      /*trace_end=*/traceEnd,
  };
  return &table;
}
