//===- KernelsConv.cpp - Convolution and its two gradients ----------------===//
//
// sd.conv2d, sd.conv2d_input_grad and sd.conv2d_filter_grad as GEMMs over
// im2col rows: each sample's and group's receptive fields, [Ho·Wo,
// KH·KW·Cin/G] in HWI order (the HWIO kernel's row order), several samples'
// to a GEMM, in scratch the caller borrows from the device pool
// (ConvScratch.h). The forward multiplies the rows by the kernel, the filter
// gradient contracts them with dy, and the input gradient makes them from
// dy·wᵀ and adds them back into the pixels they read (col2im, parallel over
// input rows, so each pixel is summed by one thread in a fixed order).
//
// On bf16 operands the rows are bf16 and the GEMMs run on the CPU's bf16
// units (gemmBF16) with f32 sums; everything the f32 kernels add after a
// product (the bias, col2im's taps, the filter gradient's chunks) is added
// to f32 values, and each result is rounded to bf16 once: the f32 kernels'
// numbers between converts, up to the order of the sums.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include "KernelsDetail.h"

#include "sd/Runtime/ConvScratch.h"

#include <algorithm>
#include <cstring>

namespace sd::rt::kernels {

namespace {
/// A convolution's sizes, from the runtime's shape arrays.
struct Geometry {
  int64_t n, h, w, cin, kh, kw, cinG, cout, ho, wo, groups;
  int64_t sh, sw, top, left;
  Geometry(const int64_t *inShape, const int64_t *kernelShape,
           const int64_t *outShape, const int64_t *strides,
           const int64_t *padding, int64_t groups)
      : n(inShape[0]), h(inShape[1]), w(inShape[2]), cin(inShape[3]),
        kh(kernelShape[0]), kw(kernelShape[1]), cinG(kernelShape[2]),
        cout(kernelShape[3]), ho(outShape[1]), wo(outShape[2]), groups(groups),
        sh(strides[0]), sw(strides[1]), top(padding[0]), left(padding[2]) {}
  int64_t positions() const { return ho * wo; }
  int64_t depth() const { return kh * kw * cinG; }
  int64_t coutG() const { return cout / groups; }
  int64_t sampleIn() const { return h * w * cin; }
  /// Samples one GEMM takes (ConvScratch.h).
  int64_t chunkSamples() const {
    return convSamplesPerGemm(n, positions() * depth());
  }

  /// Calls `fn(first, count)` for each chunk of samples one GEMM takes.
  template <typename Fn> void forEachChunk(Fn fn) const {
    int64_t chunk = chunkSamples();
    for (int64_t first = 0; first < n; first += chunk)
      fn(first, std::min(chunk, n - first));
  }

  /// Writes group `g`'s im2col rows of samples [first, first + count) of
  /// `in` into `cols`, one sample after another.
  template <typename Elem>
  void im2colSamples(const Elem *in, int64_t first, int64_t count, int64_t g,
                     Elem *cols) const {
    for (int64_t i = 0; i < count; ++i)
      im2col(in + (first + i) * h * w * cin, g,
             cols + i * positions() * depth());
  }

  /// Writes group `g`'s im2col rows of sample `x` into `cols`.
  template <typename Elem>
  void im2col(const Elem *x, int64_t g, Elem *cols) const {
    int64_t rowSize = depth();
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < positions(); ++p) {
      int64_t oy = p / wo, ox = p % wo;
      Elem *row = cols + p * rowSize;
      for (int64_t ky = 0; ky < kh; ++ky) {
        int64_t iy = oy * sh - top + ky;
        for (int64_t kx = 0; kx < kw; ++kx) {
          int64_t ix = ox * sw - left + kx;
          Elem *dst = row + (ky * kw + kx) * cinG;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w)
            std::fill(dst, dst + cinG, Elem{});
          else
            std::memcpy(dst, x + (iy * w + ix) * cin + g * cinG,
                        static_cast<size_t>(cinG) * sizeof(Elem));
        }
      }
    }
  }

  /// Adds group `g`'s im2col rows `cols` into the pixels of sample `dx`
  /// they were read from: each input pixel gathers the taps that read it.
  void col2im(const float *cols, int64_t g, float *dx) const {
    int64_t rowSize = depth();
#pragma omp parallel for schedule(static)
    for (int64_t iy = 0; iy < h; ++iy) {
      for (int64_t ix = 0; ix < w; ++ix) {
        float *dst = dx + (iy * w + ix) * cin + g * cinG;
        for (int64_t ky = 0; ky < kh; ++ky) {
          int64_t ty = iy + top - ky;
          if (ty < 0 || ty % sh != 0 || ty / sh >= ho)
            continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            int64_t tx = ix + left - kx;
            if (tx < 0 || tx % sw != 0 || tx / sw >= wo)
              continue;
            const float *src = cols + ((ty / sh) * wo + tx / sw) * rowSize +
                               (ky * kw + kx) * cinG;
            for (int64_t c = 0; c < cinG; ++c)
              dst[c] += src[c];
          }
        }
      }
    }
  }
};
} // namespace

void conv2d(const float *in, const float *kernel, const float *bias, float *out,
            const int64_t *inShape, const int64_t *kernelShape,
            const int64_t *outShape, const int64_t *strides,
            const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  if (c.n * positions * c.cout == 0)
    return;
  if (isPointwiseConv(kernelShape, strides, padding, groups)) {
    // y [N·H·W, Cout] = x [N·H·W, Cin] · w.
    gemm(1, false, false, c.n * positions, c.cout, c.cin, in, c.cin, 0, kernel,
         c.cout, 0, 0.0f, out, c.cout, 0);
  } else {
    c.forEachChunk([&](int64_t first, int64_t count) {
      for (int64_t g = 0; g < groups; ++g) {
        c.im2colSamples(in, first, count, g, scratch);
        gemm(1, false, false, count * positions, coutG, depth, scratch, depth,
             0, kernel + g * coutG, c.cout, 0, 0.0f,
             out + first * positions * c.cout + g * coutG, c.cout, 0);
      }
    });
  }
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < c.n * positions; ++p)
      for (int64_t o = 0; o < c.cout; ++o)
        out[p * c.cout + o] += bias[o];
  }
}

void conv2dInputGrad(const float *dy, const float *kernel, float *dx,
                     const int64_t *inShape, const int64_t *kernelShape,
                     const int64_t *outShape, const int64_t *strides,
                     const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  int64_t sampleIn = c.h * c.w * c.cin;
  if (isPointwiseConv(kernelShape, strides, padding, groups)) {
    // dx [N·H·W, Cin] = dy [N·H·W, Cout] · wᵀ.
    gemm(1, false, true, c.n * positions, c.cin, c.cout, dy, c.cout, 0, kernel,
         c.cout, 0, 0.0f, dx, c.cin, 0);
    return;
  }
  std::fill(dx, dx + c.n * sampleIn, 0.0f);
  if (positions * c.cout == 0)
    return;
  c.forEachChunk([&](int64_t first, int64_t count) {
    for (int64_t g = 0; g < groups; ++g) {
      // The im2col rows' cotangent: dy's group columns times the group's
      // kernel columns, transposed.
      gemm(1, false, true, count * positions, depth, coutG,
           dy + first * positions * c.cout + g * coutG, c.cout, 0,
           kernel + g * coutG, c.cout, 0, 0.0f, scratch, depth, 0);
      for (int64_t i = 0; i < count; ++i)
        c.col2im(scratch + i * positions * depth, g,
                 dx + (first + i) * sampleIn);
    }
  });
}

void conv2dFilterGrad(const float *in, const float *dy, float *dkernel,
                      const int64_t *inShape, const int64_t *kernelShape,
                      const int64_t *outShape, const int64_t *strides,
                      const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  if (c.n * positions == 0) {
    std::fill(dkernel, dkernel + depth * c.cout, 0.0f);
    return;
  }
  if (isPointwiseConv(kernelShape, strides, padding, groups)) {
    // dw [Cin, Cout] = xᵀ [Cin, N·H·W] · dy [N·H·W, Cout].
    gemm(1, true, false, c.cin, c.cout, c.n * positions, in, c.cin, 0, dy,
         c.cout, 0, 0.0f, dkernel, c.cout, 0);
    return;
  }
  std::fill(dkernel, dkernel + depth * c.cout, 0.0f);
  c.forEachChunk([&](int64_t first, int64_t count) {
    for (int64_t g = 0; g < groups; ++g) {
      c.im2colSamples(in, first, count, g, scratch);
      gemm(1, true, false, depth, coutG, count * positions, scratch, depth, 0,
           dy + first * positions * c.cout + g * coutG, c.cout, 0, 1.0f,
           dkernel + g * coutG, c.cout, 0);
    }
  });
}

//===----------------------------------------------------------------------===//
// bf16 operands
//===----------------------------------------------------------------------===//

/// `count` f32 values rounded to bf16, the team splitting them.
static void narrowInParallel(const float *in, sd_bf16 *out, int64_t count) {
  constexpr int64_t kBlock = 4096;
#pragma omp parallel for schedule(static)
  for (int64_t first = 0; first < count; first += kBlock)
    detail::narrow(in + first, out + first, std::min(kBlock, count - first));
}

void conv2d(const sd_bf16 *in, const sd_bf16 *kernel, const sd_bf16 *bias,
            sd_bf16 *out, const int64_t *inShape, const int64_t *kernelShape,
            const int64_t *outShape, const int64_t *strides,
            const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  if (c.n * positions * c.cout == 0)
    return;
  bool pointwise = isPointwiseConv(kernelShape, strides, padding, groups);
  // The chunk's bf16 rows, then one group's f32 products (ConvScratch.h).
  auto *cols = reinterpret_cast<sd_bf16 *>(scratch);
  float *product =
      scratch +
      (pointwise ? 0 : convBF16RowFloats(c.chunkSamples() * positions * depth));
  c.forEachChunk([&](int64_t first, int64_t count) {
    int64_t rows = count * positions;
    for (int64_t g = 0; g < groups; ++g) {
      const sd_bf16 *a = in + first * positions * c.cin;
      if (!pointwise) {
        c.im2colSamples(in, first, count, g, cols);
        a = cols;
      }
      gemmBF16(1, false, false, rows, coutG, depth, a, depth, 0,
               kernel + g * coutG, c.cout, 0, product, /*cIsBF16=*/false, coutG,
               0);
      // The bias joins the f32 sums; each output is rounded once.
      sd_bf16 *into = out + first * positions * c.cout + g * coutG;
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < rows; ++p) {
        float *row = product + p * coutG;
        if (bias)
          for (int64_t o = 0; o < coutG; ++o)
            row[o] += toFloat(BFloat16{bias[g * coutG + o].bits});
        detail::narrow(row, into + p * c.cout, coutG);
      }
    }
  });
}

void conv2dInputGrad(const sd_bf16 *dy, const sd_bf16 *kernel, sd_bf16 *dx,
                     const int64_t *inShape, const int64_t *kernelShape,
                     const int64_t *outShape, const int64_t *strides,
                     const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  int64_t sampleIn = c.sampleIn();
  if (isPointwiseConv(kernelShape, strides, padding, groups)) {
    // dx [N·H·W, Cin] = dy [N·H·W, Cout] · wᵀ, rounded once.
    gemmBF16(1, false, true, c.n * positions, c.cin, c.cout, dy, c.cout, 0,
             kernel, c.cout, 0, dx, /*cIsBF16=*/true, c.cin, 0);
    return;
  }
  if (positions * c.cout == 0) {
    std::fill(dx, dx + c.n * sampleIn, sd_bf16{0});
    return;
  }
  // The rows' f32 cotangents, then the chunk's f32 image (ConvScratch.h).
  float *cols = scratch;
  float *image =
      scratch + convScratchAlign(c.chunkSamples() * positions * depth);
  c.forEachChunk([&](int64_t first, int64_t count) {
    std::fill(image, image + count * sampleIn, 0.0f);
    for (int64_t g = 0; g < groups; ++g) {
      gemmBF16(1, false, true, count * positions, depth, coutG,
               dy + first * positions * c.cout + g * coutG, c.cout, 0,
               kernel + g * coutG, c.cout, 0, cols, /*cIsBF16=*/false, depth,
               0);
      for (int64_t i = 0; i < count; ++i)
        c.col2im(cols + i * positions * depth, g, image + i * sampleIn);
    }
    narrowInParallel(image, dx + first * sampleIn, count * sampleIn);
  });
}

void conv2dFilterGrad(const sd_bf16 *in, const sd_bf16 *dy, void *dkernel,
                      bool dkernelIsBF16, const int64_t *inShape,
                      const int64_t *kernelShape, const int64_t *outShape,
                      const int64_t *strides, const int64_t *padding,
                      int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  int64_t size = depth * c.cout;
  if (c.n * positions == 0) {
    if (dkernelIsBF16)
      std::fill_n(static_cast<sd_bf16 *>(dkernel), size, sd_bf16{0});
    else
      std::fill_n(static_cast<float *>(dkernel), size, 0.0f);
    return;
  }
  if (isPointwiseConv(kernelShape, strides, padding, groups)) {
    // dw [Cin, Cout] = xᵀ [Cin, N·H·W] · dy [N·H·W, Cout].
    gemmBF16(1, true, false, c.cin, c.cout, c.n * positions, in, c.cin, 0, dy,
             c.cout, 0, dkernel, dkernelIsBF16, c.cout, 0);
    return;
  }
  // The chunk's bf16 rows, one group's partial sum and the sum over chunks,
  // both f32 (ConvScratch.h).
  auto *cols = reinterpret_cast<sd_bf16 *>(scratch);
  float *partial =
      scratch + convBF16RowFloats(c.chunkSamples() * positions * depth);
  float *sum = partial + convScratchAlign(depth * coutG);
  c.forEachChunk([&](int64_t first, int64_t count) {
    for (int64_t g = 0; g < groups; ++g) {
      c.im2colSamples(in, first, count, g, cols);
      // The first chunk writes the sum; later ones add their partials.
      bool firstChunk = first == 0;
      gemmBF16(1, true, false, depth, coutG, count * positions, cols, depth, 0,
               dy + first * positions * c.cout + g * coutG, c.cout, 0,
               firstChunk ? sum + g * coutG : partial, /*cIsBF16=*/false,
               firstChunk ? c.cout : coutG, 0);
      if (firstChunk)
        continue;
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < depth; ++r)
        for (int64_t o = 0; o < coutG; ++o)
          sum[r * c.cout + g * coutG + o] += partial[r * coutG + o];
    }
  });
  if (dkernelIsBF16)
    narrowInParallel(sum, static_cast<sd_bf16 *>(dkernel), size);
  else
    std::memcpy(dkernel, sum, static_cast<size_t>(size) * sizeof(float));
}

} // namespace sd::rt::kernels
