//===- KernelsConv.cpp - Convolution and its two gradients ----------------===//
//
// sd.conv2d, sd.conv2d_input_grad and sd.conv2d_filter_grad as GEMMs over
// im2col rows: each sample's and group's receptive fields, [Ho·Wo,
// KH·KW·Cin/G] in HWI order (the HWIO kernel's row order), several samples'
// to a GEMM, in scratch the caller borrows from the device pool
// (conv2dScratchFloats). The forward
// multiplies the rows by the kernel, the filter gradient contracts them with
// dy, and the input gradient makes them from dy·wᵀ and adds them back into
// the pixels they read (col2im, parallel over input rows, so each pixel is
// summed by one thread in a fixed order).
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Kernels.h"

#include <algorithm>
#include <cstring>

namespace sd::rt::kernels {

/// The im2col rows of several samples go to one GEMM, so that the deep,
/// small levels of a UNet (16 or 64 pixels a sample) make GEMMs of useful
/// height: as many samples as fit in this many floats, at least one. (The
/// memory model's ConvCost repeats the rule.)
static constexpr int64_t kChunkFloats = int64_t{1} << 22;

/// Samples per GEMM for `n` samples of `rowFloats` im2col floats each.
static int64_t samplesPerGemm(int64_t n, int64_t rowFloats) {
  int64_t most = std::max<int64_t>(n, 1);
  if (rowFloats == 0)
    return most;
  return std::clamp<int64_t>(kChunkFloats / rowFloats, 1, most);
}

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

  /// Calls `fn(first, count)` for each chunk of samples one GEMM takes.
  template <typename Fn> void forEachChunk(Fn fn) const {
    int64_t chunk = samplesPerGemm(n, positions() * depth());
    for (int64_t first = 0; first < n; first += chunk)
      fn(first, std::min(chunk, n - first));
  }

  /// Writes group `g`'s im2col rows of samples [first, first + count) of
  /// `in` into `cols`, one sample after another.
  void im2colSamples(const float *in, int64_t first, int64_t count, int64_t g,
                     float *cols) const {
    for (int64_t i = 0; i < count; ++i)
      im2col(in + (first + i) * h * w * cin, g,
             cols + i * positions() * depth());
  }

  /// Writes group `g`'s im2col rows of sample `x` into `cols`.
  void im2col(const float *x, int64_t g, float *cols) const {
    int64_t rowSize = depth();
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < positions(); ++p) {
      int64_t oy = p / wo, ox = p % wo;
      float *row = cols + p * rowSize;
      for (int64_t ky = 0; ky < kh; ++ky) {
        int64_t iy = oy * sh - top + ky;
        for (int64_t kx = 0; kx < kw; ++kx) {
          int64_t ix = ox * sw - left + kx;
          float *dst = row + (ky * kw + kx) * cinG;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w)
            std::fill(dst, dst + cinG, 0.0f);
          else
            std::memcpy(dst, x + (iy * w + ix) * cin + g * cinG,
                        static_cast<size_t>(cinG) * sizeof(float));
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

/// A 1×1, stride-1, unpadded, ungrouped convolution is a plain GEMM.
static bool isPointwise(const int64_t *kernelShape, const int64_t *strides,
                        const int64_t *padding, int64_t groups) {
  return kernelShape[0] == 1 && kernelShape[1] == 1 && strides[0] == 1 &&
         strides[1] == 1 && padding[0] == 0 && padding[1] == 0 &&
         padding[2] == 0 && padding[3] == 0 && groups == 1;
}

int64_t conv2dScratchFloats(const int64_t *kernelShape, const int64_t *outShape,
                            const int64_t *strides, const int64_t *padding,
                            int64_t groups) {
  if (isPointwise(kernelShape, strides, padding, groups))
    return 0;
  int64_t rows = outShape[1] * outShape[2] * kernelShape[0] * kernelShape[1] *
                 kernelShape[2];
  return samplesPerGemm(outShape[0], rows) * rows;
}

void conv2d(const float *in, const float *kernel, const float *bias, float *out,
            const int64_t *inShape, const int64_t *kernelShape,
            const int64_t *outShape, const int64_t *strides,
            const int64_t *padding, int64_t groups, float *scratch) {
  Geometry c(inShape, kernelShape, outShape, strides, padding, groups);
  int64_t positions = c.positions(), coutG = c.coutG(), depth = c.depth();
  if (c.n * positions * c.cout == 0)
    return;
  if (isPointwise(kernelShape, strides, padding, groups)) {
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
  if (isPointwise(kernelShape, strides, padding, groups)) {
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
  if (isPointwise(kernelShape, strides, padding, groups)) {
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

} // namespace sd::rt::kernels
