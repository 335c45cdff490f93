//===- ModelGen.h - model programs of diffusion transformers ----*- C++ -*-===//
//
// Writes the training-loss program of a diffusion transformer (DiT, Wan2.1,
// Flux) at any size, so that real-scale programs exist without writing them
// by hand. `sdgen` is a thin command line over this library.
//
// The program is `func.func @loss(params..., inputs...) -> tensor<f32>`,
// with one private block function per block kind (`@dit_block`,
// `@wan_block`, `@flux_double_block`, `@flux_single_block`) called once per
// layer. With `withDenoise`, a second public function `@denoise(params...,
// x_t, t, conditions...)` returns the network's raw prediction for a noised
// input, in latent layout: the same parameter arguments (names, axes,
// order) as @loss, and the same block functions. Conventions that later
// passes rely on:
//
// * The batch dimension is dynamic (`?`) unless `staticBatch`; `@loss` and
//   `@denoise` carry `sd.default_batch`.
// * Parameters come first, named as in the PyTorch checkpoints
//   (`blocks.3.attn.qkv.weight`), each with `sd.role = #sd.param<name,
//   init>` and `sd.logical_axes` using MaxDiffusion's names:
//     q/k/v weight [embed, heads], bias [heads]; fused qkv weight
//       [D, 3, D] with [embed, _, heads], bias [3, D] with [_, heads];
//     attention output weight [heads, embed], bias [embed];
//     FFN in weight [embed, mlp], bias [mlp]; FFN out [mlp, embed], [embed];
//     modulation linears (adaLN, Wan time_projection, Flux *_mod.lin and
//       modulation.lin) weight [D, k, D] with [embed, _, _], bias [k, D]
//       with [_, _] (k = 6, 3 or 2 vectors; their width is not split over
//       `tensor`, since they scale whole activations); Wan's modulation
//       tables [_, _, embed];
//     embedder MLPs (timestep, Wan text, Flux vector): first layer
//       [embed, mlp] (bias [mlp]), second [mlp, embed] (bias [embed]);
//     single-layer input embeddings (patches, Flux txt_in) [_, embed];
//       DiT's class table [_, embed]; final projections [embed, _], [_];
//     Flux single blocks: the checkpoint's linear1 split into linear1_qkv
//       (fused qkv, as above) and linear1_mlp [embed, mlp]; linear2 into
//       linear2_attn.weight [heads, embed], linear2_mlp.weight [mlp, embed]
//       and linear2.bias [embed];
//     norm scales and biases [norm].
//   Patch embeddings that are convolutions in PyTorch (DiT x_embedder.proj,
//   Wan patch_embedding) are linear weights [C·patch, D]: the convolution
//   weight [D, C, ...] flattened and transposed. Patch values are ordered
//   as each checkpoint expects: inputs channel-major (c, [t,] i, j); outputs
//   as the model unpatchifies, channel-minor for DiT and Wan, channel-major
//   for Flux.
// * Inputs: latents and noise NHWC `[B, H, W, C]` (Wan `[B, F, H, W, C]`),
//   axes `[batch, _, ...]`; timestep `[B]` f32 in [0, 1) `[batch]`; DiT
//   labels one-hot `[B, classes + 1]` `[batch, _]`; Wan/Flux text context
//   `[B, L, 4096]` `[batch, activation_length, embed]`; Flux also the pooled
//   text vector as a second context input `[B, 768]` `[batch, _]`. Flux's
//   guidance is folded in as the constant `guidance` (3.5). @denoise takes
//   the noised latents x_t (role `latents`) in place of latents and noise,
//   then the same timestep and conditioning inputs.
// * The loss is the MSE between the network's prediction and the target
//   of the prediction type (`PredictionType`), computed in @loss from the
//   latents x0, the noise and t; @loss names the type in
//   `sd.prediction_type` ("epsilon", "v_prediction" or "flow").
// * Projections are `sd.dot_general` contracting the activation's last
//   dimension with dim 0 of an `[in, out]` or fused `[in, k, out]` weight
//   (no batch dimensions); attention is `sd.attention` on `[B, H, S, D]`.
// * Values are named (`sd.name`) as MaxDiffusion names them: query_proj,
//   key_proj, value_proj (projections with bias, [B, S, D]), xq_out, xk_out
//   (after norm and RoPE, [B, H, S, Dh]), attn_output (attention result as
//   [B, S, D]), ffn_activation (after GELU), hidden_states (block output);
//   Wan self_attn and cross_attn (sublayer outputs); Flux img_qkv_proj and
//   txt_qkv_proj (double blocks: each stream's fused projection
//   [B, S, 3, D]), lin1_norm_hidden_states (single blocks: linear1's
//   input).
// * No weight is sliced (a sharded weight would be gathered once per
//   slice): a fused projection is one dot_general with its whole weight
//   and its chunks are slices of the activation, the batch taken whole
//   (limit -1); Wan's modulation tables are added whole before chunking;
//   DiT's learn_sigma output is sliced after the final projection. Flux's
//   joint attention is one attention per stream over the shared keys, and
//   Flux's loss masks the text tokens.
// * Blocks that use the conditioning vector only through SiLU (DiT's c,
//   Flux's vec) take SiLU(c), computed once in `@loss`: one value, so it
//   is resharded once for all blocks.
// * With a dynamic batch, batch-free values (biases, DiT's position
//   embedding, Flux's guidance embedding and loss mask) enter batch shapes
//   through an outer product with a [B, 1] vector of ones, because
//   sd-specialize-batch cannot size a batch dimension that broadcast_in_dim
//   creates; with a static batch they are plain broadcasts.
// * Timestep embeddings (sinusoidal, 256 frequencies of t·1000), DiT's 2-D
//   sin-cos position embedding and the RoPE rotation tables are computed
//   in the program from iota: no large constants.
//
//===----------------------------------------------------------------------===//

#ifndef SD_MODELGEN_MODELGEN_H
#define SD_MODELGEN_MODELGEN_H

#include "sd/IR/SDAttrs.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::sd {

enum class ModelFamily { DiT, Wan, Flux };

// What the network predicts is the dialect's PredictionType (#sd.prediction,
// SDAttrs.td): stringifyPredictionType and symbolizePredictionType name it.

/// Everything the generator needs, after presets and overrides are merged
/// and checked. Sizes are in latent space (patches of the latent).
struct ModelConfig {
  std::string preset;
  ModelFamily family = ModelFamily::DiT;
  /// DiT and Wan layers; Flux double-stream blocks.
  int64_t depth = 0;
  /// Flux single-stream blocks.
  int64_t singleDepth = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  /// FFN hidden width (DiT/Flux: hidden × mlp ratio; Wan: 13824).
  int64_t mlpHidden = 0;
  /// Batch used when the program is specialized without --batch.
  int64_t batch = 1;
  bool staticBatch = false;
  /// Latent frames (1 for images), height, width and channels.
  int64_t latentFrames = 1;
  int64_t latentHeight = 0;
  int64_t latentWidth = 0;
  int64_t latentChannels = 4;
  /// Model output channels per latent position (DiT learn_sigma: 2×).
  int64_t outChannels = 4;
  /// Patch size over (frames, height, width).
  int64_t patchFrames = 1;
  int64_t patch = 2;
  /// DiT: number of classes (the label table has one more, the null class).
  int64_t numClasses = 1000;
  /// Wan/Flux: text tokens and their width; Flux pooled text vector width.
  int64_t textLength = 0;
  int64_t textDim = 4096;
  int64_t pooledDim = 768;
  /// Sinusoidal timestep-embedding width.
  int64_t freqDim = 256;
  /// Flux's distilled guidance strength, folded in as a constant.
  double guidance = 3.5;
  bool bf16 = false;
  PredictionType prediction = PredictionType::flow;
  /// Also write @denoise, the network's prediction as a function.
  bool withDenoise = false;

  int64_t headDim() const { return hidden / heads; }
  /// Tokens of the latent after patchifying.
  int64_t numPatches() const {
    return (latentFrames / patchFrames) * (latentHeight / patch) *
           (latentWidth / patch);
  }
};

/// Command-line overrides of a preset; unset fields keep the preset's value.
struct ModelOverrides {
  std::optional<int64_t> depth, hidden, heads, batch;
  std::optional<double> mlpRatio;
  /// Latent height = width (DiT, Flux).
  std::optional<int64_t> latentSize;
  /// DiT: channels of a latent (or pixel) and the classes of its labels
  /// (the labels get one more column, the null class).
  std::optional<int64_t> channels, classes;
  /// Video frames and pixel height/width (Wan; Flux height/width).
  std::optional<int64_t> frames, height, width;
  std::optional<int64_t> textLength;
  /// `f32`/`bf16`; a prediction type's name (`symbolizePredictionType`).
  std::optional<std::string> dtype, predictionType;
  bool staticBatch = false;
  /// Write @denoise (presets may write it anyway: dit-digits does).
  bool withDenoise = false;
};

/// The preset names, in the order they are documented.
llvm::ArrayRef<llvm::StringRef> getPresetNames();

/// Merges `overrides` into `preset` and checks the result. The error
/// (InvalidArgument) names the bad value: `hidden size 384 is not divisible
/// by 5 heads`.
absl::StatusOr<ModelConfig> makeModelConfig(llvm::StringRef preset,
                                            const ModelOverrides &overrides);

/// Builds and verifies the model program. Returns null after reporting
/// through the context's diagnostic handler when verification fails (a bug
/// in the generator, never bad input: that is caught by makeModelConfig).
OwningOpRef<ModuleOp> generateModel(MLIRContext &context,
                                    const ModelConfig &config);

/// Sizes of a generated program.
struct ModelStats {
  int64_t numParams = 0;
  int64_t numParamTensors = 0;
  /// Ops in the module, each block function's body counted once.
  int64_t numOps = 0;
  /// Ops of @loss with every call replaced by its callee's body.
  int64_t numOpsInlined = 0;
};

ModelStats computeModelStats(ModuleOp module);

/// `dit-s2: 32.87M parameters (131 tensors), 1234 ops (45678 inlined)`.
std::string formatModelSummary(const ModelConfig &config,
                               const ModelStats &stats);

} // namespace mlir::sd

#endif // SD_MODELGEN_MODELGEN_H
