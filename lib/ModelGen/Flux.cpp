//===- Flux.cpp - Flux.1 rectified-flow transformer -----------------------===//
//
// As diffusers' FluxTransformer2DModel with guidance_embeds (Flux.1-dev; the
// original is black-forest-labs/flux's Flux): image and text streams through
// double-stream blocks (each stream its own adaLN-Zero modulation, q/k/v
// projections with per-head RMS q/k norms, and MLP; one joint attention),
// then the concatenated sequence [text; image] through single-stream blocks
// (parallel attention and MLP from one modulated input), and the
// continuous-adaLN output layer. RoPE over (0, row, column) ids, text ids
// zero. Parameters have diffusers' names and layouts, so its released
// checkpoints load as they are.
//
// Fused projections (the modulations) are [k, out, in] views of PyTorch's
// [k·out, in] weights, chunked after the projection (see Layers.cpp). The
// single block's proj_out [D, D + mlp] multiplies the concatenation
// [attention; MLP]: its two column blocks are sliced (local under FSDP,
// which shards its rows) and multiply the two halves, so no activation is
// concatenated (a concatenation along a tensor-sharded width would gather
// it). The joint attention is one attention per stream's queries over the
// shared keys and values (the same numbers), and the loss covers the image
// tokens by masking the text positions of the final output and rescaling
// the mean by L / L_image, instead of slicing the image tokens out.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

namespace {

/// diffusers' TimestepEmbedding and PixArtAlphaTextProjection (SiLU): two
/// linears with SiLU between.
void addEmbedderMlp(ParamSpecs &specs, const std::string &name, int64_t in,
                    int64_t d) {
  addLinear(specs, name + ".linear_1", in, d, "embed", "mlp");
  addLinear(specs, name + ".linear_2", d, d, "mlp", "embed");
}

Value embedderMlp(FnBuilder &f, const ParamMap &p, const std::string &name,
                  Value x) {
  Value h = f.silu(f.linear(x, p.lookup(name + ".linear_1.weight"),
                            p.lookup(name + ".linear_1.bias")));
  return f.linear(h, p.lookup(name + ".linear_2.weight"),
                  p.lookup(name + ".linear_2.bias"));
}

/// The names of one stream's projections in FluxAttention.
struct StreamNames {
  const char *q, *k, *v, *out, *normQ, *normK;
};
constexpr StreamNames kImageNames = {"to_q",     "to_k",   "to_v",
                                     "to_out.0", "norm_q", "norm_k"};
constexpr StreamNames kTextNames = {"add_q_proj",   "add_k_proj",
                                    "add_v_proj",   "to_add_out",
                                    "norm_added_q", "norm_added_k"};

void addQKNorms(ParamSpecs &specs, const std::string &attn,
                const StreamNames &n, int64_t dh) {
  addParam(specs, attn + n.normQ + ".weight", {dh}, {"norm"}, InitKind::ones);
  addParam(specs, attn + n.normK + ".weight", {dh}, {"norm"}, InitKind::ones);
}

void addProjections(ParamSpecs &specs, const std::string &attn,
                    const StreamNames &n, int64_t d) {
  for (const char *proj : {n.q, n.k, n.v})
    addLinear(specs, attn + proj, d, d, "embed", "heads");
}

/// In the order FluxTransformerBlock registers them.
ParamSpecs doubleBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  addFusedLinear(specs, "norm1.linear", d, 6, d, "embed", "_");
  addFusedLinear(specs, "norm1_context.linear", d, 6, d, "embed", "_");
  addQKNorms(specs, "attn.", kImageNames, c.headDim());
  addProjections(specs, "attn.", kImageNames, d);
  addLinear(specs, std::string("attn.") + kImageNames.out, d, d, "heads",
            "embed");
  addQKNorms(specs, "attn.", kTextNames, c.headDim());
  addProjections(specs, "attn.", kTextNames, d);
  addLinear(specs, std::string("attn.") + kTextNames.out, d, d, "heads",
            "embed");
  for (const std::string ff : {"ff", "ff_context"}) {
    addLinear(specs, ff + ".net.0.proj", d, c.mlpHidden, "embed", "mlp");
    addLinear(specs, ff + ".net.2", c.mlpHidden, d, "mlp", "embed");
  }
  return specs;
}

/// In the order FluxSingleTransformerBlock registers them.
ParamSpecs singleBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden;
  ParamSpecs specs;
  addFusedLinear(specs, "norm.linear", d, 3, d, "embed", "_");
  addLinear(specs, "proj_mlp", d, c.mlpHidden, "embed", "mlp");
  // [D, D + mlp]: its input width mixes heads and MLP columns, so it is not
  // split over `tensor`.
  addLinear(specs, "proj_out", d + c.mlpHidden, d, "_", "embed");
  addQKNorms(specs, "attn.", kImageNames, c.headDim());
  addProjections(specs, "attn.", kImageNames, d);
  return specs;
}

/// q or k [B, S, D] → RMS-normed per head, rotated, [B, H, S, Dh].
Value normRotate(FnBuilder &f, const ModelConfig &c, Value x, Value scale,
                 Value rotation, StringRef name) {
  Value h = f.rmsNorm(splitHeads(f, x, c.heads), scale);
  return f.name(headsFirst(f, applyRope(f, h, rotation)), name);
}

/// One stream's attention inputs [B, H, S, Dh] from its modulated input h.
/// The three projections carry the stream's name (`img_qkv_proj`), which
/// the FLUX_OPTIMIZED remat policy recomputes.
struct Attention {
  Value q, k, v;
};

Attention attentionInputs(FnBuilder &f, const ModelConfig &c, const ParamMap &p,
                          const StreamNames &n, Value h, Value rotation,
                          StringRef projName) {
  auto param = [&](const char *module, StringRef field) {
    return p.lookup(("attn." + Twine(module) + "." + field).str());
  };
  auto project = [&](const char *module) {
    Value y = f.linear(h, param(module, "weight"), param(module, "bias"));
    return projName.empty() ? y : f.name(y, projName);
  };
  Value q = project(n.q), k = project(n.k), v = project(n.v);
  if (projName.empty()) {
    f.name(q, "query_proj");
    f.name(k, "key_proj");
    f.name(v, "value_proj");
  }
  return {normRotate(f, c, q, param(n.normQ, "weight"), rotation, "xq_out"),
          normRotate(f, c, k, param(n.normK, "weight"), rotation, "xk_out"),
          headsFirst(f, splitHeads(f, v, c.heads))};
}

/// One stream of a double block up to its attention inputs.
struct Stream {
  Value x;
  Attention attn;
  SmallVector<Value> mod;
};

Stream prepareStream(FnBuilder &f, const ModelConfig &c, const ParamMap &p,
                     const StreamNames &n, StringRef norm, StringRef projName,
                     Value x, Value vecSilu, Value rotation) {
  Stream st;
  st.x = x;
  // shift, scale, gate of attention, then of the MLP (AdaLayerNormZero).
  st.mod = linearChunks(f, vecSilu, p.lookup((norm + ".linear.weight").str()),
                        p.lookup((norm + ".linear.bias").str()));
  Value h = modulate(f, f.layerNorm(x), st.mod[0], st.mod[1]);
  st.attn = attentionInputs(f, c, p, n, h, rotation, projName);
  return st;
}

/// The stream's residual updates after attention over the joint keys.
Value finishStream(FnBuilder &f, const ParamMap &p, const StreamNames &n,
                   StringRef ff, const Stream &st, Value keys, Value values) {
  // One stream's queries over the joint [text; image] keys.
  Value o = mergeHeads(
      f, f.attention(st.attn.q, keys, values, /*selfAttention=*/false));
  std::string out = std::string("attn.") + n.out;
  Value attn = f.linear(o, p.lookup(out + ".weight"), p.lookup(out + ".bias"));
  Value x = gatedResidual(f, st.x, st.mod[2], attn);
  Value h = modulate(f, f.layerNorm(x), st.mod[3], st.mod[4]);
  Value act =
      f.name(f.gelu(f.linear(h, p.lookup((ff + ".net.0.proj.weight").str()),
                             p.lookup((ff + ".net.0.proj.bias").str()))),
             "ffn_activation");
  Value mlp = f.linear(act, p.lookup((ff + ".net.2.weight").str()),
                       p.lookup((ff + ".net.2.bias").str()));
  return f.name(gatedResidual(f, x, st.mod[5], mlp), "hidden_states");
}

/// (img, txt, SiLU(vec), img rotation, txt rotation) → (img, txt). Blocks
/// use vec only through SiLU, computed once for all of them.
SmallVector<Value> doubleBlock(FnBuilder &f, const ModelConfig &c,
                               ArrayRef<Value> in, const ParamMap &p) {
  Stream img = prepareStream(f, c, p, kImageNames, "norm1", "img_qkv_proj",
                             in[0], in[2], in[3]);
  Stream txt = prepareStream(f, c, p, kTextNames, "norm1_context",
                             "txt_qkv_proj", in[1], in[2], in[4]);
  // The joint sequence is [txt; img].
  Value keys = f.concat({txt.attn.k, img.attn.k}, 2);
  Value values = f.concat({txt.attn.v, img.attn.v}, 2);
  Value imgOut = finishStream(f, p, kImageNames, "ff", img, keys, values);
  Value txtOut =
      finishStream(f, p, kTextNames, "ff_context", txt, keys, values);
  return {imgOut, txtOut};
}

/// (x [B, L, D], SiLU(vec), rotation) → x.
SmallVector<Value> singleBlock(FnBuilder &f, const ModelConfig &c,
                               ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], rotation = in[2];
  int64_t d = c.hidden;
  // shift, scale, gate (AdaLayerNormZeroSingle).
  SmallVector<Value> mod = linearChunks(
      f, in[1], p.lookup("norm.linear.weight"), p.lookup("norm.linear.bias"));
  Value h = f.name(modulate(f, f.layerNorm(x), mod[0], mod[1]),
                   "lin1_norm_hidden_states");
  Attention attn = attentionInputs(f, c, p, kImageNames, h, rotation, "");
  Value mlp =
      f.linear(h, p.lookup("proj_mlp.weight"), p.lookup("proj_mlp.bias"));
  Value o = mergeHeads(f, f.attention(attn.q, attn.k, attn.v));
  Value act = f.name(f.gelu(mlp), "ffn_activation");
  // proj_out on [o; act] as the sum of its two column blocks' products.
  Value w = p.lookup("proj_out.weight");
  Value attnOut = f.linear(o, f.slice(w, 1, 0, d), {});
  Value mlpOut = f.linear(act, f.slice(w, 1, d, d + c.mlpHidden), {});
  Value out = f.addBias(f.add(attnOut, mlpOut), p.lookup("proj_out.bias"));
  return {f.name(gatedResidual(f, x, mod[2], out), "hidden_states")};
}

/// The Flux network: the final projection [B, L_text + L_image, patch] for
/// noised latents `xt` at times `t` with the text context and the pooled
/// text vector; declares the parameters in the current model function and
/// calls the shared block functions. The text positions' outputs are
/// meaningless (Flux drops them).
Value fluxNetwork(ModelBuilder &mb, Value xt, Value t, Value text, Value pooled,
                  Value guidanceIn) {
  const ModelConfig &c = mb.getConfig();
  FnBuilder &f = mb.fn();
  int64_t d = c.hidden, p = c.patch;
  int64_t gridH = c.latentHeight / p, gridW = c.latentWidth / p;
  int64_t txtTokens = c.textLength;
  int64_t patchDim = p * p * c.latentChannels;

  // In the order FluxTransformer2DModel registers them.
  const std::string embed = "time_text_embed.";
  ParamSpecs embedSpecs;
  addEmbedderMlp(embedSpecs, embed + "timestep_embedder", c.freqDim, d);
  addEmbedderMlp(embedSpecs, embed + "guidance_embedder", c.freqDim, d);
  addEmbedderMlp(embedSpecs, embed + "text_embedder", c.pooledDim, d);
  addLinear(embedSpecs, "context_embedder", c.textDim, d, "_", "embed");
  addLinear(embedSpecs, "x_embedder", patchDim, d, "_", "embed");
  ParamMap ep = mb.params(embedSpecs);

  Value img =
      f.linear(patchify(f, xt, 1, p, PatchOrder::ChannelMajor),
               ep.lookup("x_embedder.weight"), ep.lookup("x_embedder.bias"));
  Value vec = embedderMlp(f, ep, embed + "timestep_embedder",
                          timestepEmbedding(f, t, c.freqDim));
  // The distilled guidance strength of each sample, embedded as a timestep.
  Value guidance = embedderMlp(f, ep, embed + "guidance_embedder",
                               timestepEmbedding(f, guidanceIn, c.freqDim));
  vec = f.add(vec, guidance);
  vec = f.add(vec, embedderMlp(f, ep, embed + "text_embedder", pooled));
  Value txt = f.linear(text, ep.lookup("context_embedder.weight"),
                       ep.lookup("context_embedder.bias"));

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
                     "transformer_blocks." + std::to_string(i) + ".");
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
                     "single_transformer_blocks." + std::to_string(i) + ".")[0];

  ParamSpecs finalSpecs;
  addFusedLinear(finalSpecs, "norm_out.linear", d, 2, d, "embed", "_");
  addLinear(finalSpecs, "proj_out", d, patchDim, "embed", "_");
  ParamMap fp = mb.params(finalSpecs);
  // AdaLayerNormContinuous: scale, then shift.
  SmallVector<Value> mod =
      linearChunks(f, vecSilu, fp.lookup("norm_out.linear.weight"),
                   fp.lookup("norm_out.linear.bias"));
  Value h = modulate(f, f.layerNorm(x), mod[1], mod[0]);
  return f.linear(h, fp.lookup("proj_out.weight"), fp.lookup("proj_out.bias"));
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
    Value pooled = m.input(InputKind::pooled, {b, c.pooledDim}, m.getDType(),
                           {"batch", "_"});
    Value guidance =
        m.input(InputKind::guidance, {b}, m.fn().getF32(), {"batch"});
    return {t, text, pooled, guidance};
  };
  network.predict = [](ModelBuilder &m, Value xt, ArrayRef<Value> in) {
    return fluxNetwork(m, xt, in[0], in[1], in[2], in[3]);
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
  // The guidance training feeds and sampling defaults to (Flux.1-dev's
  // pipelines use 3.5).
  Builder builder(mb.getDType().getContext());
  network.functionAttributes.push_back(builder.getNamedAttr(
      SDDialect::kGuidanceAttrName, builder.getF64FloatAttr(c.guidance)));
  buildModelFunctions(mb, network);
}
