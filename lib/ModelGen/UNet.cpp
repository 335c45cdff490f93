//===- UNet.cpp - SD 2 and SDXL UNets -------------------------------------===//
//
// As diffusers' UNet2DConditionModel with linear projections in its
// transformers (SD 2, SDXL): conv_in; the sinusoidal time features and the
// time embedding (and SDXL's "text_time" added embedding of the pooled
// text and the six size and crop ids); down blocks of ResNet blocks (group
// norm, SiLU, 3×3 convolutions, the time embedding added per channel, a
// 1×1 shortcut where the channels change), Transformer2DModels (group norm,
// proj_in, BasicTransformerBlocks of self-attention, cross-attention to the
// text and a GEGLU feed-forward, proj_out, the residual) and a stride-2
// convolution; the mid block; up blocks that concatenate the down path's
// outputs (skip connections) before each ResNet block and upsample by
// nearest neighbour and a 3×3 convolution; and the output norm and conv.
// Activations are NHWC, so the transformer's tokens [B, H·W, C] are a
// reshape. Parameters have diffusers' names and PyTorch's layouts (a conv
// weight [Cout, Cin, KH, KW], transposed to the op's HWIO where it is
// used), so released UNet checkpoints load as they are.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include <string>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

namespace {

/// Group-norm epsilons: ResNet blocks and the output norm use the model's
/// norm_eps; Transformer2DModel's input norm its own.
constexpr double kNormEps = 1e-5;
constexpr double kTransformerNormEps = 1e-6;

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

int64_t channelsOf(Value value) { return shapeOf(value).back(); }

/// The time embedding's width (diffusers: 4 × block_out_channels[0]).
int64_t timeWidth(const ModelConfig &c) { return 4 * c.levelChannels[0]; }

void addNorm(ParamSpecs &specs, const std::string &name, int64_t channels) {
  addParam(specs, name + ".weight", {channels}, {"norm"}, InitKind::ones);
  addParam(specs, name + ".bias", {channels}, {"norm"}, InitKind::zeros);
}

/// ResnetBlock2D's parameters, in diffusers' order.
ParamSpecs resnetParams(const ModelConfig &c, int64_t in, int64_t out) {
  ParamSpecs specs;
  addNorm(specs, "norm1", in);
  addConv(specs, "conv1", in, out, 3);
  addLinear(specs, "time_emb_proj", timeWidth(c), out, "embed", "_");
  addNorm(specs, "norm2", out);
  addConv(specs, "conv2", out, out, 3);
  if (in != out)
    addConv(specs, "conv_shortcut", in, out, 1);
  return specs;
}

/// (x [B, H, W, in], SiLU(temb) [B, T]) → [B, H, W, out].
SmallVector<Value> resnetBlock(FnBuilder &f, const ModelConfig &c,
                               ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], embSilu = in[1];
  auto param = [&](StringRef name) { return p.lookup(name); };
  Value h = f.silu(f.groupNorm(x, param("norm1.weight"), param("norm1.bias"),
                               c.normGroups, kNormEps));
  h = f.conv2d(h, param("conv1.weight"), param("conv1.bias"), 1, 1);
  Value t = f.linear(embSilu, param("time_emb_proj.weight"),
                     param("time_emb_proj.bias"));
  h = f.add(h, f.broadcast(t, shapeOf(h), {0, 3}));
  h = f.silu(f.groupNorm(h, param("norm2.weight"), param("norm2.bias"),
                         c.normGroups, kNormEps));
  h = f.conv2d(h, param("conv2.weight"), param("conv2.bias"), 1, 1);
  Value shortcut = x;
  if (Value w = param("conv_shortcut.weight"))
    shortcut = f.conv2d(x, w, param("conv_shortcut.bias"), 1, 0);
  return {f.name(f.add(shortcut, h), "hidden_states")};
}

/// An Attention's projections: q, k, v without bias, to_out.0 with.
void addAttentionParams(ParamSpecs &specs, const std::string &prefix,
                        int64_t dim, int64_t keyDim) {
  auto noBias = [&](const char *proj, int64_t in) {
    addLinear(specs, prefix + proj, in, dim, "embed", "heads");
    specs.pop_back();
  };
  noBias(".to_q", dim);
  noBias(".to_k", keyDim);
  noBias(".to_v", keyDim);
  addLinear(specs, prefix + ".to_out.0", dim, dim, "heads", "embed");
}

/// BasicTransformerBlock's parameters, in diffusers' order.
ParamSpecs transformerBlockParams(const ModelConfig &c, int64_t dim) {
  ParamSpecs specs;
  addNorm(specs, "norm1", dim);
  addAttentionParams(specs, "attn1", dim, dim);
  addNorm(specs, "norm2", dim);
  addAttentionParams(specs, "attn2", dim, c.textDim);
  addNorm(specs, "norm3", dim);
  // GEGLU: one projection to [hidden | gate], each 4·dim wide.
  addFusedLinear(specs, "ff.net.0.proj", dim, 2, 4 * dim, "embed", "mlp");
  addLinear(specs, "ff.net.2", 4 * dim, dim, "mlp", "embed");
  return specs;
}

/// Attention `prefix` of x [B, S, dim] over `context` (or x).
Value unetAttention(FnBuilder &f, const ParamMap &p, StringRef prefix,
                    int64_t heads, Value x, Value context) {
  auto param = [&](StringRef name) {
    return p.lookup((prefix + "." + name).str());
  };
  Value kvInput = context ? context : x;
  Value q = f.name(f.linear(x, param("to_q.weight"), {}), "query_proj");
  Value k = f.name(f.linear(kvInput, param("to_k.weight"), {}), "key_proj");
  Value v = f.name(f.linear(kvInput, param("to_v.weight"), {}), "value_proj");
  Value q4 = f.name(headsFirst(f, splitHeads(f, q, heads)), "xq_out");
  Value k4 = f.name(headsFirst(f, splitHeads(f, k, heads)), "xk_out");
  Value v4 = headsFirst(f, splitHeads(f, v, heads));
  Value o = mergeHeads(f, f.attention(q4, k4, v4, /*selfAttention=*/!context));
  return f.linear(o, param("to_out.0.weight"), param("to_out.0.bias"));
}

/// (x [B, S, dim], context [B, L, text]) → x: self-attention, cross-
/// attention and the GEGLU feed-forward, each after a layer norm and added
/// to its input.
SmallVector<Value> transformerBlock(FnBuilder &f, int64_t heads,
                                    ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], context = in[1];
  auto norm = [&](StringRef name, Value value) {
    return f.layerNorm(value, p.lookup((name + ".weight").str()),
                       p.lookup((name + ".bias").str()), kNormEps);
  };
  x = f.add(x, f.name(unetAttention(f, p, "attn1", heads, norm("norm1", x), {}),
                      "self_attn"));
  x = f.add(
      x, f.name(unetAttention(f, p, "attn2", heads, norm("norm2", x), context),
                "cross_attn"));
  SmallVector<Value> geglu =
      linearChunks(f, norm("norm3", x), p.lookup("ff.net.0.proj.weight"),
                   p.lookup("ff.net.0.proj.bias"));
  Value act = f.name(f.mul(geglu[0], f.gelu(geglu[1], /*approximate=*/false)),
                     "ffn_activation");
  Value y =
      f.linear(act, p.lookup("ff.net.2.weight"), p.lookup("ff.net.2.bias"));
  return {f.name(f.add(x, y), "hidden_states")};
}

/// Builds the network into the current model function: declares the
/// parameters (names prefixed as diffusers' state_dict) and calls the
/// shared block functions, one per distinct shape.
class UNetWriter {
public:
  UNetWriter(ModelBuilder &mb) : mb(mb), c(mb.getConfig()), f(mb.fn()) {}

  Value predict(Value xt, Value t, Value context, Value pooled, Value ids) {
    ParamSpecs embedSpecs;
    int64_t c0 = c.levelChannels[0], tw = timeWidth(c);
    addConv(embedSpecs, "conv_in", c.latentChannels, c0, 3);
    addLinear(embedSpecs, "time_embedding.linear_1", c0, tw, "embed", "mlp");
    addLinear(embedSpecs, "time_embedding.linear_2", tw, tw, "mlp", "embed");
    int64_t addedIn = c.pooledDim + 6 * c.addTimeDim;
    if (c.addTimeDim > 0) {
      addLinear(embedSpecs, "add_embedding.linear_1", addedIn, tw, "embed",
                "mlp");
      addLinear(embedSpecs, "add_embedding.linear_2", tw, tw, "mlp", "embed");
    }
    ParamMap ep = mb.params(embedSpecs);
    auto embedLinear = [&](const std::string &name, Value in) {
      return f.linear(in, ep.lookup(name + ".weight"),
                      ep.lookup(name + ".bias"));
    };
    auto timeMlp = [&](const std::string &name, Value in) {
      return embedLinear(name + ".linear_2",
                         f.silu(embedLinear(name + ".linear_1", in)));
    };
    Value emb = timeMlp("time_embedding", timestepEmbedding(f, t, c0));
    if (c.addTimeDim > 0) {
      Value added = f.concat(
          {f.convert(pooled, f.getDType()), idEmbedding(f, ids, c.addTimeDim)},
          1);
      emb = f.add(emb, timeMlp("add_embedding", added));
    }
    // Every ResNet block uses the embedding through SiLU: compute it once.
    embSilu = f.silu(emb);
    textContext = context;

    Value h = f.conv2d(xt, ep.lookup("conv_in.weight"),
                       ep.lookup("conv_in.bias"), 1, 1);
    SmallVector<Value> skips = {h};
    int64_t levels = static_cast<int64_t>(c.levelChannels.size());
    for (int64_t level = 0; level < levels; ++level) {
      std::string prefix = "down_blocks." + std::to_string(level) + ".";
      int64_t out = c.levelChannels[level];
      for (int64_t j = 0; j < c.layersPerBlock; ++j) {
        h = resnet(h, out, prefix + "resnets." + std::to_string(j) + ".");
        if (c.levelAttention[level])
          h = transformer(h, level,
                          prefix + "attentions." + std::to_string(j) + ".");
        skips.push_back(h);
      }
      if (level + 1 < levels) {
        h = conv(h, prefix + "downsamplers.0.conv", out, 3, 2);
        skips.push_back(h);
      }
    }

    h = resnet(h, c.levelChannels.back(), "mid_block.resnets.0.");
    h = transformer(h, levels - 1, "mid_block.attentions.0.");
    h = resnet(h, c.levelChannels.back(), "mid_block.resnets.1.");

    for (int64_t up = 0; up < levels; ++up) {
      int64_t level = levels - 1 - up;
      std::string prefix = "up_blocks." + std::to_string(up) + ".";
      int64_t out = c.levelChannels[level];
      for (int64_t j = 0; j <= c.layersPerBlock; ++j) {
        h = f.concat({h, skips.pop_back_val()}, 3);
        h = resnet(h, out, prefix + "resnets." + std::to_string(j) + ".");
        if (c.levelAttention[level])
          h = transformer(h, level,
                          prefix + "attentions." + std::to_string(j) + ".");
      }
      if (level > 0)
        h = conv(f.upsampleNearest(h, 2), prefix + "upsamplers.0.conv", out, 3,
                 1);
    }

    ParamSpecs headSpecs;
    addNorm(headSpecs, "conv_norm_out", c0);
    addConv(headSpecs, "conv_out", c0, c.outChannels, 3);
    ParamMap hp = mb.params(headSpecs);
    h = f.silu(f.groupNorm(h, hp.lookup("conv_norm_out.weight"),
                           hp.lookup("conv_norm_out.bias"), c.normGroups,
                           kNormEps));
    return f.conv2d(h, hp.lookup("conv_out.weight"), hp.lookup("conv_out.bias"),
                    1, 1);
  }

private:
  /// A ResNet block from h's channels to `out`, through
  /// @resnet_<in>_<out>_<H>x<W>.
  Value resnet(Value h, int64_t out, const std::string &prefix) {
    int64_t in = channelsOf(h);
    ArrayRef<int64_t> shape = shapeOf(h);
    ParamSpecs specs = resnetParams(c, in, out);
    std::string name = "resnet_" + std::to_string(in) + "_" +
                       std::to_string(out) + "_" + std::to_string(shape[1]) +
                       "x" + std::to_string(shape[2]);
    SmallVector<Value> leading = {h, embSilu};
    func::FuncOp block = mb.blockFunction(
        name, ValueRange(leading).getTypes(), specs,
        [&](FnBuilder &bf, ArrayRef<Value> args, const ParamMap &bp) {
          return resnetBlock(bf, c, args, bp);
        });
    return mb.callBlock(block, leading, specs, prefix)[0];
  }

  /// A Transformer2DModel of level `level`'s heads and depth: group norm,
  /// proj_in, the blocks (@transformer_<C>_<H>x<W>), proj_out, the residual.
  Value transformer(Value h, int64_t level, const std::string &prefix) {
    ArrayRef<int64_t> shape = shapeOf(h);
    int64_t b = shape[0], height = shape[1], width = shape[2], dim = shape[3];
    ParamSpecs outer;
    addNorm(outer, "norm", dim);
    addLinear(outer, "proj_in", dim, dim, "embed", "_");
    ParamMap op = mb.params(outer, prefix);
    Value x = f.groupNorm(h, op.lookup("norm.weight"), op.lookup("norm.bias"),
                          c.normGroups, kTransformerNormEps);
    x = f.linear(f.reshape(x, {b, height * width, dim}),
                 op.lookup("proj_in.weight"), op.lookup("proj_in.bias"));

    int64_t heads = c.levelHeads[level];
    ParamSpecs specs = transformerBlockParams(c, dim);
    std::string name = "transformer_" + std::to_string(dim) + "_" +
                       std::to_string(height) + "x" + std::to_string(width);
    SmallVector<Value> leading = {x, textContext};
    func::FuncOp block = mb.blockFunction(
        name, ValueRange(leading).getTypes(), specs,
        [&](FnBuilder &bf, ArrayRef<Value> args, const ParamMap &bp) {
          return transformerBlock(bf, heads, args, bp);
        });
    for (int64_t k = 0; k < c.levelTransformerLayers[level]; ++k)
      leading[0] = mb.callBlock(block, leading, specs,
                                prefix + "transformer_blocks." +
                                    std::to_string(k) + ".")[0];

    ParamSpecs last;
    addLinear(last, "proj_out", dim, dim, "_", "embed");
    ParamMap lp = mb.params(last, prefix);
    x = f.linear(leading[0], lp.lookup("proj_out.weight"),
                 lp.lookup("proj_out.bias"));
    return f.add(f.reshape(x, shape), h);
  }

  /// A convolution `name` to `out` channels with `kernel` (padding
  /// kernel/2) and `stride`.
  Value conv(Value h, const std::string &name, int64_t out, int64_t kernel,
             int64_t stride) {
    ParamSpecs specs;
    addConv(specs, name, channelsOf(h), out, kernel);
    ParamMap p = mb.params(specs);
    return f.conv2d(h, p.lookup(name + ".weight"), p.lookup(name + ".bias"),
                    stride, kernel / 2);
  }

  ModelBuilder &mb;
  const ModelConfig &c;
  FnBuilder &f;
  Value embSilu, textContext;
};

} // namespace

void modelgen::buildUNet(ModelBuilder &mb) {
  const ModelConfig &c = mb.getConfig();
  int64_t b = mb.getBatchDim();
  ModelNetwork network;
  network.latentShape = {b, c.latentHeight, c.latentWidth, c.latentChannels};
  // Height and width have logical names of their own, so that rules may
  // split the image over devices (spatial partitioning, with halo
  // exchange at every convolution); MaxDiffusion's UNet rules name neither,
  // so by default the image stays whole.
  network.latentAxes = {"batch", "activation_height", "activation_width", "_"};
  network.conditions = [&](ModelBuilder &m) -> SmallVector<Value> {
    Type f32 = m.fn().getF32();
    SmallVector<Value> inputs = {
        m.input(InputKind::timestep, {b}, f32, {"batch"}),
        m.input(InputKind::context, {b, c.textLength, c.textDim}, m.getDType(),
                {"batch", "activation_length", "embed"})};
    if (c.addTimeDim > 0) {
      inputs.push_back(
          m.input(InputKind::pooled, {b, c.pooledDim}, f32, {"batch", "_"}));
      inputs.push_back(
          m.input(InputKind::time_ids, {b, 6}, f32, {"batch", "_"}));
    }
    return inputs;
  };
  network.predict = [](ModelBuilder &m, Value xt, ArrayRef<Value> in) {
    UNetWriter writer(m);
    return writer.predict(xt, in[0], in[1], in.size() > 2 ? in[2] : Value(),
                          in.size() > 3 ? in[3] : Value());
  };
  buildModelFunctions(mb, network);
}
