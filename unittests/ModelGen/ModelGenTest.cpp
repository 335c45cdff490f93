//===- ModelGenTest.cpp - parameter counts, presets and overrides ---------===//
//
// The parameter count of every preset equals the count derived by hand from
// the PyTorch module definitions (DiT models.py, Wan2.1 model.py, Flux
// model.py/layers.py) and is within 3% of the published size.
//
//===----------------------------------------------------------------------===//

#include "sd/ModelGen/ModelGen.h"
#include "sd/IR/SDOps.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

/// Linear layer: weight and bias.
int64_t linear(int64_t in, int64_t out) { return in * out + out; }

int64_t ditParams(int64_t depth, int64_t d) {
  int64_t block = linear(d, 3 * d) + linear(d, d) + linear(d, 4 * d) +
                  linear(4 * d, d) + linear(d, 6 * d);
  int64_t embed =
      linear(2 * 2 * 4, d) + linear(256, d) + linear(d, d) + 1001 * d;
  int64_t final = linear(d, 2 * 2 * 8) + linear(d, 2 * d);
  return depth * block + embed + final;
}

int64_t wanParams() {
  int64_t d = 5120, ffn = 13824;
  int64_t attn = 4 * linear(d, d) + 2 * d; // q, k, v, o, norm_q, norm_k
  int64_t block = 2 * attn + 2 * d /*norm3*/ + linear(d, ffn) + linear(ffn, d) +
                  6 * d /*modulation*/;
  int64_t embed = linear(16 * 2 * 2, d) + linear(4096, d) + linear(d, d) +
                  linear(256, d) + linear(d, d) + linear(d, 6 * d);
  int64_t head = linear(d, 64) + 2 * d;
  return 40 * block + embed + head;
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

class ModelGenTest : public ::testing::Test {
protected:
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
      {"flux-dev", fluxParams(), 11.9e9},
  };
  for (const Case &c : cases) {
    ModelStats stats = generate(c.preset);
    EXPECT_EQ(stats.numParams, c.expected) << c.preset;
    double off = std::abs(static_cast<double>(stats.numParams) - c.published);
    EXPECT_LT(off / c.published, 0.03) << c.preset;
  }
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
TEST_F(ModelGenTest, NoWeightIsSliced) {
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
    int64_t slices = 0;
    module->walk([&](SliceOp slice) {
      ++slices;
      auto arg = dyn_cast<BlockArgument>(slice.getOperand());
      auto type = cast<RankedTensorType>(slice.getOperand().getType());
      EXPECT_FALSE(arg && type.hasStaticShape())
          << preset << " slices argument #" << arg.getArgNumber();
    });
    // The chunks of the modulation vectors, at least.
    EXPECT_GT(slices, 0) << preset;
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
  EXPECT_EQ(errorOf("dit-xs", {}),
            "unknown preset 'dit-xs'; expected one of dit-tiny, dit-s2, "
            "dit-b2, dit-xl2, wan2.1-14b, wan-long, flux-dev");
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

} // namespace
