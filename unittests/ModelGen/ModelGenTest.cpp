//===- ModelGenTest.cpp - parameter counts, presets and overrides ---------===//
//
// The parameter count of every preset equals the count derived by hand from
// the PyTorch module definitions (DiT models.py, Wan2.1 model.py, Flux
// model.py/layers.py) and is within 3% of the published size. @denoise has
// @loss's parameters, and @loss is the MSE of @denoise's prediction against
// the target of each prediction type (evaluated in double).
//
//===----------------------------------------------------------------------===//

#include "sd/ModelGen/ModelGen.h"
#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/Evaluator/Evaluator.h"
#include "sd/IR/SDOps.h"
#include "sd/Reference/Random.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

/// Linear layer: weight and bias.
int64_t linear(int64_t in, int64_t out) { return in * out + out; }

/// DiT with patch 2 over `channels` latent channels, `classes` classes and
/// learn_sigma (output channels 2 × channels) or not.
int64_t ditParams(int64_t depth, int64_t d, int64_t channels = 4,
                  int64_t classes = 1000, bool learnSigma = true) {
  int64_t block = linear(d, 3 * d) + linear(d, d) + linear(d, 4 * d) +
                  linear(4 * d, d) + linear(d, 6 * d);
  int64_t embed = linear(2 * 2 * channels, d) + linear(256, d) + linear(d, d) +
                  (classes + 1) * d;
  int64_t final =
      linear(d, 2 * 2 * channels * (learnSigma ? 2 : 1)) + linear(d, 2 * d);
  return depth * block + embed + final;
}

int64_t wanParams(int64_t depth = 40, int64_t d = 5120, int64_t ffn = 13824) {
  int64_t attn = 4 * linear(d, d) + 2 * d; // q, k, v, o, norm_q, norm_k
  int64_t block = 2 * attn + 2 * d /*norm3*/ + linear(d, ffn) + linear(ffn, d) +
                  6 * d /*modulation*/;
  int64_t embed = linear(16 * 2 * 2, d) + linear(4096, d) + linear(d, d) +
                  linear(256, d) + linear(d, d) + linear(d, 6 * d);
  int64_t head = linear(d, 64) + 2 * d;
  return depth * block + embed + head;
}

int64_t fluxParams() {
  int64_t d = 3072, m = 4 * d, hd = 128;
  int64_t stream = linear(d, 6 * d) + linear(d, 3 * d) + 2 * hd + linear(d, d) +
                   linear(d, m) + linear(m, d);
  int64_t single =
      linear(d, 3 * d + m) + linear(d + m, d) + 2 * hd + linear(d, 3 * d);
  int64_t mlpEmbedder256 = linear(256, d) + linear(d, d);
  int64_t embed = linear(64, d) + 2 * mlpEmbedder256 + linear(768, d) +
                  linear(d, d) + linear(4096, d);
  int64_t final = linear(d, 64) + linear(d, 2 * d);
  return 19 * 2 * stream + 38 * single + embed + final;
}

/// diffusers' UNet2DConditionModel with linear projections, counted module
/// by module from its definitions (resnet.py, transformer_2d.py,
/// attention.py, unet_2d_condition.py): `channels` per level, transformer
/// `layers` per level, `attention` per level's down/up blocks (the mid
/// block always), `perBlock` ResNets per down block, text width `ctx`, and
/// SDXL's added embedding of `addedIn` inputs (0: none); 4 latent channels.
int64_t conv(int64_t in, int64_t out, int64_t k) {
  return in * out * k * k + out;
}
int64_t unetParams(const std::vector<int64_t> &channels,
                   const std::vector<int64_t> &layers,
                   const std::vector<bool> &attention, int64_t perBlock,
                   int64_t ctx, int64_t addedIn = 0) {
  int64_t c0 = channels[0], t = 4 * c0;
  auto norm = [](int64_t c) { return 2 * c; };
  auto resnet = [&](int64_t in, int64_t out) {
    return norm(in) + conv(in, out, 3) + linear(t, out) + norm(out) +
           conv(out, out, 3) + (in != out ? conv(in, out, 1) : 0);
  };
  auto transformer = [&](int64_t d, int64_t n) {
    int64_t block = 3 * norm(d) + /*attn1*/ 3 * d * d + linear(d, d) +
                    /*attn2*/ d * d + 2 * ctx * d + linear(d, d) +
                    /*GEGLU*/ linear(d, 8 * d) + linear(4 * d, d);
    return norm(d) + linear(d, d) + n * block + linear(d, d);
  };
  int64_t total = conv(4, c0, 3) + linear(c0, t) + linear(t, t);
  if (addedIn > 0)
    total += linear(addedIn, t) + linear(t, t);
  std::vector<int64_t> skips = {c0};
  int64_t cur = c0, n = static_cast<int64_t>(channels.size());
  for (int64_t l = 0; l < n; ++l) {
    for (int64_t j = 0; j < perBlock; ++j) {
      total += resnet(cur, channels[l]);
      cur = channels[l];
      if (attention[l])
        total += transformer(cur, layers[l]);
      skips.push_back(cur);
    }
    if (l + 1 < n) {
      total += conv(cur, cur, 3);
      skips.push_back(cur);
    }
  }
  total += 2 * resnet(cur, cur) + transformer(cur, layers.back());
  for (int64_t l = n - 1; l >= 0; --l) {
    for (int64_t j = 0; j <= perBlock; ++j) {
      total += resnet(cur + skips.back(), channels[l]);
      skips.pop_back();
      cur = channels[l];
      if (attention[l])
        total += transformer(cur, layers[l]);
    }
    if (l > 0)
      total += conv(cur, cur, 3);
  }
  return total + norm(c0) + conv(c0, 4, 3);
}

class ModelGenTest : public ::testing::Test {
protected:
  ModelGenTest() {
    // The reference evaluator's implementations, for LossIsMseOfDenoise.
    DialectRegistry registry;
    registerEvaluatorInterfaces(registry);
    context.appendDialectRegistry(registry);
  }

  ModelStats generate(StringRef preset, const ModelOverrides &o = {}) {
    auto config = makeModelConfig(preset, o);
    if (!config.ok()) {
      ADD_FAILURE() << config.status();
      return {};
    }
    OwningOpRef<ModuleOp> module = generateModel(context, *config);
    if (!module) {
      ADD_FAILURE() << preset.str() << " does not verify";
      return {};
    }
    return computeModelStats(*module);
  }

  MLIRContext context;
};

TEST_F(ModelGenTest, ParameterCountsMatchThePyTorchModels) {
  struct Case {
    const char *preset;
    int64_t expected;
    double published;
  } cases[] = {
      {"dit-s2", ditParams(12, 384), 33.0e6},
      {"dit-b2", ditParams(12, 768), 130e6},
      {"dit-xl2", ditParams(28, 1152), 675e6},
      {"wan2.1-14b", wanParams(), 14.0e9},
      // "1.3B" is the model's name; its released bf16 weights are 2.84 GB,
      // 1.42B parameters, which this architecture has exactly.
      {"wan2.1-1.3b", wanParams(30, 1536, 8960), 1.42e9},
      {"flux-dev", fluxParams(), 11.9e9},
      // The released UNets' exact counts.
      {"sd2-base",
       unetParams({320, 640, 1280, 1280}, {1, 1, 1, 1},
                  {true, true, true, false}, 2, 1024),
       865910724},
      {"sdxl",
       unetParams({320, 640, 1280}, {1, 2, 10}, {false, true, true}, 2, 2048,
                  1280 + 6 * 256),
       2567463684},
  };
  for (const Case &c : cases) {
    ModelStats stats = generate(c.preset);
    EXPECT_EQ(stats.numParams, c.expected) << c.preset;
    double off = std::abs(static_cast<double>(stats.numParams) - c.published);
    EXPECT_LT(off / c.published, 0.03) << c.preset;
  }
}

TEST_F(ModelGenTest, UNetPresetsHaveTheReleasedSizes) {
  EXPECT_EQ(generate("sd2-base").numParams, 865910724);
  EXPECT_EQ(generate("sdxl").numParams, 2567463684);
  EXPECT_EQ(generate("unet-tiny").numParams,
            unetParams({32, 64}, {1, 1}, {true, false}, 1, 32));
  EXPECT_EQ(generate("sdxl-tiny").numParams,
            unetParams({32, 64}, {1, 2}, {false, true}, 1, 32, 16 + 6 * 8));
  auto sdxl = makeModelConfig("sdxl", {});
  ASSERT_TRUE(sdxl.ok()) << sdxl.status();
  EXPECT_EQ(sdxl->latentHeight, 128);
  EXPECT_EQ(sdxl->textLength, 77);
  EXPECT_EQ(sdxl->prediction, PredictionType::epsilon);
  EXPECT_EQ(formatModelSummary(*sdxl, generate("sdxl")).substr(0, 20),
            "sdxl: 2.57B paramete");
  EXPECT_NE(formatModelSummary(*sdxl, generate("sdxl"))
                .find("; published 2567.46M (+0.00%)"),
            std::string::npos);
}

TEST_F(ModelGenTest, UNetOverrides) {
  ModelOverrides o;
  o.levelChannels = std::vector<int64_t>{16, 32, 64};
  o.levelHeads = std::vector<int64_t>{1, 2, 4};
  o.levelTransformerLayers = std::vector<int64_t>{1, 1, 2};
  o.layersPerBlock = 2;
  o.normGroups = 4;
  o.latentSize = 16;
  o.textDim = 24;
  auto config = makeModelConfig("sd2-base", o);
  ASSERT_TRUE(config.ok()) << config.status();
  // SD 2's pattern: no attention at the last level.
  EXPECT_EQ(config->levelAttention, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(config->publishedParams, 0);
  EXPECT_EQ(generate("sd2-base", o).numParams,
            unetParams({16, 32, 64}, {1, 1, 2}, {true, true, false}, 2, 24));
  auto xl = makeModelConfig("sdxl", o);
  ASSERT_TRUE(xl.ok()) << xl.status();
  EXPECT_EQ(xl->levelAttention, (std::vector<bool>{false, true, true}));
}

TEST_F(ModelGenTest, DitDigitsPreset) {
  auto config = makeModelConfig("dit-digits", {});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->batch, 64);
  EXPECT_EQ(config->numPatches(), 16);
  EXPECT_EQ(config->prediction, PredictionType::epsilon);
  EXPECT_TRUE(config->withDenoise);
  ModelStats stats = generate("dit-digits");
  EXPECT_EQ(stats.numParams, ditParams(4, 128, 1, 10, false));
  EXPECT_EQ(stats.numParams, 1272324);
  EXPECT_EQ(stats.numParamTensors, 7 + 4 * 10 + 4);
}

TEST_F(ModelGenTest, DitTinyShape) {
  ModelStats stats = generate("dit-tiny");
  EXPECT_EQ(stats.numParams, ditParams(2, 64));
  // 4 embedder tensors + 3 + 10 per block + 4 final.
  EXPECT_EQ(stats.numParamTensors, 7 + 2 * 10 + 4);
  EXPECT_GT(stats.numOpsInlined, stats.numOps);
}

// Fused projections (qkv, adaLN, Flux's linear1/linear2) keep their
// weights whole: every slice takes a value computed from the batch, never
// a function argument of static shape (parameters, tables).
TEST_F(ModelGenTest, NoWeightIsSlicedAlongItsRows) {
  ModelOverrides small;
  small.depth = 1;
  small.hidden = 64;
  small.heads = 2;
  ModelOverrides video = small;
  video.frames = 5;
  video.height = 32;
  video.width = 32;
  video.textLength = 4;
  ModelOverrides image = small;
  image.height = 32;
  image.width = 32;
  image.textLength = 4;
  for (auto [preset, overrides] :
       {std::pair{"dit-tiny", ModelOverrides{}}, std::pair{"wan2.1-14b", video},
        std::pair{"flux-dev", image}}) {
    auto config = makeModelConfig(preset, overrides);
    ASSERT_TRUE(config.ok()) << config.status();
    OwningOpRef<ModuleOp> module = generateModel(context, *config);
    ASSERT_TRUE(module) << preset;
    int64_t slices = 0, weightSlices = 0;
    module->walk([&](SliceOp slice) {
      ++slices;
      auto arg = dyn_cast<BlockArgument>(slice.getOperand());
      auto type = cast<RankedTensorType>(slice.getOperand().getType());
      if (!arg || !type.hasStaticShape())
        return;
      // Only Flux's single-block proj_out [D, D + mlp], along its input
      // width (axes [embed, _]): never the rows FSDP shards.
      ++weightSlices;
      EXPECT_EQ(std::string(preset), "flux-dev")
          << preset << " slices argument #" << arg.getArgNumber();
      EXPECT_EQ(slice.getStart()[0], 0) << preset;
      EXPECT_EQ(slice.getLimit()[0], type.getDimSize(0)) << preset;
    });
    // The chunks of the modulation vectors, at least.
    EXPECT_GT(slices, 0) << preset;
    // proj_out's two column blocks, in the one single-block function.
    EXPECT_EQ(weightSlices, std::string(preset) == "flux-dev" ? 2 : 0)
        << preset;
  }
}

TEST_F(ModelGenTest, PresetGeometry) {
  auto wan = makeModelConfig("wan2.1-14b", {});
  ASSERT_TRUE(wan.ok()) << wan.status();
  EXPECT_EQ(wan->latentFrames, 21);
  EXPECT_EQ(wan->latentHeight, 90);
  EXPECT_EQ(wan->latentWidth, 160);
  EXPECT_EQ(wan->numPatches(), 75600);
  EXPECT_EQ(wan->mlpHidden, 13824);
  auto flux = makeModelConfig("flux-dev", {});
  ASSERT_TRUE(flux.ok()) << flux.status();
  EXPECT_EQ(flux->numPatches(), 4096);
  EXPECT_EQ(flux->singleDepth, 38);
}

TEST_F(ModelGenTest, Overrides) {
  ModelOverrides o;
  o.depth = 3;
  o.hidden = 256;
  o.heads = 4;
  o.mlpRatio = 2.0;
  o.frames = 9;
  o.height = 64;
  o.width = 128;
  o.textLength = 16;
  auto wan = makeModelConfig("wan2.1-14b", o);
  ASSERT_TRUE(wan.ok()) << wan.status();
  EXPECT_EQ(wan->depth, 3);
  EXPECT_EQ(wan->mlpHidden, 512);
  EXPECT_EQ(wan->latentFrames, 3);
  EXPECT_EQ(wan->latentHeight, 8);
  EXPECT_EQ(wan->latentWidth, 16);
  EXPECT_EQ(wan->textLength, 16);

  ModelOverrides f;
  f.depth = 2;
  auto flux = makeModelConfig("flux-dev", f);
  ASSERT_TRUE(flux.ok()) << flux.status();
  EXPECT_EQ(flux->singleDepth, 4);
}

/// The error message of an invalid configuration.
std::string errorOf(StringRef preset, const ModelOverrides &o) {
  auto config = makeModelConfig(preset, o);
  if (config.ok())
    return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(ModelConfigErrors, NameTheBadValue) {
  EXPECT_EQ(
      errorOf("dit-xs", {}),
      "unknown preset 'dit-xs'; expected one of dit-tiny, dit-digits, "
      "dit-s2, dit-b2, dit-xl2, wan2.1-14b, wan2.1-1.3b, wan-long, flux-dev, "
      "sd2-base, sdxl, unet-tiny, sdxl-tiny");
  ModelOverrides heads;
  heads.heads = 5;
  EXPECT_EQ(errorOf("dit-s2", heads),
            "hidden size 384 is not divisible by 5 heads");
  ModelOverrides depth;
  depth.depth = 0;
  EXPECT_EQ(errorOf("dit-s2", depth), "depth 0 must be positive");
  ModelOverrides latent;
  latent.latentSize = 33;
  EXPECT_EQ(errorOf("dit-s2", latent),
            "latent size 33 is not divisible by the patch size 2");
  ModelOverrides dtype;
  dtype.dtype = "f16";
  EXPECT_EQ(errorOf("dit-s2", dtype),
            "unknown --dtype 'f16'; expected f32 or bf16");
  ModelOverrides frames;
  frames.frames = 80;
  EXPECT_NE(errorOf("wan2.1-14b", frames).find("frames 80 must be 4k+1"),
            std::string::npos);
}

TEST(ModelConfigErrors, UNetsNameTheBadValue) {
  ModelOverrides levels;
  levels.levelChannels = std::vector<int64_t>{32, 64, 128};
  EXPECT_EQ(errorOf("unet-tiny", levels),
            "--block-channels [32, 64, 128] has 3 levels, but "
            "--attention-heads [2, 4] and --transformer-layers [1, 1] must "
            "have one entry per level");
  ModelOverrides groups;
  groups.normGroups = 5;
  EXPECT_EQ(errorOf("unet-tiny", groups),
            "level 0's 32 channels are not divisible into 5 norm groups "
            "(--norm-groups)");
  ModelOverrides heads;
  heads.levelHeads = std::vector<int64_t>{3, 4};
  EXPECT_EQ(errorOf("unet-tiny", heads),
            "level 0's 32 channels are not divisible by 3 attention heads "
            "(--attention-heads)");
  ModelOverrides latent;
  latent.latentSize = 9;
  EXPECT_EQ(errorOf("unet-tiny", latent),
            "latent 9×9 does not halve evenly 1 times: with 2 levels, its "
            "height and width must be multiples of 2");
  ModelOverrides depth;
  depth.depth = 3;
  EXPECT_NE(errorOf("sdxl", depth).find("--depth, --hidden, --heads"),
            std::string::npos);
  ModelOverrides unetFlag;
  unetFlag.normGroups = 8;
  EXPECT_EQ(errorOf("dit-s2", unetFlag),
            "--block-channels, --attention-heads, --transformer-layers, "
            "--layers-per-block and --norm-groups apply to UNets (sd2-base, "
            "sdxl, unet-tiny, sdxl-tiny)");
  ModelOverrides pooled;
  pooled.pooledDim = 8;
  EXPECT_EQ(errorOf("unet-tiny", pooled),
            "--pooled-dim applies to Flux and SDXL (their pooled text vector)");
}

TEST(PredictionTypes, RoundTrip) {
  for (PredictionType type :
       {PredictionType::epsilon, PredictionType::v_prediction,
        PredictionType::flow})
    EXPECT_EQ(symbolizePredictionType(stringifyPredictionType(type)), type);
  EXPECT_EQ(stringifyPredictionType(PredictionType::v_prediction),
            "v_prediction");
  EXPECT_EQ(symbolizePredictionType("v"), std::nullopt);
  ModelOverrides v;
  v.predictionType = "v_prediction";
  auto config = makeModelConfig("dit-digits", v);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->prediction, PredictionType::v_prediction);
  ModelOverrides bad;
  bad.predictionType = "sample";
  EXPECT_EQ(errorOf("dit-s2", bad), "unknown --prediction-type 'sample'; "
                                    "expected epsilon, v_prediction or flow");
}

//===----------------------------------------------------------------------===//
// @denoise
//===----------------------------------------------------------------------===//

/// Small static-batch models of each family with @denoise.
struct DenoiseCase {
  const char *preset;
  ModelOverrides overrides;
};

std::vector<DenoiseCase> denoiseCases() {
  ModelOverrides small;
  small.depth = 1;
  small.hidden = 32;
  small.heads = 2;
  small.batch = 2;
  small.staticBatch = true;
  small.withDenoise = true;
  ModelOverrides dit = small;
  dit.latentSize = 4;
  ModelOverrides video = small;
  video.frames = 5;
  video.height = 32;
  video.width = 32;
  video.textLength = 3;
  ModelOverrides image = small;
  image.height = 32;
  image.width = 32;
  image.textLength = 3;
  ModelOverrides unet;
  unet.batch = 2;
  unet.staticBatch = true;
  unet.withDenoise = true;
  unet.latentSize = 4;
  unet.textLength = 3;
  return {{"dit-digits", small}, {"dit-tiny", dit},   {"wan2.1-14b", video},
          {"flux-dev", image},   {"unet-tiny", unet}, {"sdxl-tiny", unet}};
}

/// @denoise takes @loss's parameters (types and attributes, in order), then
/// the noised latents and @loss's inputs after the noise, and returns the
/// latents' type; it calls the same block functions.
TEST_F(ModelGenTest, DenoiseSharesTheParameters) {
  for (const DenoiseCase &c : denoiseCases()) {
    auto config = makeModelConfig(c.preset, c.overrides);
    ASSERT_TRUE(config.ok()) << config.status();
    OwningOpRef<ModuleOp> module = generateModel(context, *config);
    ASSERT_TRUE(module) << c.preset;
    auto loss = module->lookupSymbol<func::FuncOp>("loss");
    auto denoise = module->lookupSymbol<func::FuncOp>("denoise");
    ASSERT_TRUE(loss && denoise) << c.preset;
    // @loss: params, latents, noise, rest; @denoise: params, x_t, rest.
    unsigned numLoss = loss.getNumArguments();
    ASSERT_EQ(denoise.getNumArguments() + 1, numLoss) << c.preset;
    for (unsigned i = 0, j = 0; i < numLoss; ++i) {
      auto role = loss.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
      if (role && role.getKind() == InputKind::noise)
        continue;
      EXPECT_EQ(loss.getArgument(i).getType(), denoise.getArgument(j).getType())
          << c.preset << " argument #" << i;
      EXPECT_EQ(loss.getArgAttrDict(i), denoise.getArgAttrDict(j))
          << c.preset << " argument #" << i;
      ++j;
    }
    auto latents = llvm::find_if(loss.getArguments(), [&](BlockArgument arg) {
      auto role = loss.getArgAttrOfType<InputAttr>(arg.getArgNumber(),
                                                   SDDialect::kRoleAttrName);
      return role && role.getKind() == InputKind::latents;
    });
    ASSERT_NE(latents, loss.getArguments().end());
    ASSERT_EQ(denoise.getNumResults(), 1u) << c.preset;
    EXPECT_EQ(denoise.getResultTypes()[0], latents->getType()) << c.preset;
    int64_t calls = 0;
    denoise.walk([&](func::CallOp) { ++calls; });
    EXPECT_GT(calls, 0) << c.preset;
  }
}

/// Without --with-denoise there is no @denoise (the bundled models stay as
/// they are); dit-digits always has one.
TEST_F(ModelGenTest, DenoiseOnlyWhenAsked) {
  for (auto [preset, expected] :
       {std::pair{"dit-tiny", false}, std::pair{"dit-digits", true}}) {
    auto config = makeModelConfig(preset, {});
    ASSERT_TRUE(config.ok()) << config.status();
    OwningOpRef<ModuleOp> module = generateModel(context, *config);
    ASSERT_TRUE(module) << preset;
    EXPECT_EQ(static_cast<bool>(module->lookupSymbol("denoise")), expected)
        << preset;
  }
}

/// Arguments of `func` from their roles, with every parameter drawn from
/// normal(0.2) so that the zero-initialized layers (adaLN-Zero, the final
/// projections) do not make the prediction zero.
std::vector<::sd::ref::Tensor> randomArguments(func::FuncOp func) {
  auto args = initializeArguments(func, /*seed=*/7);
  if (failed(args)) {
    ADD_FAILURE() << "cannot initialize the arguments of @"
                  << func.getSymName().str();
    return {};
  }
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (!func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName))
      continue;
    ::sd::ref::Tensor &tensor = (*args)[i];
    for (int64_t k = 0; k < tensor.numElements(); ++k)
      tensor[k] = 0.2 * ::sd::ref::normalAt(1000 + i, k);
  }
  return std::move(*args);
}

/// x_t and the target of `type` from x0, noise and t [B], as @loss computes
/// them (the angle with the f32 constant π/2 the program holds).
std::pair<::sd::ref::Tensor, ::sd::ref::Tensor>
noised(PredictionType type, const ::sd::ref::Tensor &x0,
       const ::sd::ref::Tensor &noise, const ::sd::ref::Tensor &t) {
  ::sd::ref::Tensor xt = x0, target = x0;
  int64_t perSample = x0.numElements() / t.numElements();
  double halfPi = static_cast<float>(M_PI / 2);
  for (int64_t i = 0; i < x0.numElements(); ++i) {
    double ti = t[i / perSample], a = x0[i], n = noise[i];
    double c = std::cos(ti * halfPi), s = std::sin(ti * halfPi);
    switch (type) {
    case PredictionType::flow:
      xt[i] = a + ti * (n - a);
      target[i] = n - a;
      break;
    case PredictionType::epsilon:
      xt[i] = c * a + s * n;
      target[i] = n;
      break;
    case PredictionType::v_prediction:
      xt[i] = c * a + s * n;
      target[i] = c * n - s * a;
      break;
    }
  }
  return {xt, target};
}

/// @loss(x0, noise, t, ...) = mean((@denoise(x_t, t, ...) − target)²) for
/// every prediction type and family, evaluated in double.
TEST_F(ModelGenTest, LossIsMseOfDenoise) {
  for (const DenoiseCase &c : denoiseCases()) {
    for (PredictionType type :
         {PredictionType::epsilon, PredictionType::v_prediction,
          PredictionType::flow}) {
      SCOPED_TRACE(std::string(c.preset) + " " +
                   stringifyPredictionType(type).str());
      ModelOverrides o = c.overrides;
      o.predictionType = stringifyPredictionType(type).str();
      auto config = makeModelConfig(c.preset, o);
      ASSERT_TRUE(config.ok()) << config.status();
      OwningOpRef<ModuleOp> module = generateModel(context, *config);
      ASSERT_TRUE(module);
      auto loss = module->lookupSymbol<func::FuncOp>("loss");
      auto denoise = module->lookupSymbol<func::FuncOp>("denoise");
      ASSERT_TRUE(loss && denoise);
      auto named = loss->getAttrOfType<PredictionTypeAttr>(
          SDDialect::kPredictionTypeAttrName);
      ASSERT_TRUE(named);
      EXPECT_EQ(named.getValue(), type);

      std::vector<::sd::ref::Tensor> args = randomArguments(loss);
      ASSERT_EQ(args.size(), loss.getNumArguments());
      // args: the parameters [0, latents), x0, noise, t, conditions...
      unsigned latents = 0;
      while (
          loss.getArgAttrOfType<ParamAttr>(latents, SDDialect::kRoleAttrName))
        ++latents;
      auto [xt, target] =
          noised(type, args[latents], args[latents + 1], args[latents + 2]);
      std::vector<::sd::ref::Tensor> denoiseArgs(args.begin(),
                                                 args.begin() + latents);
      denoiseArgs.push_back(xt);
      denoiseArgs.insert(denoiseArgs.end(), args.begin() + latents + 2,
                         args.end());

      EvalOptions exact{Precision::F64};
      auto lossValue = evaluate(loss, args, exact);
      auto pred = evaluate(denoise, denoiseArgs, exact);
      ASSERT_TRUE(succeeded(lossValue) && succeeded(pred));
      const ::sd::ref::Tensor &p = pred->front();
      ASSERT_EQ(p.shape(), target.shape());
      double sum = 0.0;
      for (int64_t i = 0; i < p.numElements(); ++i)
        sum += (p[i] - target[i]) * (p[i] - target[i]);
      double mse = sum / static_cast<double>(p.numElements());
      EXPECT_GT(mse, 0.0);
      EXPECT_NEAR(lossValue->front()[0], mse, 1e-9 * mse);
    }
  }
}

} // namespace
