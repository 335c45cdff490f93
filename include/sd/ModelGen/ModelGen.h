//===- ModelGen.h - model programs of diffusion transformers ----*- C++ -*-===//
//
// Writes the training-loss program of a diffusion model (DiT, Wan2.1, Flux,
// the SD 2 and SDXL UNets) at any size, so that real-scale programs exist
// without writing them by hand. `sdgen` is a thin command line over this
// library.
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
// * Parameters come first, named and laid out as in the reference's
//   checkpoints (DiT: facebookresearch/DiT's state_dict; Wan and Flux:
//   diffusers' WanTransformer3DModel and FluxTransformer2DModel), so that
//   released weights load as they are: `blocks.3.attn.qkv.weight`. Each has
//   `sd.role = #sd.param<name, init[, stored[...]]>` and `sd.logical_axes`
//   using MaxDiffusion's names:
//     Linear weights are PyTorch's [out, in]: q/k/v [heads, embed] (bias
//       [heads]), attention output [embed, heads], FFN in [mlp, embed] (bias
//       [mlp]), FFN out [embed, mlp], embedder MLPs (timestep, text, pooled
//       text, guidance) first [mlp, embed] then [embed, mlp];
//     fused projections (DiT's qkv, the adaLN / AdaLayerNormZero
//       modulations, Wan's time_proj, the output layers' norm_out) are
//       declared as the view [k, out, in] of the stored [k·out, in], with
//       axes [_, heads, embed] (qkv) or [_, _, embed] (modulations: their
//       width is not split over `tensor`, since they scale whole
//       activations), biases [k, out] of the stored [k·out];
//     Wan's modulation tables (scale_shift_table) [_, _, embed];
//     single-layer input embeddings (patches, Flux's context_embedder and
//       x_embedder) [embed, _]; DiT's class table [_, embed]; output
//       projections [_, embed]; Flux's single-block proj_out [embed, _]
//       (its input width mixes heads and MLP columns);
//     norm scales and biases [norm].
//   Patch embeddings that are convolutions in PyTorch (DiT
//   x_embedder.proj, Wan patch_embedding) are declared as the view
//   [D, C·patch] of the stored [D, C, ...]. Patch values are ordered as
//   each checkpoint expects: inputs channel-major (c, [t,] i, j); outputs
//   as the model unpatchifies, channel-minor for DiT and Wan, channel-major
//   for Flux.
// * UNets (diffusers' UNet2DConditionModel with linear projections) keep
//   diffusers' names and PyTorch's layouts too: conv weights [Cout, Cin,
//   KH, KW] with axes [conv_out, conv_in, _, _] (MaxDiffusion's names),
//   transposed to the op's HWIO where used; attention projections without
//   bias; GEGLU's projection the fused view [2, 4·C, C]. One private
//   function per distinct ResNet block (@resnet_<in>_<out>_<H>x<W>) and
//   transformer block (@transformer_<C>_<H>x<W>). SDXL also takes the
//   pooled text (role `pooled`) and the six size and crop ids (role
//   `time_ids`, [B, 6] f32, embedded unscaled).
// * Inputs: latents and noise NHWC `[B, H, W, C]` (Wan `[B, F, H, W, C]`),
//   axes `[batch, _, ...]`; timestep `[B]` f32 in [0, 1) `[batch]`; DiT
//   labels one-hot `[B, classes + 1]` `[batch, _]`; Wan/Flux text context
//   `[B, L, 4096]` `[batch, activation_length, embed]`; Flux also the pooled
//   text vector (role `pooled`) `[B, 768]` `[batch, _]` and the distilled
//   guidance strength of each sample (role `guidance`) `[B]` f32 `[batch]`;
//   Flux's functions record in `sd.guidance` the strength training feeds
//   and sampling defaults to (`guidance`, 3.5). @denoise takes
//   the noised latents x_t (role `latents`) in place of latents and noise,
//   then the same timestep and conditioning inputs.
// * The loss is the MSE between the network's prediction and the target
//   of the prediction type (`PredictionType`), computed in @loss from the
//   latents x0, the noise and t; @loss names the type in
//   `sd.prediction_type` ("epsilon", "v_prediction" or "flow").
// * Projections are `sd.dot_general` contracting the activation's last
//   dimension with the last dimension of an `[out, in]` or fused
//   `[k, out, in]` weight (no batch dimensions); attention is
//   `sd.attention` on `[B, H, S, D]`.
// * Values are named (`sd.name`) as MaxDiffusion names them: query_proj,
//   key_proj, value_proj (projections with bias, [B, S, D]), xq_out, xk_out
//   (after norm and RoPE, [B, H, S, Dh]), attn_output (attention result as
//   [B, S, D]), ffn_activation (after GELU), hidden_states (block output);
//   Wan self_attn and cross_attn (sublayer outputs); Flux img_qkv_proj and
//   txt_qkv_proj (double blocks: each of a stream's q, k and v
//   projections), lin1_norm_hidden_states (single blocks: the modulated
//   input of the attention and the MLP).
// * No weight is sliced along a dimension FSDP shards (it would be
//   gathered once per slice): a fused projection is one dot_general with
//   its whole weight and its chunks are slices of the activation, the
//   batch taken whole (limit -1); Wan's modulation tables are added whole
//   before chunking; DiT's learn_sigma output is sliced after the final
//   projection. Flux's single-block proj_out [D, D + mlp] is sliced along
//   its unsharded input width into the blocks that multiply the attention
//   and the MLP halves (no concatenation of activations). Flux's joint
//   attention is one attention per stream over the shared keys, and Flux's
//   loss masks the text tokens.
// * Blocks that use the conditioning vector only through SiLU (DiT's c,
//   Flux's vec) take SiLU(c), computed once in `@loss`: one value, so it
//   is resharded once for all blocks.
// * With a dynamic batch, batch-free values (biases, DiT's position
//   embedding, Flux's loss mask) enter batch shapes
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
#include <vector>

namespace mlir::sd {

enum class ModelFamily { DiT, Wan, Flux, UNet };

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
  /// Flux's distilled guidance strength that training feeds (sd.guidance).
  double guidance = 3.5;
  /// UNet (diffusers' UNet2DConditionModel): the channels of each
  /// resolution level (block_out_channels), the attention heads of each
  /// level (diffusers' attention_head_dim, which counts heads), the
  /// transformer blocks of each level's Transformer2DModel
  /// (transformer_layers_per_block; the mid block takes the last level's)
  /// and whether a level's down and up blocks have attention (CrossAttn*
  /// blocks; the mid block always has). The time embedding is 4 × the
  /// first level's channels.
  std::vector<int64_t> levelChannels, levelHeads, levelTransformerLayers;
  std::vector<bool> levelAttention;
  /// UNet: ResNet blocks per down block (up blocks have one more) and the
  /// groups of every group norm.
  int64_t layersPerBlock = 2;
  int64_t normGroups = 32;
  /// UNet (SDXL's "text_time" added embedding): the width of the
  /// sinusoidal features of each of the six size and crop ids
  /// (addition_time_embed_dim), 0 for none; the pooled text vector is
  /// `pooledDim` wide.
  int64_t addTimeDim = 0;
  /// The published parameter count the preset reproduces (0: none), shown
  /// in sdgen's summary.
  int64_t publishedParams = 0;
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
  /// Flux's single-stream blocks (default twice --depth).
  std::optional<int64_t> singleDepth;
  /// The FFN width as a ratio of the model width, or exactly (one of them).
  std::optional<double> mlpRatio;
  std::optional<int64_t> ffnDim;
  /// Widths of the conditioning: text states (Wan, Flux), the pooled text
  /// vector (Flux) and the sinusoidal timestep embedding (every family).
  std::optional<int64_t> textDim, pooledDim, freqDim;
  /// Latent height = width (DiT, Flux).
  std::optional<int64_t> latentSize;
  /// Channels of a latent (or pixel); DiT: the classes of its labels (the
  /// labels get one more column, the null class).
  std::optional<int64_t> channels, classes;
  /// Video frames and pixel height/width (Wan; Flux height/width).
  std::optional<int64_t> frames, height, width;
  std::optional<int64_t> textLength;
  /// UNet: block_out_channels, attention heads and transformer blocks per
  /// level (each as many entries as levels), ResNet blocks per down block,
  /// group-norm groups.
  std::optional<std::vector<int64_t>> levelChannels, levelHeads,
      levelTransformerLayers;
  std::optional<int64_t> layersPerBlock, normGroups;
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
