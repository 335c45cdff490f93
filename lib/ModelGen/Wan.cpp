//===- Wan.cpp - Wan2.1 text-to-video transformer -------------------------===//
//
// As diffusers' WanTransformer3DModel (text-to-video; the original is
// Wan-Video/Wan2.1's WanModel): a 3-D patch embedding of video latents, the
// condition embedder (a 2-layer text projection, the time embedding and its
// projection to six modulation vectors), then blocks of adaLN-modulated
// self-attention (RMS-normed q/k over the full width, 3-D RoPE over frames,
// rows and columns), cross-attention to the text (after the affine norm2)
// and a GELU FFN, and the modulated output projection. Parameters have
// diffusers' names and layouts, so its released checkpoints load as they
// are.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

namespace {

void addAttentionParams(ParamSpecs &specs, const std::string &prefix,
                        int64_t d) {
  for (const char *proj : {".to_q", ".to_k", ".to_v"})
    addLinear(specs, prefix + proj, d, d, "embed", "heads");
  addLinear(specs, prefix + ".to_out.0", d, d, "heads", "embed");
  addParam(specs, prefix + ".norm_q.weight", {d}, {"norm"}, InitKind::ones);
  addParam(specs, prefix + ".norm_k.weight", {d}, {"norm"}, InitKind::ones);
}

/// In the order WanTransformerBlock registers them.
ParamSpecs wanBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  addAttentionParams(specs, "attn1", d);
  addAttentionParams(specs, "attn2", d);
  // The cross-attention's affine norm (cross_attn_norm).
  addParam(specs, "norm2.weight", {d}, {"norm"}, InitKind::ones);
  addParam(specs, "norm2.bias", {d}, {"norm"}, InitKind::zeros);
  addLinear(specs, "ffn.net.0.proj", d, c.mlpHidden, "embed", "mlp");
  addLinear(specs, "ffn.net.2", c.mlpHidden, d, "mlp", "embed");
  addParam(specs, "scale_shift_table", {1, 6, d}, {"_", "_", "embed"},
           InitKind::normal, 1.0 / std::sqrt(static_cast<double>(d)));
  return specs;
}

/// WanAttention, self or cross: keys and values from
/// `context` (or x), q and k RMS-normed over the full width, RoPE when a
/// rotation is given. Returns the output projection.
Value wanAttention(FnBuilder &f, const ModelConfig &c, const ParamMap &p,
                   StringRef prefix, Value x, Value context, Value rotation) {
  auto param = [&](StringRef name) {
    return p.lookup((prefix + "." + name).str());
  };
  Value kvInput = context ? context : x;
  Value q = f.name(f.linear(x, param("to_q.weight"), param("to_q.bias")),
                   "query_proj");
  Value k = f.name(f.linear(kvInput, param("to_k.weight"), param("to_k.bias")),
                   "key_proj");
  Value v = f.name(f.linear(kvInput, param("to_v.weight"), param("to_v.bias")),
                   "value_proj");
  q = splitHeads(f, f.rmsNorm(q, param("norm_q.weight")), c.heads);
  k = splitHeads(f, f.rmsNorm(k, param("norm_k.weight")), c.heads);
  if (rotation) {
    q = applyRope(f, q, rotation);
    k = applyRope(f, k, rotation);
  }
  Value q4 = f.name(headsFirst(f, q), "xq_out");
  Value k4 = f.name(headsFirst(f, k), "xk_out");
  Value v4 = headsFirst(f, splitHeads(f, v, c.heads));
  Value o = mergeHeads(f, f.attention(q4, k4, v4, /*selfAttention=*/!context));
  return f.linear(o, param("to_out.0.weight"), param("to_out.0.bias"));
}

/// The chunks [B, D] of `e + modulation` (e [B, k, D], the table [1, k,
/// D]): the table is added whole and the sum is chunked, so the parameter
/// is never sliced.
SmallVector<Value> modulationChunks(FnBuilder &f, Value e, Value table) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(e.getType()).getShape());
  Value sum = f.add(e, f.expand(table, shape, {1, 2}));
  SmallVector<Value> chunks;
  for (int64_t i = 0; i < shape[1]; ++i)
    chunks.push_back(chunk(f, sum, i));
  return chunks;
}

/// (x [B, S, D], context [B, L, D], e [B, 6, D], rotation) → x.
SmallVector<Value> wanBlock(FnBuilder &f, const ModelConfig &c,
                            ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], context = in[1], rotation = in[3];
  // shift, scale, gate of self-attention, then of the FFN.
  SmallVector<Value> mod =
      modulationChunks(f, in[2], p.lookup("scale_shift_table"));

  Value h = modulate(f, f.layerNorm(x), mod[0], mod[1]);
  Value selfAttn =
      f.name(wanAttention(f, c, p, "attn1", h, {}, rotation), "self_attn");
  x = gatedResidual(f, x, mod[2], selfAttn);

  h = f.layerNorm(x, p.lookup("norm2.weight"), p.lookup("norm2.bias"));
  Value crossAttn =
      f.name(wanAttention(f, c, p, "attn2", h, context, {}), "cross_attn");
  x = f.add(x, crossAttn);

  h = modulate(f, f.layerNorm(x), mod[3], mod[4]);
  Value act = f.name(f.gelu(f.linear(h, p.lookup("ffn.net.0.proj.weight"),
                                     p.lookup("ffn.net.0.proj.bias"))),
                     "ffn_activation");
  Value y =
      f.linear(act, p.lookup("ffn.net.2.weight"), p.lookup("ffn.net.2.bias"));
  return {f.name(gatedResidual(f, x, mod[5], y), "hidden_states")};
}

/// The Wan network: the prediction [B, F, H, W, C] for noised latents `xt`
/// at times `t` with the text context; declares the parameters in the
/// current model function and calls the shared @wan_block. The time
/// embedding e [B, D] (before SiLU) modulates the output, its projection
/// [B, 6, D] the blocks.
Value wanNetwork(ModelBuilder &mb, Value xt, Value t, Value textStates) {
  const ModelConfig &c = mb.getConfig();
  FnBuilder &f = mb.fn();
  int64_t b = mb.getBatchDim(), d = c.hidden;
  int64_t pf = c.patchFrames, p = c.patch;
  int64_t patchDim = pf * p * p * c.latentChannels;
  SmallVector<int64_t> latentShape = {b, c.latentFrames, c.latentHeight,
                                      c.latentWidth, c.latentChannels};
  SmallVector<int64_t> grid = {c.latentFrames / pf, c.latentHeight / p,
                               c.latentWidth / p};

  ParamSpecs embedSpecs;
  addPatchEmbedding(embedSpecs, "patch_embedding", c.latentChannels, {pf, p, p},
                    d, "embed");
  const std::string time = "condition_embedder.time_embedder.";
  const std::string text = "condition_embedder.text_embedder.";
  addLinear(embedSpecs, time + "linear_1", c.freqDim, d, "embed", "mlp",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, time + "linear_2", d, d, "mlp", "embed",
            InitKind::normal, 0.02);
  // The six modulation vectors [B, 6, D], not split over `tensor`.
  addFusedLinear(embedSpecs, "condition_embedder.time_proj", d, 6, d, "embed",
                 "_");
  addLinear(embedSpecs, text + "linear_1", c.textDim, d, "embed", "mlp",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, text + "linear_2", d, d, "mlp", "embed",
            InitKind::normal, 0.02);
  ParamMap ep = mb.params(embedSpecs);
  auto embedLinear = [&](const std::string &name, Value in) {
    return f.linear(in, ep.lookup(name + ".weight"), ep.lookup(name + ".bias"));
  };

  Value x = embedLinear("patch_embedding",
                        patchify(f, xt, pf, p, PatchOrder::ChannelMajor));
  Value context = embedLinear(
      text + "linear_2", f.gelu(embedLinear(text + "linear_1", textStates)));
  Value e = f.silu(
      embedLinear(time + "linear_1", timestepEmbedding(f, t, c.freqDim)));
  e = embedLinear(time + "linear_2", e);
  Value e6 = embedLinear("condition_embedder.time_proj", f.silu(e));
  SmallVector<Value> blockInputs = {x, context, e6};

  // 3-D RoPE: of the head's Dh/2 pairs, Dh/6 go to rows, Dh/6 to columns
  // and the rest to frames (Wan's d − 4·(d/6) : 2·(d/6) : 2·(d/6) split).
  int64_t pairs = c.headDim() / 2, spatialPairs = c.headDim() / 6;
  Value angles = ropeAngles(
      f, grid, {pairs - 2 * spatialPairs, spatialPairs, spatialPairs});
  blockInputs.push_back(ropeMatrix(f, angles));

  ParamSpecs blockSpecs = wanBlockParams(c);
  func::FuncOp block = mb.blockFunction(
      "wan_block", ValueRange(blockInputs).getTypes(), blockSpecs,
      [&](FnBuilder &bf, ArrayRef<Value> in, const ParamMap &bp) {
        return wanBlock(bf, c, in, bp);
      });
  for (int64_t i = 0; i < c.depth; ++i) {
    blockInputs[0] = mb.callBlock(block, blockInputs, blockSpecs,
                                  "blocks." + std::to_string(i) + ".")[0];
  }
  x = blockInputs[0];

  ParamSpecs headSpecs;
  addLinear(headSpecs, "proj_out", d, patchDim, "embed", "_", InitKind::zeros);
  addParam(headSpecs, "scale_shift_table", {1, 2, d}, {"_", "_", "embed"},
           InitKind::normal, 1.0 / std::sqrt(static_cast<double>(d)));
  ParamMap hp = mb.params(headSpecs);
  Value e2 = f.broadcast(e, {b, 2, d}, {0, 2});
  SmallVector<Value> mod =
      modulationChunks(f, e2, hp.lookup("scale_shift_table"));
  Value h = modulate(f, f.layerNorm(x), mod[0], mod[1]);
  Value out =
      f.linear(h, hp.lookup("proj_out.weight"), hp.lookup("proj_out.bias"));
  return unpatchify(f, out, latentShape, pf, p, PatchOrder::ChannelMinor);
}

} // namespace

void modelgen::buildWan(ModelBuilder &mb) {
  const ModelConfig &c = mb.getConfig();
  int64_t b = mb.getBatchDim();
  ModelNetwork network;
  network.latentShape = {b, c.latentFrames, c.latentHeight, c.latentWidth,
                         c.latentChannels};
  network.latentAxes = {"batch", "_", "_", "_", "_"};
  network.conditions = [&](ModelBuilder &m) -> SmallVector<Value> {
    Value t = m.input(InputKind::timestep, {b}, m.fn().getF32(), {"batch"});
    Value text = m.input(InputKind::context, {b, c.textLength, c.textDim},
                         m.getDType(), {"batch", "activation_length", "embed"});
    return {t, text};
  };
  network.predict = [](ModelBuilder &m, Value xt, ArrayRef<Value> in) {
    return wanNetwork(m, xt, in[0], in[1]);
  };
  buildModelFunctions(mb, network);
}
