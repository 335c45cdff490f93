//===- Wan.cpp - Wan2.1 text-to-video transformer -------------------------===//
//
// As Wan-Video/Wan2.1 wan/modules/model.py (WanModel, t2v): a 3-D patch
// embedding of video latents, a 2-layer text-embedding MLP, the time
// embedding and its projection to six modulation vectors, then blocks of
// adaLN-modulated self-attention (RMS-normed q/k over the full width, 3-D
// RoPE over frames, rows and columns), cross-attention to the text (with
// the affine norm3) and a GELU FFN, and the modulated head.
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
  for (const char *proj : {".q", ".k", ".v"})
    addLinear(specs, prefix + proj, d, d, "embed", "heads");
  addLinear(specs, prefix + ".o", d, d, "heads", "embed");
  addParam(specs, prefix + ".norm_q.weight", {d}, {"norm"}, InitKind::ones);
  addParam(specs, prefix + ".norm_k.weight", {d}, {"norm"}, InitKind::ones);
}

/// In the order WanAttentionBlock registers them.
ParamSpecs wanBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  addAttentionParams(specs, "self_attn", d);
  addParam(specs, "norm3.weight", {d}, {"norm"}, InitKind::ones);
  addParam(specs, "norm3.bias", {d}, {"norm"}, InitKind::zeros);
  addAttentionParams(specs, "cross_attn", d);
  addLinear(specs, "ffn.0", d, c.mlpHidden, "embed", "mlp");
  addLinear(specs, "ffn.2", c.mlpHidden, d, "mlp", "embed");
  addParam(specs, "modulation", {1, 6, d}, {"_", "_", "embed"},
           InitKind::normal, 1.0 / std::sqrt(static_cast<double>(d)));
  return specs;
}

/// WanSelfAttention / WanT2VCrossAttention: keys and values from
/// `context` (or x), q and k RMS-normed over the full width, RoPE when a
/// rotation is given. Returns the output projection.
Value wanAttention(FnBuilder &f, const ModelConfig &c, const ParamMap &p,
                   StringRef prefix, Value x, Value context, Value rotation) {
  auto param = [&](StringRef name) {
    return p.lookup((prefix + "." + name).str());
  };
  Value kvInput = context ? context : x;
  Value q =
      f.name(f.linear(x, param("q.weight"), param("q.bias")), "query_proj");
  Value k =
      f.name(f.linear(kvInput, param("k.weight"), param("k.bias")), "key_proj");
  Value v = f.name(f.linear(kvInput, param("v.weight"), param("v.bias")),
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
  return f.linear(o, param("o.weight"), param("o.bias"));
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
  SmallVector<Value> mod = modulationChunks(f, in[2], p.lookup("modulation"));

  Value h = modulate(f, f.layerNorm(x), mod[0], mod[1]);
  Value selfAttn =
      f.name(wanAttention(f, c, p, "self_attn", h, {}, rotation), "self_attn");
  x = gatedResidual(f, x, mod[2], selfAttn);

  h = f.layerNorm(x, p.lookup("norm3.weight"), p.lookup("norm3.bias"));
  Value crossAttn =
      f.name(wanAttention(f, c, p, "cross_attn", h, context, {}), "cross_attn");
  x = f.add(x, crossAttn);

  h = modulate(f, f.layerNorm(x), mod[3], mod[4]);
  Value act = f.name(
      f.gelu(f.linear(h, p.lookup("ffn.0.weight"), p.lookup("ffn.0.bias"))),
      "ffn_activation");
  Value y = f.linear(act, p.lookup("ffn.2.weight"), p.lookup("ffn.2.bias"));
  return {f.name(gatedResidual(f, x, mod[5], y), "hidden_states")};
}

/// The Wan network: the prediction [B, F, H, W, C] for noised latents `xt`
/// at times `t` with the text context; declares the parameters in the
/// current model function and calls the shared @wan_block.
Value wanNetwork(ModelBuilder &mb, Value xt, Value t, Value text) {
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
  addLinear(embedSpecs, "text_embedding.0", c.textDim, d, "embed", "mlp",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, "text_embedding.2", d, d, "mlp", "embed",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, "time_embedding.0", c.freqDim, d, "embed", "mlp",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, "time_embedding.2", d, d, "mlp", "embed",
            InitKind::normal, 0.02);
  // The six modulation vectors [B, 6, D], not split over `tensor`.
  addFusedLinear(embedSpecs, "time_projection.1", d, 6, d, "embed", "_");
  ParamMap ep = mb.params(embedSpecs);

  Value x = f.linear(patchify(f, xt, pf, p, PatchOrder::ChannelMajor),
                     ep.lookup("patch_embedding.weight"),
                     ep.lookup("patch_embedding.bias"));
  Value context = f.gelu(f.linear(text, ep.lookup("text_embedding.0.weight"),
                                  ep.lookup("text_embedding.0.bias")));
  context = f.linear(context, ep.lookup("text_embedding.2.weight"),
                     ep.lookup("text_embedding.2.bias"));
  Value e = timestepEmbedding(f, t, c.freqDim);
  e = f.silu(f.linear(e, ep.lookup("time_embedding.0.weight"),
                      ep.lookup("time_embedding.0.bias")));
  e = f.linear(e, ep.lookup("time_embedding.2.weight"),
               ep.lookup("time_embedding.2.bias"));
  Value e6 = f.linear(f.silu(e), ep.lookup("time_projection.1.weight"),
                      ep.lookup("time_projection.1.bias"));
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
  addLinear(headSpecs, "head.head", d, patchDim, "embed", "_", InitKind::zeros);
  addParam(headSpecs, "head.modulation", {1, 2, d}, {"_", "_", "embed"},
           InitKind::normal, 1.0 / std::sqrt(static_cast<double>(d)));
  ParamMap hp = mb.params(headSpecs);
  Value e2 = f.broadcast(e, {b, 2, d}, {0, 2});
  SmallVector<Value> mod =
      modulationChunks(f, e2, hp.lookup("head.modulation"));
  Value h = modulate(f, f.layerNorm(x), mod[0], mod[1]);
  Value out =
      f.linear(h, hp.lookup("head.head.weight"), hp.lookup("head.head.bias"));
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
