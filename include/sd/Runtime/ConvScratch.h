//===- ConvScratch.h - The scratch a convolution kernel borrows -*- C++ -*-===//
//
// The convolution kernels (lib/Runtime/KernelsConv.cpp) borrow their im2col
// rows, and on bf16 operands their f32 products and accumulators, from the
// device pool; the memory model (lib/Analysis/CostModels.cpp, ConvCost)
// counts the same bytes at the op. Both call conv2dScratchFloats below, so
// the two cannot drift apart. Header-only: the compiler's analyses do not
// link the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_CONVSCRATCH_H
#define SD_RUNTIME_CONVSCRATCH_H

#include <algorithm>
#include <cstdint>

namespace sd::rt {

/// Which of a convolution's three kernels: sd.conv2d, sd.conv2d_input_grad,
/// sd.conv2d_filter_grad.
enum class ConvPass { Forward, InputGrad, FilterGrad };

/// The im2col rows of several samples go to one GEMM, so that the deep,
/// small levels of a UNet (16 or 64 pixels a sample) make GEMMs of useful
/// height: as many samples as fit in this many elements, at least one.
inline constexpr int64_t kConvChunkElements = int64_t{1} << 22;

/// Samples per GEMM for `n` samples of `rowElements` im2col elements each.
inline int64_t convSamplesPerGemm(int64_t n, int64_t rowElements) {
  int64_t most = std::max<int64_t>(n, 1);
  if (rowElements == 0)
    return most;
  return std::clamp<int64_t>(kConvChunkElements / rowElements, 1, most);
}

/// A 1×1, stride-1, unpadded, ungrouped convolution is a plain GEMM over
/// every pixel: no im2col rows.
inline bool isPointwiseConv(const int64_t *kernelShape, const int64_t *strides,
                            const int64_t *padding, int64_t groups) {
  return kernelShape[0] == 1 && kernelShape[1] == 1 && strides[0] == 1 &&
         strides[1] == 1 && padding[0] == 0 && padding[1] == 0 &&
         padding[2] == 0 && padding[3] == 0 && groups == 1;
}

/// Scratch regions start on 64-byte boundaries (16 floats).
inline int64_t convScratchAlign(int64_t floats) {
  return (floats + 15) / 16 * 16;
}

/// The floats `elements` bf16 im2col elements take, two to a float,
/// aligned: where a bf16 kernel's f32 scratch starts after its rows.
inline int64_t convBF16RowFloats(int64_t elements) {
  return convScratchAlign((elements + 1) / 2);
}

/// The floats of scratch `pass` borrows for the convolution of these shapes
/// (input [N, H, W, Cin], kernel [KH, KW, Cin/G, Cout], result [N, Ho, Wo,
/// Cout]), on f32 operands or (`bf16`) bf16 ones:
/// - f32: one group's im2col rows of a chunk of samples (none pointwise);
///   the input gradient's rows are their cotangents.
/// - bf16 forward: the rows in bf16 (none pointwise), then the chunk's f32
///   products of one group, which take the bias before they are rounded.
/// - bf16 input gradient: nothing pointwise (one GEMM rounds once);
///   otherwise the rows' f32 cotangents, then an f32 image of the chunk's
///   samples that col2im sums into before it is rounded.
/// - bf16 filter gradient: nothing pointwise; otherwise the rows in bf16,
///   one group's f32 partial sum of a chunk, and the f32 sum over chunks.
inline int64_t conv2dScratchFloats(ConvPass pass, const int64_t *inShape,
                                   const int64_t *kernelShape,
                                   const int64_t *outShape,
                                   const int64_t *strides,
                                   const int64_t *padding, int64_t groups,
                                   bool bf16) {
  bool pointwise = isPointwiseConv(kernelShape, strides, padding, groups);
  int64_t positions = outShape[1] * outShape[2];
  int64_t depth = kernelShape[0] * kernelShape[1] * kernelShape[2];
  int64_t chunk = convSamplesPerGemm(outShape[0], positions * depth);
  int64_t rows = chunk * positions * depth;
  int64_t coutG = groups > 0 ? kernelShape[3] / groups : 0;
  if (!bf16)
    return pointwise ? 0 : rows;
  // bf16 rows, two to a float.
  int64_t bf16Rows = pointwise ? 0 : convBF16RowFloats(rows);
  switch (pass) {
  case ConvPass::Forward:
    return bf16Rows + chunk * positions * coutG;
  case ConvPass::InputGrad:
    return pointwise ? 0
                     : convScratchAlign(rows) +
                           chunk * inShape[1] * inShape[2] * inShape[3];
  case ConvPass::FilterGrad:
    return pointwise ? 0
                     : bf16Rows + convScratchAlign(depth * coutG) +
                           depth * kernelShape[3];
  }
  return 0;
}

} // namespace sd::rt

#endif // SD_RUNTIME_CONVSCRATCH_H
