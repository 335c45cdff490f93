//===- ModelGen.cpp - presets, overrides, generation and statistics -------===//
//
// The presets are the published model sizes; overrides change them, and
// every combination is checked here so that the builders never see a
// configuration they cannot write.
//
//===----------------------------------------------------------------------===//

#include "sd/ModelGen/ModelGen.h"

#include "ModelBuilder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::sd;

namespace {
/// A preset with its default FFN ratio (the FFN width follows --hidden).
struct Preset {
  ModelConfig config;
  double mlpRatio;
};

/// VAE downsampling: 8× in space, 4× in time (latent frames (f − 1)/4 + 1).
constexpr int64_t kVaeSpatial = 8;
constexpr int64_t kVaeTemporal = 4;

/// The fields every preset sets: its name, family and transformer size.
ModelConfig makeConfig(StringRef name, ModelFamily family, int64_t depth,
                       int64_t hidden, int64_t heads) {
  ModelConfig c;
  c.preset = name.str();
  c.family = family;
  c.depth = depth;
  c.hidden = hidden;
  c.heads = heads;
  return c;
}

Preset makeDiT(StringRef name, int64_t depth, int64_t hidden, int64_t heads) {
  ModelConfig c = makeConfig(name, ModelFamily::DiT, depth, hidden, heads);
  c.mlpHidden = 4 * hidden;
  c.batch = 8;
  c.latentHeight = c.latentWidth = 32;
  c.latentChannels = 4;
  c.outChannels = 8; // learn_sigma
  c.patch = 2;
  return {c, 4.0};
}

/// A Wan2.1 transformer of `depth` layers, `hidden` wide, over a video of
/// `frames` (4k+1) × `height` × `width` pixels and `textLength` text tokens,
/// with an FFN `mlpHidden` wide.
Preset makeWan(StringRef name, int64_t depth, int64_t hidden, int64_t heads,
               int64_t mlpHidden, int64_t frames, int64_t height, int64_t width,
               int64_t textLength) {
  ModelConfig c = makeConfig(name, ModelFamily::Wan, depth, hidden, heads);
  c.mlpHidden = mlpHidden;
  c.batch = 1;
  c.latentFrames = (frames - 1) / kVaeTemporal + 1;
  c.latentHeight = height / kVaeSpatial;
  c.latentWidth = width / kVaeSpatial;
  c.latentChannels = c.outChannels = 16;
  c.patchFrames = 1;
  c.patch = 2;
  c.textLength = textLength;
  return {c, static_cast<double>(mlpHidden) / static_cast<double>(hidden)};
}

Preset makeFlux() {
  ModelConfig c = makeConfig("flux-dev", ModelFamily::Flux, 19, 3072, 24);
  c.singleDepth = 38;
  c.mlpHidden = 4 * 3072;
  c.batch = 1;
  // 1024×1024 pixels → 128×128×16 latents → 64×64 = 4096 tokens of 64.
  c.latentHeight = c.latentWidth = 1024 / kVaeSpatial;
  c.latentChannels = c.outChannels = 16;
  c.patch = 2;
  c.textLength = 512;
  return {c, 4.0};
}

/// A pixel-space DiT for scikit-learn's 8×8 handwritten digits: images
/// [B, 8, 8, 1] in [-1, 1] (no VAE), patch 2 (16 tokens), 10 classes and
/// the null class, epsilon prediction without learn_sigma, and @denoise
/// for the sampler. Small enough to train in minutes on two CPU cores.
Preset makeDiTDigits() {
  Preset preset = makeDiT("dit-digits", 4, 128, 4);
  ModelConfig &c = preset.config;
  c.batch = 64;
  c.latentHeight = c.latentWidth = 8;
  c.latentChannels = c.outChannels = 1;
  c.numClasses = 10;
  c.prediction = PredictionType::epsilon;
  c.withDenoise = true;
  return preset;
}

/// A UNet2DConditionModel with diffusers' config: block_out_channels,
/// attention_head_dim (heads per level), transformer_layers_per_block,
/// which levels' blocks are CrossAttn*, cross_attention_dim, over latents
/// of `pixels`² images; epsilon prediction, layers_per_block 2, 32 groups.
Preset makeUNet(StringRef name, std::vector<int64_t> channels,
                std::vector<int64_t> heads, std::vector<int64_t> layers,
                std::vector<bool> attention, int64_t textDim, int64_t pixels,
                int64_t published) {
  ModelConfig c =
      makeConfig(name, ModelFamily::UNet, 0, channels.front(), heads.front());
  c.levelChannels = std::move(channels);
  c.levelHeads = std::move(heads);
  c.levelTransformerLayers = std::move(layers);
  c.levelAttention = std::move(attention);
  c.batch = 1;
  c.latentHeight = c.latentWidth = pixels / kVaeSpatial;
  c.latentChannels = c.outChannels = 4;
  c.patch = 1;
  c.textDim = textDim;
  c.textLength = 77;
  c.prediction = PredictionType::epsilon;
  c.publishedParams = published;
  return {c, 4.0};
}

/// SDXL's UNet: no attention at the first level, "text_time" added
/// embedding of the pooled text (1280) and the six size and crop ids.
Preset makeSdxl(StringRef name, std::vector<int64_t> channels,
                std::vector<int64_t> heads, std::vector<int64_t> layers,
                int64_t textDim, int64_t pooledDim, int64_t addTimeDim,
                int64_t pixels, int64_t published) {
  std::vector<bool> attention(channels.size(), true);
  attention.front() = false;
  Preset preset =
      makeUNet(name, std::move(channels), std::move(heads), std::move(layers),
               std::move(attention), textDim, pixels, published);
  preset.config.pooledDim = pooledDim;
  preset.config.addTimeDim = addTimeDim;
  return preset;
}

/// The tiny UNets of the tests: two levels of 32 and 64 channels, one
/// ResNet block per down block, 8 groups, 8 text tokens of 32.
Preset makeTinyUNet(Preset preset) {
  ModelConfig &c = preset.config;
  c.layersPerBlock = 1;
  c.normGroups = 8;
  c.textLength = 8;
  c.batch = 4;
  c.publishedParams = 0;
  return preset;
}

std::optional<Preset> lookupPreset(StringRef name) {
  if (name == "dit-tiny")
    return makeDiT(name, 2, 64, 4);
  if (name == "dit-digits")
    return makeDiTDigits();
  if (name == "dit-s2")
    return makeDiT(name, 12, 384, 6);
  if (name == "dit-b2")
    return makeDiT(name, 12, 768, 12);
  if (name == "dit-xl2")
    return makeDiT(name, 28, 1152, 16);
  // 81 frames of 1280×720 → 21×90×160 latents → 21×45×80 = 75,600 tokens.
  if (name == "wan2.1-14b")
    return makeWan(name, 40, 5120, 40, 13824, 81, 720, 1280, 512);
  // Wan2.1-T2V-1.3B: 30 layers, 1536 wide, 12 heads, FFN 8960; 81 frames of
  // 832×480 → 21×60×104 latents → 21×30×52 = 32,760 tokens.
  if (name == "wan2.1-1.3b")
    return makeWan(name, 30, 1536, 12, 8960, 81, 480, 832, 512);
  // A long sequence on a small model: 61 frames of 256×256 → 16×32×32
  // latents → 16×16×16 = 4,096 tokens, whose attention scores (64 MiB per
  // head in f32) dominate its memory unless attention is tiled.
  if (name == "wan-long")
    // The FFN keeps Wan2.1-14B's ratio 13824 / 5120.
    return makeWan(name, 2, 128, 4, 346, 61, 256, 256, 16);
  if (name == "flux-dev")
    return makeFlux();
  // stabilityai/stable-diffusion-2-base (512 px): 865,910,724 parameters.
  if (name == "sd2-base")
    return makeUNet(name, {320, 640, 1280, 1280}, {5, 10, 20, 20}, {1, 1, 1, 1},
                    {true, true, true, false}, 1024, 512, 865910724);
  // stabilityai/stable-diffusion-xl-base-1.0 (1024 px): 2,567,463,684.
  if (name == "sdxl")
    return makeSdxl(name, {320, 640, 1280}, {5, 10, 20}, {1, 2, 10}, 2048, 1280,
                    256, 1024, 2567463684);
  if (name == "unet-tiny")
    return makeTinyUNet(
        makeUNet(name, {32, 64}, {2, 4}, {1, 1}, {true, false}, 32, 64, 0));
  if (name == "sdxl-tiny")
    return makeTinyUNet(
        makeSdxl(name, {32, 64}, {2, 4}, {1, 2}, 32, 16, 8, 64, 0));
  return std::nullopt;
}

/// A configuration error: the message names the bad value.
absl::Status fail(const llvm::Twine &message) {
  return absl::InvalidArgumentError(message.str());
}

/// Pixels → latent positions; the size must cover whole patches.
/// The largest tensor sdgen writes, in elements (2^40: 4 TiB of f32), and
/// the deepest model: far above any real model, below an overflow.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;
constexpr int64_t kMaxDepth = 10000;

/// An error naming the flags that shape the first tensor of `c` whose
/// element count is above kMaxTensorElements, computed with
/// overflow-checked multiplication before any op is built (an overflowed
/// shape would fail type inference with an LLVM fatal error).
absl::Status checkSizes(const ModelConfig &c) {
  if (c.depth > kMaxDepth)
    return fail(llvm::formatv("depth {0} is above the limit of {1} (--depth)",
                              c.depth, kMaxDepth));
  struct Extent {
    const char *what, *flags;
    std::vector<int64_t> sizes;
  };
  // Tokens: the patchified latent and, for the joint attention, the text.
  int64_t tokens = 1;
  for (int64_t d : {c.latentFrames / c.patchFrames, c.latentHeight / c.patch,
                    c.latentWidth / c.patch})
    if (llvm::MulOverflow(tokens, d, tokens) || tokens > kMaxTensorElements)
      return fail(llvm::formatv(
          "the latent has more than {0} tokens; lower --latent-size, "
          "--height, --width or --frames",
          kMaxTensorElements));
  // Saturated: a sum or product past int64_t fails the checks below.
  constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();
  int64_t allTokens, adaWidth;
  if (llvm::AddOverflow(tokens, c.textLength, allTokens))
    allTokens = kSaturated;
  if (llvm::MulOverflow(c.hidden, int64_t(6), adaWidth))
    adaWidth = kSaturated;
  const Extent extents[] = {
      {"the attention scores (batch × heads × tokens²)",
       "--batch, --heads, the latent size or --text-length",
       {c.batch, c.heads, allTokens, allTokens}},
      {"the FFN activations (batch × tokens × FFN width)",
       "--batch, the latent size, --hidden or --mlp-ratio",
       {c.batch, allTokens, std::max(c.mlpHidden, adaWidth)}},
      {"the FFN weight (hidden × FFN width)",
       "--hidden or --mlp-ratio",
       {c.hidden, std::max(c.mlpHidden, adaWidth)}},
      {"the latents (batch × frames × height × width × channels)",
       "--batch, --latent-size, --height, --width or --frames",
       {c.batch, c.latentFrames, c.latentHeight, c.latentWidth,
        c.latentChannels}},
      {"the text context (batch × text tokens × text width)",
       "--batch or --text-length",
       {c.batch, std::max<int64_t>(c.textLength, 1), c.textDim}},
  };
  for (const Extent &extent : extents) {
    int64_t elements = 1;
    for (int64_t size : extent.sizes)
      if (llvm::MulOverflow(elements, size, elements) ||
          elements > kMaxTensorElements)
        return fail(llvm::formatv("{0} would have more than {1} elements "
                                  "(2^40); lower {2}",
                                  extent.what, kMaxTensorElements,
                                  extent.flags));
  }
  return absl::OkStatus();
}

absl::Status pixelsToLatent(StringRef what, int64_t pixels, int64_t patch,
                            int64_t &latent) {
  int64_t unit = kVaeSpatial * patch;
  if (pixels <= 0 || pixels % unit != 0)
    return fail(llvm::formatv("{0} {1} must be a positive multiple of {2} "
                              "(VAE factor {3} × patch {4})",
                              what, pixels, unit, kVaeSpatial, patch));
  latent = pixels / kVaeSpatial;
  return absl::OkStatus();
}
} // namespace

ArrayRef<StringRef> mlir::sd::getPresetNames() {
  static const StringRef names[] = {
      "dit-tiny",   "dit-digits",  "dit-s2",   "dit-b2",   "dit-xl2",
      "wan2.1-14b", "wan2.1-1.3b", "wan-long", "flux-dev", "sd2-base",
      "sdxl",       "unet-tiny",   "sdxl-tiny"};
  return names;
}

/// The overrides that shape a model's inputs: frames, latent or pixel size,
/// channels, classes and text length, each checked against the family.
static absl::Status applyInputShape(const ModelOverrides &o,
                                    StringRef presetName, ModelConfig &c) {
  bool isDiT = c.family == ModelFamily::DiT;
  bool isWan = c.family == ModelFamily::Wan;
  if (o.frames && !isWan)
    return fail("--frames applies to video models (wan2.1-14b, wan2.1-1.3b, "
                "wan-long) only");
  if (o.latentSize && isWan)
    return fail("--latent-size applies to image models; give " + presetName +
                " --frames, --height and --width");
  if ((o.height || o.width) && isDiT)
    return fail("--height and --width (pixels) apply to wan2.1-14b, "
                "wan2.1-1.3b, wan-long and flux-dev; give DiT --latent-size");
  if (o.latentSize && (o.height || o.width))
    return fail("give --latent-size or --height/--width, not both");
  if (o.textLength && isDiT)
    return fail("--text-length applies to text-conditioned models "
                "(wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev)");

  if (o.classes && !isDiT)
    return fail("--classes applies to DiT models");
  if ((o.textDim || o.pooledDim) && isDiT)
    return fail("--text-dim and --pooled-dim apply to text-conditioned models "
                "(wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev)");
  if (o.pooledDim && c.family != ModelFamily::Flux && c.addTimeDim == 0)
    return fail("--pooled-dim applies to Flux and SDXL (their pooled text "
                "vector)");
  for (auto [value, name] : {std::pair{o.textDim, "text width"},
                             {o.pooledDim, "pooled width"},
                             {o.freqDim, "timestep-embedding width"}})
    if (value && (*value <= 0 || *value > (int64_t(1) << 20)))
      return fail(llvm::formatv("{0} {1} must be 1 to 1048576", name, *value));
  if (o.freqDim && *o.freqDim % 2 != 0)
    return fail(llvm::formatv("timestep-embedding width {0} must be even (cos "
                              "and sin halves)",
                              *o.freqDim));
  c.textDim = o.textDim.value_or(c.textDim);
  c.pooledDim = o.pooledDim.value_or(c.pooledDim);
  c.freqDim = o.freqDim.value_or(c.freqDim);
  if (o.channels) {
    if (*o.channels <= 0 || *o.channels > 64)
      return fail(llvm::formatv("{0} channels: give 1 to 64", *o.channels));
    // learn_sigma presets predict twice the channels (the variance).
    int64_t ratio = c.outChannels / c.latentChannels;
    c.latentChannels = *o.channels;
    c.outChannels = ratio * *o.channels;
  }
  if (o.classes) {
    if (*o.classes <= 0 || *o.classes > 100000)
      return fail(llvm::formatv("{0} classes: give 1 to 100000", *o.classes));
    c.numClasses = *o.classes;
  }
  if (o.latentSize) {
    if (*o.latentSize <= 0 || *o.latentSize % c.patch != 0)
      return fail(llvm::formatv("latent size {0} is not divisible by the "
                                "patch size {1}",
                                *o.latentSize, c.patch));
    c.latentHeight = c.latentWidth = *o.latentSize;
  }
  if (o.height)
    if (absl::Status status =
            pixelsToLatent("height", *o.height, c.patch, c.latentHeight);
        !status.ok())
      return status;
  if (o.width)
    if (absl::Status status =
            pixelsToLatent("width", *o.width, c.patch, c.latentWidth);
        !status.ok())
      return status;
  if (o.frames) {
    if (*o.frames <= 0 || (*o.frames - 1) % kVaeTemporal != 0)
      return fail(llvm::formatv("frames {0} must be 4k+1 (the VAE keeps the "
                                "first frame and compresses time by {1})",
                                *o.frames, kVaeTemporal));
    c.latentFrames = (*o.frames - 1) / kVaeTemporal + 1;
  }
  if (o.textLength) {
    if (*o.textLength <= 0)
      return fail(
          llvm::formatv("text length {0} must be positive", *o.textLength));
    c.textLength = *o.textLength;
  }
  return absl::OkStatus();
}

/// The batch overrides, then applyInputShape.
static absl::Status applyBatchAndInputShape(const ModelOverrides &o,
                                            StringRef presetName,
                                            ModelConfig &c) {
  if (o.batch) {
    if (*o.batch <= 0)
      return fail(llvm::formatv("batch {0} must be positive", *o.batch));
    c.batch = *o.batch;
  }
  c.staticBatch = o.staticBatch;
  return applyInputShape(o, presetName, c);
}

/// `name` [a, b, ...] for messages.
static std::string listText(ArrayRef<int64_t> values) {
  std::string text;
  for (int64_t value : values)
    text += (text.empty() ? "" : ", ") + std::to_string(value);
  return "[" + text + "]";
}

/// The largest tensors of a UNet, checked before any op is built: the
/// attention scores of its finest attention level and its widest
/// activation.
static absl::Status checkUNetSizes(const ModelConfig &c) {
  int64_t levels = static_cast<int64_t>(c.levelChannels.size());
  for (int64_t level = 0; level < levels; ++level) {
    int64_t factor = int64_t(1) << level;
    int64_t tokens = (c.latentHeight / factor) * (c.latentWidth / factor);
    int64_t elements = c.batch;
    bool attention = c.levelAttention[level] || level == levels - 1;
    for (int64_t size :
         {attention ? c.levelHeads[level] : int64_t(1),
          attention ? tokens : int64_t(1), tokens, 2 * c.levelChannels[level]})
      if (llvm::MulOverflow(elements, size, elements) ||
          elements > kMaxTensorElements)
        return fail(llvm::formatv(
            "level {0}'s activations or attention scores would have more "
            "than {1} elements (2^40); lower --batch, --latent-size or "
            "--block-channels",
            level, kMaxTensorElements));
  }
  return absl::OkStatus();
}

/// A UNet's overrides and checks: its lists have one entry per level, the
/// channels divide into the groups and the heads, and the latent halves
/// evenly at every down-sampling.
static absl::StatusOr<ModelConfig>
makeUNetConfig(const ModelOverrides &o, StringRef presetName, ModelConfig c) {
  if (o.depth || o.hidden || o.heads || o.mlpRatio || o.ffnDim ||
      o.singleDepth || o.freqDim)
    return fail("--depth, --hidden, --heads, --mlp-ratio, --ffn-dim, "
                "--single-depth and --freq-dim apply to transformers; give " +
                presetName +
                " --block-channels, --attention-heads, --transformer-layers "
                "and --layers-per-block");
  // The published count is that of the preset's own sizes.
  if (o.levelChannels || o.levelHeads || o.levelTransformerLayers ||
      o.layersPerBlock || o.normGroups || o.channels || o.textDim ||
      o.pooledDim)
    c.publishedParams = 0;
  if (o.levelChannels)
    c.levelChannels = *o.levelChannels;
  if (o.levelHeads)
    c.levelHeads = *o.levelHeads;
  if (o.levelTransformerLayers)
    c.levelTransformerLayers = *o.levelTransformerLayers;
  size_t levels = c.levelChannels.size();
  if (levels == 0 || levels > 8)
    return fail(
        llvm::formatv("{0} levels of --block-channels: give 1 to 8", levels));
  if (c.levelHeads.size() != levels ||
      c.levelTransformerLayers.size() != levels)
    return fail(llvm::formatv(
        "--block-channels {0} has {1} levels, but --attention-heads {2} and "
        "--transformer-layers {3} must have one entry per level",
        listText(c.levelChannels), levels, listText(c.levelHeads),
        listText(c.levelTransformerLayers)));
  // A preset's attention pattern: its first or last level may go without.
  if (c.levelAttention.size() != levels) {
    bool sdxlStyle = c.addTimeDim > 0;
    std::vector<bool> attention(levels, true);
    if (levels > 1)
      attention[sdxlStyle ? 0 : levels - 1] = false;
    c.levelAttention = std::move(attention);
  }
  if (o.layersPerBlock) {
    if (*o.layersPerBlock <= 0 || *o.layersPerBlock > 16)
      return fail(llvm::formatv("--layers-per-block {0}: give 1 to 16",
                                *o.layersPerBlock));
    c.layersPerBlock = *o.layersPerBlock;
  }
  if (o.normGroups) {
    if (*o.normGroups <= 0)
      return fail(
          llvm::formatv("--norm-groups {0} must be positive", *o.normGroups));
    c.normGroups = *o.normGroups;
  }
  for (size_t level = 0; level < levels; ++level) {
    int64_t channels = c.levelChannels[level], heads = c.levelHeads[level];
    int64_t layers = c.levelTransformerLayers[level];
    if (channels <= 0 || channels > (int64_t(1) << 20))
      return fail(llvm::formatv("level {0}'s {1} channels: give 1 to 1048576",
                                level, channels));
    if (channels % c.normGroups != 0)
      return fail(llvm::formatv("level {0}'s {1} channels are not divisible "
                                "into {2} norm groups (--norm-groups)",
                                level, channels, c.normGroups));
    if (heads <= 0 || channels % heads != 0)
      return fail(llvm::formatv("level {0}'s {1} channels are not divisible "
                                "by {2} attention heads (--attention-heads)",
                                level, channels, heads));
    if (layers <= 0 || layers > 64)
      return fail(llvm::formatv("level {0}'s {1} transformer layers: give 1 "
                                "to 64 (--transformer-layers)",
                                level, layers));
  }
  if (absl::Status status = applyBatchAndInputShape(o, presetName, c);
      !status.ok())
    return status;
  int64_t unit = int64_t(1) << (levels - 1);
  if (c.latentHeight % unit != 0 || c.latentWidth % unit != 0)
    return fail(llvm::formatv("latent {0}×{1} does not halve evenly {2} "
                              "times: with {3} levels, its height and width "
                              "must be multiples of {4}",
                              c.latentHeight, c.latentWidth, levels - 1, levels,
                              unit));
  // What the generic fields mean for a UNet: its first level.
  c.hidden = c.levelChannels.front();
  c.heads = c.levelHeads.front();
  if (absl::Status status = checkUNetSizes(c); !status.ok())
    return status;
  return c;
}

absl::StatusOr<ModelConfig> mlir::sd::makeModelConfig(StringRef presetName,
                                                      const ModelOverrides &o) {
  std::optional<Preset> preset = lookupPreset(presetName);
  if (!preset) {
    std::string known;
    for (StringRef name : getPresetNames())
      known += (known.empty() ? "" : ", ") + name.str();
    return fail("unknown preset '" + presetName + "'; expected one of " +
                known);
  }
  ModelConfig c = preset->config;
  bool isDiT = c.family == ModelFamily::DiT;

  if (o.dtype) {
    if (*o.dtype != "f32" && *o.dtype != "bf16")
      return fail("unknown --dtype '" + *o.dtype + "'; expected f32 or bf16");
    c.bf16 = *o.dtype == "bf16";
  }
  if (o.predictionType) {
    std::optional<PredictionType> type =
        symbolizePredictionType(*o.predictionType);
    if (!type) {
      std::string known;
      for (uint32_t i = 0; i <= getMaxEnumValForPredictionType(); ++i) {
        if (i > 0)
          known += i == getMaxEnumValForPredictionType() ? " or " : ", ";
        known += stringifyPredictionType(static_cast<PredictionType>(i)).str();
      }
      return fail("unknown --prediction-type '" + *o.predictionType +
                  "'; expected " + known);
    }
    c.prediction = *type;
  }
  c.withDenoise = c.withDenoise || o.withDenoise;
  if (c.family == ModelFamily::UNet)
    return makeUNetConfig(o, presetName, c);
  if (o.levelChannels || o.levelHeads || o.levelTransformerLayers ||
      o.layersPerBlock || o.normGroups)
    return fail("--block-channels, --attention-heads, --transformer-layers, "
                "--layers-per-block and --norm-groups apply to UNets "
                "(sd2-base, sdxl, unet-tiny, sdxl-tiny)");

  if (o.depth) {
    if (*o.depth <= 0)
      return fail(llvm::formatv("depth {0} must be positive", *o.depth));
    c.depth = *o.depth;
    // Flux keeps its 1:2 ratio of double- to single-stream blocks.
    if (c.family == ModelFamily::Flux)
      c.singleDepth = 2 * c.depth;
  }
  if (o.singleDepth) {
    if (c.family != ModelFamily::Flux)
      return fail("--single-depth applies to Flux (its single-stream blocks)");
    if (*o.singleDepth < 0)
      return fail(llvm::formatv("single depth {0} must not be negative",
                                *o.singleDepth));
    c.singleDepth = *o.singleDepth;
  }
  if (o.hidden) {
    if (*o.hidden <= 0)
      return fail(llvm::formatv("hidden size {0} must be positive", *o.hidden));
    c.hidden = *o.hidden;
  }
  if (o.heads) {
    if (*o.heads <= 0)
      return fail(llvm::formatv("heads {0} must be positive", *o.heads));
    c.heads = *o.heads;
  }
  if (c.hidden % c.heads != 0)
    return fail(llvm::formatv("hidden size {0} is not divisible by {1} heads",
                              c.hidden, c.heads));
  if (isDiT && c.hidden % 4 != 0)
    return fail(llvm::formatv("hidden size {0} must be a multiple of 4 (the "
                              "2-D sin-cos position embedding)",
                              c.hidden));
  if (!isDiT && c.headDim() % 2 != 0)
    return fail(llvm::formatv("head dimension {0} (hidden {1} / {2} heads) "
                              "must be even for the rotary embedding",
                              c.headDim(), c.hidden, c.heads));
  double ratio = o.mlpRatio.value_or(preset->mlpRatio);
  std::string ratioText;
  llvm::raw_string_ostream(ratioText) << llvm::format("%g", ratio);
  if (!(ratio > 0.0))
    return fail("mlp ratio " + ratioText + " must be positive");
  // Checked before the conversion, which is undefined past int64_t.
  if (static_cast<double>(c.hidden) * ratio >
      static_cast<double>(kMaxTensorElements))
    return fail("mlp ratio " + ratioText + " × hidden size " +
                llvm::Twine(c.hidden) +
                " is too wide an FFN (--hidden, --mlp-ratio)");
  c.mlpHidden = std::llround(static_cast<double>(c.hidden) * ratio);
  if (c.mlpHidden <= 0)
    return fail(llvm::formatv("mlp ratio {0} leaves no FFN width for hidden "
                              "size {1}",
                              ratioText, c.hidden));
  if (o.ffnDim) {
    if (o.mlpRatio)
      return fail("give --mlp-ratio or --ffn-dim, not both");
    if (*o.ffnDim <= 0 || *o.ffnDim > kMaxTensorElements)
      return fail(llvm::formatv("FFN width {0} must be positive", *o.ffnDim));
    c.mlpHidden = *o.ffnDim;
  }

  if (absl::Status status = applyBatchAndInputShape(o, presetName, c);
      !status.ok())
    return status;
  if (absl::Status status = checkSizes(c); !status.ok())
    return status;
  return c;
}

OwningOpRef<ModuleOp> mlir::sd::generateModel(MLIRContext &context,
                                              const ModelConfig &config) {
  modelgen::ModelBuilder mb(context, config);
  switch (config.family) {
  case ModelFamily::DiT:
    modelgen::buildDiT(mb);
    break;
  case ModelFamily::Wan:
    modelgen::buildWan(mb);
    break;
  case ModelFamily::Flux:
    modelgen::buildFlux(mb);
    break;
  case ModelFamily::UNet:
    modelgen::buildUNet(mb);
    break;
  }
  return mb.finish();
}

//===----------------------------------------------------------------------===//
// Statistics
//===----------------------------------------------------------------------===//

namespace {
/// Ops of `func`'s body with calls replaced by their callees' bodies (the
/// callee's return disappears with the call).
int64_t countInlined(func::FuncOp func, SymbolTable &symbols,
                     llvm::DenseMap<Operation *, int64_t> &memo) {
  auto it = memo.find(func);
  if (it != memo.end())
    return it->second;
  int64_t count = 0;
  func.walk([&](Operation *op) {
    if (op == func.getOperation())
      return;
    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      count += callee ? countInlined(callee, symbols, memo) - 1 : 1;
      return;
    }
    ++count;
  });
  memo[func] = count;
  return count;
}
} // namespace

ModelStats mlir::sd::computeModelStats(ModuleOp module) {
  ModelStats stats;
  module.walk([&](Operation *op) {
    if (!isa<ModuleOp, func::FuncOp>(op))
      ++stats.numOps;
  });
  SymbolTable symbols(module);
  auto loss = symbols.lookup<func::FuncOp>("loss");
  if (!loss)
    return stats;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    if (!loss.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName))
      continue;
    auto type = cast<RankedTensorType>(loss.getArgument(i).getType());
    stats.numParams += type.getNumElements();
    ++stats.numParamTensors;
  }
  llvm::DenseMap<Operation *, int64_t> memo;
  stats.numOpsInlined = countInlined(loss, symbols, memo);
  return stats;
}

std::string mlir::sd::formatModelSummary(const ModelConfig &config,
                                         const ModelStats &stats) {
  double n = static_cast<double>(stats.numParams);
  std::string count;
  if (n >= 1e9)
    count = llvm::formatv("{0:F2}B", n / 1e9);
  else if (n >= 1e6)
    count = llvm::formatv("{0:F2}M", n / 1e6);
  else
    count = llvm::formatv("{0:F1}K", n / 1e3);
  std::string summary = llvm::formatv(
      "{0}: {1} parameters ({2} tensors), {3} ops ({4} inlined)", config.preset,
      count, stats.numParamTensors, stats.numOps, stats.numOpsInlined);
  // The reference the preset reproduces, while its sizes are the preset's.
  if (config.publishedParams > 0 && stats.numParams > 0) {
    double published = static_cast<double>(config.publishedParams);
    llvm::raw_string_ostream os(summary);
    os << llvm::format("; published %.2fM (%+.2f%%)", published / 1e6,
                       100.0 * (n - published) / published);
  }
  return summary;
}
