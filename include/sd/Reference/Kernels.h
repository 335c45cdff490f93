//===- Kernels.h - Naive reference kernels ----------------------*- C++ -*-===//
//
// Obviously-correct implementations of every op the sd dialect can express,
// used by the reference evaluator as the oracle of numerical tests. They favour
// clarity over speed: plain loops over precomputed row-major strides.
//
// Conventions shared by every kernel:
// - Inputs are assumed verified (consistent shapes, in-range dimensions);
//   preconditions are checked by debug `assert`s only, never by aborting in
//   release builds.
// - Computation is in double. Results are *not* rounded to their element type:
//   the evaluator driver does that (unless it runs in f64 mode), so one kernel
//   serves every precision mode.
// - The result's element type is the natural one: the (first) operand's for
//   arithmetic, I1 for comparisons, the requested one for constructors.
// - Shapes and dimension numbers follow StableHLO.
//
//===----------------------------------------------------------------------===//

#ifndef SD_REFERENCE_KERNELS_H
#define SD_REFERENCE_KERNELS_H

#include "sd/Reference/Tensor.h"

#include <array>
#include <cstdint>
#include <vector>

namespace sd::ref {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Elementwise functions of one operand.
enum class UnaryKind {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  /// 1 / sqrt(x).
  Rsqrt,
  Tanh,
  Sin,
  Cos,
  /// 1 / (1 + exp(-x)), evaluated without overflow for large |x|.
  Sigmoid,
  /// x * sigmoid(x).
  Silu,
  /// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as jax.nn.gelu's
  /// default (approximate=True) and torch's gelu(approximate="tanh").
  GeluTanh,
  /// 0.5 x (1 + erf(x / sqrt(2))), the exact gelu.
  GeluErf,
  /// The error function (2/sqrt(pi)) ∫_0^x e^(-t²) dt, which the exact
  /// gelu's derivative needs.
  Erf,
};

/// The scalar function behind `unary`; exposed so tests and the evaluator can
/// apply it to single values.
double applyUnary(UnaryKind kind, double x);

/// Applies `kind` to every element; the result has x's shape and dtype.
Tensor unary(UnaryKind kind, const Tensor &x);

/// Gelu, tanh approximation when `tanhApproximation`, else the exact erf form.
Tensor gelu(const Tensor &x, bool tanhApproximation);

/// Elementwise functions of two operands of equal shape.
enum class BinaryKind {
  Add,
  Sub,
  Mul,
  /// IEEE division: x/0 is +-inf, 0/0 is NaN.
  Div,
  /// NaN if either operand is NaN (as StableHLO max/min).
  Max,
  Min,
  /// std::pow semantics.
  Pow,
};

/// The scalar function behind `binary`.
double applyBinary(BinaryKind kind, double a, double b);

/// Applies `kind` elementwise; shapes must be equal. Result dtype is lhs's.
Tensor binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs);

/// Elementwise comparisons; IEEE semantics (any comparison with NaN is false
/// except NE).
enum class CompareKind { EQ, NE, LT, LE, GT, GE };

/// Compares equal-shaped operands elementwise; the result is I1 (0 or 1).
Tensor compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs);

/// onTrue where `pred` is nonzero, else onFalse. `pred` has the shape of the
/// branches or is rank 0 (StableHLO select). Result dtype is onTrue's.
Tensor select(const Tensor &pred, const Tensor &onTrue, const Tensor &onFalse);

/// Changes the element type to `dtype`. Converting to I1 maps nonzero to 1;
/// float targets keep the double values as they are, because precision
/// rounding is the driver's job (in f64 mode it must not happen at all).
Tensor convert(const Tensor &x, DType dtype);

//===----------------------------------------------------------------------===//
// Reductions and shape manipulation
//===----------------------------------------------------------------------===//

/// Reduction functions. Over an empty set: Sum 0, Max -inf, Min +inf,
/// Mean NaN.
enum class ReduceKind { Sum, Max, Min, Mean };

/// Reduces `x` over `dims` (distinct, any order). The reduced dimensions are
/// removed from the result shape, as in StableHLO's reduce; reducing every
/// dimension gives a rank-0 tensor. Max/Min propagate NaN.
Tensor reduce(ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &dims);

/// StableHLO broadcast_in_dim: operand dimension i maps to result dimension
/// broadcastDims[i] and must have the result's size there or size 1 (then it
/// is repeated). Result dimensions not named are new and repeat everything.
Tensor broadcastInDim(const Tensor &x, const std::vector<int64_t> &resultShape,
                      const std::vector<int64_t> &broadcastDims);

/// Reinterprets the row-major values under `shape` (same element count).
Tensor reshape(const Tensor &x, const std::vector<int64_t> &shape);

/// Result dimension i is operand dimension permutation[i].
Tensor transpose(const Tensor &x, const std::vector<int64_t> &permutation);

/// StableHLO slice: per dimension the elements start, start+stride, ... below
/// limit; the result size is ceil((limit - start) / stride).
Tensor slice(const Tensor &x, const std::vector<int64_t> &start,
             const std::vector<int64_t> &limit,
             const std::vector<int64_t> &strides);

/// Concatenates non-null `inputs` along `dim`; all other dimensions must
/// agree. Result dtype is the first input's.
Tensor concat(const std::vector<const Tensor *> &inputs, int64_t dim);

/// Edge padding with `value` (no interior padding). Negative amounts remove
/// elements from that edge, as in StableHLO pad.
Tensor pad(const Tensor &x, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, double value);

/// A tensor of `shape` whose value is the element's index along `dim`.
Tensor iota(const std::vector<int64_t> &shape, int64_t dim, DType dtype);

//===----------------------------------------------------------------------===//
// Linear algebra and neural-network kernels
//===----------------------------------------------------------------------===//

/// StableHLO dot_general. Batch dimensions pair up lhsBatch[i] with
/// rhsBatch[i], contracting dimensions lhsContracting[i] with
/// rhsContracting[i]. The result dimensions are: batch dimensions (in the
/// order listed), then lhs free dimensions in order, then rhs free dimensions
/// in order. Result dtype is lhs's.
Tensor dotGeneral(const Tensor &lhs, const Tensor &rhs,
                  const std::vector<int64_t> &lhsBatch,
                  const std::vector<int64_t> &rhsBatch,
                  const std::vector<int64_t> &lhsContracting,
                  const std::vector<int64_t> &rhsContracting);

/// Layer normalization over the last dimension (size C), as torch/flax:
///   y = (x - mean) / sqrt(var + eps) * scale + bias
/// with the biased variance (divided by C). `scale` and `bias` have shape [C]
/// and may be null (meaning 1 and 0).
Tensor layerNorm(const Tensor &x, const Tensor *scale, const Tensor *bias,
                 double eps);

/// RMS normalization over the last dimension (size C):
///   y = x / sqrt(mean(x^2) + eps) * scale, `scale` of shape [C] or null.
Tensor rmsNorm(const Tensor &x, const Tensor *scale, double eps);

/// Group normalization, channels last: x is [N, ..., C] (NHWC images, or
/// [N, L, C] sequences). Channels split into `groups` contiguous groups of
/// C/groups; mean and biased variance are taken per sample and group over all
/// non-batch positions of that group's channels. `scale`/`bias` are [C] or
/// null.
Tensor groupNorm(const Tensor &x, const Tensor *scale, const Tensor *bias,
                 int64_t groups, double eps);

/// Softmax along `dim`, numerically stable (the maximum is subtracted before
/// exponentiating, so large logits do not overflow).
Tensor softmax(const Tensor &x, int64_t dim);

/// Multi-head scaled dot-product attention:
///   q [B, H, Sq, D], k [B, H, Skv, D], v [B, H, Skv, Dv] -> [B, H, Sq, Dv],
///   out = softmax(scale * q k^T) v
/// where the softmax only ranges over the keys the mask allows. `mask` is I1
/// of shape [B or 1, H or 1, Sq, Skv] (size-1 dims broadcast), nonzero means
/// "attend"; null attends everywhere. A query row with no key to attend to
/// yields zeros (the convention of flash/ring attention implementations,
/// which must therefore agree with this oracle). Result dtype is q's. With
/// bf16 operands the probabilities are rounded to bf16 before the product
/// with v, as the runtime's bf16 attention and flash kernels round them.
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, double scale);

/// Block sizes of the tiled (flash) attention algorithm, named as
/// MaxDiffusion's flash_block_sizes. A length that a block size does not
/// divide ends in a partial block; a block size above the length it tiles is
/// in effect clamped to it. Every size must be >= 1 (debug assert).
struct FlashBlockSizes {
  /// Forward: query rows per block; key rows per block, processed in
  /// sub-blocks of blockKvCompute.
  int64_t blockQ = 512, blockKvCompute = 512, blockKv = 512;
  /// Backward dK/dV pass: key rows per block (sub-blocks of
  /// blockKvDkvCompute), iterating over query blocks of blockQDkv rows.
  int64_t blockQDkv = 512, blockKvDkv = 512, blockKvDkvCompute = 512;
  /// Backward dQ pass: query rows per block, iterating over key blocks of
  /// blockKvDq rows. Unused when fusedBackward.
  int64_t blockQDq = 512, blockKvDq = 512;
  /// Accumulate dQ inside the dK/dV pass instead of a separate dQ pass.
  bool fusedBackward = false;
};

/// The results of `flashAttention`.
struct FlashForward {
  /// [B, H, Sq, Dv], as `attention`.
  Tensor out;
  /// [B, H, Sq]: log of the softmax denominator, log sum_allowed exp(logit).
  Tensor lse;
};

/// Tiled attention with an online softmax, an executable specification of
/// the flash-attention tiling. Operands, mask semantics and the result's dtype
/// are those of `attention`, which `out` equals up to round-off; `lse` (q's
/// dtype) is log sum_{allowed j} exp(scale * q_i . k_j). A fully masked query
/// row gives an output row of zeros and lse -inf.
///
/// Per (batch, head) and per query block of blockQ rows, the key blocks of
/// blockKv rows are visited in order, each in sub-blocks of blockKvCompute
/// rows. Each query row keeps a running maximum m, sum l and accumulator acc;
/// a sub-block with logits s_j raises m to m' = max(m, max_j s_j) and updates
///   l = l exp(m - m') + sum_j exp(s_j - m'),
///   acc = acc exp(m - m') + sum_j exp(s_j - m') v_j.
/// At the end out = acc / l and lse = m + log l. With bf16 operands each
/// exp(s_j - m') is rounded to bf16 in acc's sum (not in l's), as the
/// runtime's bf16 kernel rounds its P tile for the P·V product.
FlashForward flashAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                            const Tensor *mask, double scale,
                            const FlashBlockSizes &blocks);

/// The results of `flashAttentionBackward`, shaped and typed as q, k, v.
struct FlashGradients {
  Tensor dq, dk, dv;
};

/// The backward of `flashAttention` from its saved `out` [B, H, Sq, Dv] and
/// `lse` [B, H, Sq], given the output cotangent `dOut` [B, H, Sq, Dv]:
///   P = exp(scale q k^T - lse) on allowed entries (0 elsewhere),
///   D_i = sum_c dOut_ic out_ic,  dV = P^T dOut,  dP = dOut V^T,
///   dS = P o (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
/// P is never renormalized, so k/v (and the mask, [B or 1, H or 1, Sq, Skv'])
/// may be a slice of the keys the lse was computed over: dq is then that
/// slice's contribution to the full dq, and dk/dv are that slice's gradients.
/// A query row whose lse is -inf contributes nothing.
///
/// dK/dV: per key block of blockKvDkv rows (sub-blocks of blockKvDkvCompute),
/// over query blocks of blockQDkv rows. dQ: per query block of blockQDq rows
/// over key blocks of blockKvDq rows, or, when fusedBackward, accumulated in
/// the dK/dV loop. With bf16 operands P (in dV) and dS (in dQ and dK) are
/// rounded to bf16 first, dS from the unrounded P, as the runtime does.
FlashGradients flashAttentionBackward(const Tensor &q, const Tensor &k,
                                      const Tensor &v, const Tensor *mask,
                                      const Tensor &out, const Tensor &lse,
                                      const Tensor &dOut, double scale,
                                      const FlashBlockSizes &blocks);

/// 2-D convolution (cross-correlation, as in every DL framework), zero padded:
///   x NHWC [N, H, W, Cin], w HWIO [KH, KW, Cin/groups, Cout], bias [Cout] or
///   null; result [N, Ho, Wo, Cout] with Ho = (H + top + bottom - KH)/sh + 1
///   (floor) and likewise Wo. `strides` = {sh, sw}, `padding` = {top, bottom,
///   left, right}. With groups > 1, output channel o reads the input channels
///   of group o / (Cout/groups). Result dtype is x's.
Tensor conv2d(const Tensor &x, const Tensor &w, const Tensor *bias,
              std::array<int64_t, 2> strides, std::array<int64_t, 4> padding,
              int64_t groups = 1);

/// conv2d's gradients. With the forward's attributes and its input shape
/// (`inputShape`) or kernel shape (`kernelShape`): dx[n, iy, ix, ci] sums
/// dy[n, oy, ox, co]·w[ky, kx, ci, co] over the taps that read (iy, ix), and
/// dw[ky, kx, ci, co] sums x[n, iy, ix, ci]·dy[n, oy, ox, co] over samples
/// and output pixels (taps in the padding read 0). Result dtype is dy's.
Tensor conv2dInputGrad(const Tensor &dy, const Tensor &w,
                       const std::vector<int64_t> &inputShape,
                       std::array<int64_t, 2> strides,
                       std::array<int64_t, 4> padding, int64_t groups = 1);
Tensor conv2dFilterGrad(const Tensor &x, const Tensor &dy,
                        const std::vector<int64_t> &kernelShape,
                        std::array<int64_t, 2> strides,
                        std::array<int64_t, 4> padding, int64_t groups = 1);

/// Nearest-neighbour upsampling of NHWC `x` by integer factors:
///   y[n, h, w, c] = x[n, h / scaleH, w / scaleW, c].
Tensor upsampleNearest(const Tensor &x, int64_t scaleH, int64_t scaleW);

/// Mean squared error over all elements, mean((pred - target)^2), as a rank-0
/// F32 tensor (the diffusion training loss).
Tensor mseLoss(const Tensor &pred, const Tensor &target);

/// AdamW's scalars for one update (sd.adamw): the learning rate, the bias
/// corrections 1 − b1^t and 1 − b2^t, b1, 1 − b1, b2, 1 − b2, eps and the
/// weight decay (0: none).
struct AdamWScalars {
  double learningRate = 0.0;
  double correction1 = 1.0;
  double correction2 = 1.0;
  double beta1 = 0.0;
  double oneMinusBeta1 = 1.0;
  double beta2 = 0.0;
  double oneMinusBeta2 = 1.0;
  double epsilon = 0.0;
  double weightDecay = 0.0;
};

/// One AdamW update of parameter `p` with gradient `g` and moments `mu`,
/// `nu` (one shape): {p', mu', nu'} with mu' = b1·mu + (1−b1)·g,
/// nu' = b2·nu + (1−b2)·g², p' = p − lr·(mu'/c1 / (sqrt(nu'/c2) + eps) +
/// wd·p), in `p`'s element type.
std::array<Tensor, 3> adamw(const Tensor &p, const Tensor &g, const Tensor &mu,
                            const Tensor &nu, const AdamWScalars &scalars);

} // namespace sd::ref

#endif // SD_REFERENCE_KERNELS_H
