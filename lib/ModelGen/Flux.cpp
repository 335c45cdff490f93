//===- Flux.cpp - Flux.1 rectified-flow transformer -----------------------===//
//
// As black-forest-labs/flux src/flux/model.py (Flux, guidance_embed): image
// and text streams through double-stream blocks (each stream its own
// modulation, fused qkv, per-head RMS q/k norm and MLP; one joint
// attention), then the concatenated sequence [text; image] through
// single-stream blocks (parallel attention and MLP from one modulated
// input), and
// the adaLN final layer. RoPE over (0, row, column) ids, text ids zero.
//
// Fused projections (modulations, qkv) are [in, k, out] weights chunked
// after the projection (see Layers.cpp), and the single block's linear1
// and linear2 are split into their qkv / MLP and attention / MLP parts, so
// no weight is sliced and no activation is concatenated for linear2. The
// joint attention is one attention per stream's queries over the shared
// keys and values (the same numbers), and the loss covers the image tokens
// by masking the text positions of the final output and rescaling the
// mean by L / L_image, instead of slicing the image tokens out.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

namespace {

void addMlpEmbedder(ParamSpecs &specs, const std::string &name, int64_t in,
                    int64_t d) {
  addLinear(specs, name + ".in_layer", in, d, "embed", "mlp");
  addLinear(specs, name + ".out_layer", d, d, "mlp", "embed");
}

Value mlpEmbedder(FnBuilder &f, const ParamMap &p, const std::string &name,
                  Value x) {
  Value h = f.silu(f.linear(x, p.lookup(name + ".in_layer.weight"),
                            p.lookup(name + ".in_layer.bias")));
  return f.linear(h, p.lookup(name + ".out_layer.weight"),
                  p.lookup(name + ".out_layer.bias"));
}

void addQKNorm(ParamSpecs &specs, const std::string &prefix, int64_t dh) {
  addParam(specs, prefix + ".query_norm.scale", {dh}, {"norm"}, InitKind::ones);
  addParam(specs, prefix + ".key_norm.scale", {dh}, {"norm"}, InitKind::ones);
}

/// In the order DoubleStreamBlock registers them.
ParamSpecs doubleBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  for (const std::string s : {"img", "txt"}) {
    addFusedLinear(specs, s + "_mod.lin", d, 6, d, "embed", "_");
    addFusedLinear(specs, s + "_attn.qkv", d, 3, d, "embed", "heads");
    addQKNorm(specs, s + "_attn.norm", c.headDim());
    addLinear(specs, s + "_attn.proj", d, d, "heads", "embed");
    addLinear(specs, s + "_mlp.0", d, c.mlpHidden, "embed", "mlp");
    addLinear(specs, s + "_mlp.2", c.mlpHidden, d, "mlp", "embed");
  }
  return specs;
}

ParamSpecs singleBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  // linear1 = [qkv | mlp] and linear2 = [attention; mlp] of the checkpoint,
  // split (one bias for linear2).
  addFusedLinear(specs, "linear1_qkv", d, 3, d, "embed", "heads");
  addLinear(specs, "linear1_mlp", d, c.mlpHidden, "embed", "mlp");
  addParam(specs, "linear2_attn.weight", {d, d}, {"embed", "heads"},
           InitKind::xavier_uniform);
  addParam(specs, "linear2_mlp.weight", {d, c.mlpHidden}, {"embed", "mlp"},
           InitKind::xavier_uniform);
  addParam(specs, "linear2.bias", {d}, {"embed"}, InitKind::zeros);
  addQKNorm(specs, "norm", c.headDim());
  addFusedLinear(specs, "modulation.lin", d, 3, d, "embed", "_");
  return specs;
}

/// q or k [B, S, D] → RMS-normed per head, rotated, [B, H, S, Dh].
Value normRotate(FnBuilder &f, const ModelConfig &c, Value x, Value scale,
                 Value rotation, StringRef name) {
  Value h = f.rmsNorm(splitHeads(f, x, c.heads), scale);
  return f.name(headsFirst(f, applyRope(f, h, rotation)), name);
}

/// One stream of a double block up to its attention inputs.
struct Stream {
  Value x, q, k, v;
  SmallVector<Value> mod;
};

Stream prepareStream(FnBuilder &f, const ModelConfig &c, const ParamMap &p,
                     const std::string &s, Value x, Value vecSilu,
                     Value rotation) {
  Stream st;
  st.x = x;
  // shift, scale, gate of attention, then of the MLP.
  st.mod = linearChunks(f, vecSilu, p.lookup(s + "_mod.lin.weight"),
                        p.lookup(s + "_mod.lin.bias"));
  Value h = modulate(f, f.layerNorm(x), st.mod[0], st.mod[1]);
  // The fused projection [B, S, 3, D] is what MaxDiffusion names.
  Value qkvProj;
  SmallVector<Value> qkv =
      linearChunks(f, h, p.lookup(s + "_attn.qkv.weight"),
                   p.lookup(s + "_attn.qkv.bias"), &qkvProj);
  f.name(qkvProj, s + "_qkv_proj");
  st.q = normRotate(f, c, qkv[0], p.lookup(s + "_attn.norm.query_norm.scale"),
                    rotation, "xq_out");
  st.k = normRotate(f, c, qkv[1], p.lookup(s + "_attn.norm.key_norm.scale"),
                    rotation, "xk_out");
  st.v = headsFirst(f, splitHeads(f, qkv[2], c.heads));
  return st;
}

/// The stream's residual updates after attention over the joint keys.
Value finishStream(FnBuilder &f, const ParamMap &p, const std::string &s,
                   const Stream &st, Value keys, Value values) {
  // One stream's queries over the joint [text; image] keys.
  Value o = mergeHeads(
      f, f.attention(st.q, keys, values, /*selfAttention=*/false));
  Value attn = f.linear(o, p.lookup(s + "_attn.proj.weight"),
                        p.lookup(s + "_attn.proj.bias"));
  Value x = gatedResidual(f, st.x, st.mod[2], attn);
  Value h = modulate(f, f.layerNorm(x), st.mod[3], st.mod[4]);
  Value act = f.name(f.gelu(f.linear(h, p.lookup(s + "_mlp.0.weight"),
                                     p.lookup(s + "_mlp.0.bias"))),
                     "ffn_activation");
  Value mlp =
      f.linear(act, p.lookup(s + "_mlp.2.weight"), p.lookup(s + "_mlp.2.bias"));
  return f.name(gatedResidual(f, x, st.mod[5], mlp), "hidden_states");
}

/// (img, txt, SiLU(vec), img rotation, txt rotation) → (img, txt). Blocks
/// use vec only through SiLU, computed once for all of them.
SmallVector<Value> doubleBlock(FnBuilder &f, const ModelConfig &c,
                               ArrayRef<Value> in, const ParamMap &p) {
  Stream img = prepareStream(f, c, p, "img", in[0], in[2], in[3]);
  Stream txt = prepareStream(f, c, p, "txt", in[1], in[2], in[4]);
  // The joint sequence is [txt; img].
  Value keys = f.concat({txt.k, img.k}, 2);
  Value values = f.concat({txt.v, img.v}, 2);
  Value imgOut = finishStream(f, p, "img", img, keys, values);
  Value txtOut = finishStream(f, p, "txt", txt, keys, values);
  return {imgOut, txtOut};
}

/// (x [B, L, D], SiLU(vec), rotation) → x.
SmallVector<Value> singleBlock(FnBuilder &f, const ModelConfig &c,
                               ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], rotation = in[2];
  // shift, scale, gate.
  SmallVector<Value> mod =
      linearChunks(f, in[1], p.lookup("modulation.lin.weight"),
                   p.lookup("modulation.lin.bias"));
  Value h = f.name(modulate(f, f.layerNorm(x), mod[0], mod[1]),
                   "lin1_norm_hidden_states");

  SmallVector<Value> qkv = linearChunks(f, h, p.lookup("linear1_qkv.weight"),
                                        p.lookup("linear1_qkv.bias"));
  Value q = f.name(qkv[0], "query_proj");
  Value k = f.name(qkv[1], "key_proj");
  Value v = f.name(qkv[2], "value_proj");
  Value mlp =
      f.linear(h, p.lookup("linear1_mlp.weight"), p.lookup("linear1_mlp.bias"));
  Value q4 = normRotate(f, c, q, p.lookup("norm.query_norm.scale"), rotation,
                        "xq_out");
  Value k4 =
      normRotate(f, c, k, p.lookup("norm.key_norm.scale"), rotation, "xk_out");
  Value v4 = headsFirst(f, splitHeads(f, v, c.heads));
  Value o = mergeHeads(f, f.attention(q4, k4, v4));
  Value act = f.name(f.gelu(mlp), "ffn_activation");
  // linear2 on [o; act] as the sum of its two row blocks' products.
  Value attnOut = f.linear(o, p.lookup("linear2_attn.weight"), {});
  Value mlpOut = f.linear(act, p.lookup("linear2_mlp.weight"), {});
  Value out = f.addBias(f.add(attnOut, mlpOut), p.lookup("linear2.bias"));
  return {f.name(gatedResidual(f, x, mod[2], out), "hidden_states")};
}

/// The Flux network: the final projection [B, L_text + L_image, patch] for
/// noised latents `xt` at times `t` with the text context and the pooled
/// text vector; declares the parameters in the current model function and
/// calls the shared block functions. The text positions' outputs are
/// meaningless (Flux drops them).
Value fluxNetwork(ModelBuilder &mb, Value xt, Value t, Value text,
                  Value pooled) {
  const ModelConfig &c = mb.getConfig();
  FnBuilder &f = mb.fn();
  int64_t b = mb.getBatchDim(), d = c.hidden, p = c.patch;
  int64_t gridH = c.latentHeight / p, gridW = c.latentWidth / p;
  int64_t txtTokens = c.textLength;
  int64_t patchDim = p * p * c.latentChannels;

  ParamSpecs embedSpecs;
  addLinear(embedSpecs, "img_in", patchDim, d, "_", "embed");
  addMlpEmbedder(embedSpecs, "time_in", c.freqDim, d);
  addMlpEmbedder(embedSpecs, "vector_in", c.pooledDim, d);
  addMlpEmbedder(embedSpecs, "guidance_in", c.freqDim, d);
  addLinear(embedSpecs, "txt_in", c.textDim, d, "_", "embed");
  ParamMap ep = mb.params(embedSpecs);

  Value img = f.linear(patchify(f, xt, 1, p, PatchOrder::ChannelMajor),
                       ep.lookup("img_in.weight"), ep.lookup("img_in.bias"));
  Value vec = mlpEmbedder(f, ep, "time_in", timestepEmbedding(f, t, c.freqDim));
  // The guidance strength is one constant for the whole batch: its
  // embedding is computed once, batch-free, then broadcast.
  Value guidance =
      timestepEmbedding(f, f.splat(c.guidance, {1}, f.getF32()), c.freqDim);
  guidance = mlpEmbedder(f, ep, "guidance_in", guidance);
  vec = f.add(vec, f.expand(guidance, {b, d}, {1}));
  vec = f.add(vec, mlpEmbedder(f, ep, "vector_in", pooled));
  Value txt =
      f.linear(text, ep.lookup("txt_in.weight"), ep.lookup("txt_in.bias"));

  // RoPE axes (id, row, column) = (16, 56, 56) of Dh = 128: pairs 8, 28, 28.
  int64_t pairs = c.headDim() / 2, spatialPairs = (7 * c.headDim()) / 32;
  Value imgRotation = ropeMatrix(
      f, ropeAngles(f, {1, gridH, gridW},
                    {pairs - 2 * spatialPairs, spatialPairs, spatialPairs}));
  Value txtRotation =
      ropeMatrix(f, f.splat(0.0, {txtTokens, pairs}, f.getF32()));

  ParamSpecs doubleSpecs = doubleBlockParams(c);
  Value vecSilu = f.silu(vec);
  SmallVector<Value> doubleInputs = {img, txt, vecSilu, imgRotation,
                                     txtRotation};
  func::FuncOp doubleFn = mb.blockFunction(
      "flux_double_block", ValueRange(doubleInputs).getTypes(), doubleSpecs,
      [&](FnBuilder &bf, ArrayRef<Value> in, const ParamMap &bp) {
        return doubleBlock(bf, c, in, bp);
      });
  for (int64_t i = 0; i < c.depth; ++i) {
    SmallVector<Value> out =
        mb.callBlock(doubleFn, doubleInputs, doubleSpecs,
                     "double_blocks." + std::to_string(i) + ".");
    doubleInputs[0] = out[0];
    doubleInputs[1] = out[1];
  }

  Value x = f.concat({doubleInputs[1], doubleInputs[0]}, 1);
  Value rotation = f.concat({txtRotation, imgRotation}, 0);
  ParamSpecs singleSpecs = singleBlockParams(c);
  func::FuncOp singleFn = mb.blockFunction(
      "flux_single_block",
      TypeRange{x.getType(), vecSilu.getType(), rotation.getType()},
      singleSpecs, [&](FnBuilder &bf, ArrayRef<Value> in, const ParamMap &bp) {
        return singleBlock(bf, c, in, bp);
      });
  for (int64_t i = 0; i < c.singleDepth; ++i)
    x = mb.callBlock(singleFn, {x, vecSilu, rotation}, singleSpecs,
                     "single_blocks." + std::to_string(i) + ".")[0];

  ParamSpecs finalSpecs;
  addLinear(finalSpecs, "final_layer.linear", d, patchDim, "embed", "_");
  addFusedLinear(finalSpecs, "final_layer.adaLN_modulation.1", d, 2, d, "embed",
                 "_");
  ParamMap fp = mb.params(finalSpecs);
  Value h = modulatedNorm(f, fp, "final_layer.adaLN_modulation.1", x, vecSilu);
  return f.linear(h, fp.lookup("final_layer.linear.weight"),
                  fp.lookup("final_layer.linear.bias"));
}

} // namespace

void modelgen::buildFlux(ModelBuilder &mb) {
  const ModelConfig &c = mb.getConfig();
  int64_t b = mb.getBatchDim(), p = c.patch;
  int64_t imgTokens = (c.latentHeight / p) * (c.latentWidth / p);
  int64_t txtTokens = c.textLength, tokens = txtTokens + imgTokens;
  int64_t patchDim = p * p * c.latentChannels;
  ModelNetwork network;
  network.latentShape = {b, c.latentHeight, c.latentWidth, c.latentChannels};
  network.latentAxes = {"batch", "_", "_", "_"};
  network.conditions = [&](ModelBuilder &m) -> SmallVector<Value> {
    Value t = m.input(InputKind::timestep, {b}, m.fn().getF32(), {"batch"});
    Value text = m.input(InputKind::context, {b, txtTokens, c.textDim},
                         m.getDType(), {"batch", "activation_length", "embed"});
    Value pooled = m.input(InputKind::context, {b, c.pooledDim}, m.getDType(),
                           {"batch", "_"});
    return {t, text, pooled};
  };
  network.predict = [](ModelBuilder &m, Value xt, ArrayRef<Value> in) {
    return fluxNetwork(m, xt, in[0], in[1], in[2]);
  };
  // MSE over the image tokens: text positions are zero in both operands,
  // and the mean over all tokens is rescaled to the mean over the image.
  network.loss = [&](FnBuilder &f, Value pred, Value target) {
    SmallVector<int64_t> all = {b, tokens, patchDim};
    Value textZeros = f.splat(0.0, {txtTokens, patchDim});
    Value mask = f.concat({textZeros, f.splat(1.0, {imgTokens, patchDim})}, 0);
    Value tokenTarget =
        f.concat({f.expand(textZeros, {b, txtTokens, patchDim}, {1, 2}),
                  patchify(f, target, 1, p, PatchOrder::ChannelMajor)},
                 1);
    Value masked = f.mul(pred, f.expand(mask, all, {1, 2}));
    Value loss = f.mseLoss(masked, tokenTarget);
    return f.scale(loss, static_cast<double>(tokens) / imgTokens);
  };
  // The image tokens, unpatchified as Flux's "(h w) (c ph pw)".
  network.toLatents = [&](FnBuilder &f, Value pred) {
    Value img = f.slice(pred, 1, txtTokens, tokens);
    return unpatchify(f, img, network.latentShape, 1, p,
                      PatchOrder::ChannelMajor);
  };
  buildModelFunctions(mb, network);
}
