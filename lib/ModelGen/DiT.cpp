//===- DiT.cpp - Diffusion Transformer (Peebles & Xie) --------------------===//
//
// DiT with adaLN-Zero blocks, as facebookresearch/DiT models.py: patch
// embedding plus the fixed 2-D sin-cos position embedding, timestep and
// class embeddings summed into the conditioning c, N blocks, and the
// adaLN final layer. learn_sigma doubles the output channels; the loss
// regresses only the first half (the sigma half trains through DiT's
// variational bound, which is not modelled) and @denoise returns only that
// half; @forward returns all of it, as the reference's forward(). Weights have
// the reference's layouts: Linear weights [out, in], the patch embedding the
// Conv2d's [hidden, C, p, p] (declared as its view [hidden, C·p·p]) and the
// fused projections (qkv, adaLN) PyTorch's [k·out, in] (declared as their views
// [k, out, in], chunked after the projection).
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

namespace {

ParamSpecs ditBlockParams(const ModelConfig &c) {
  int64_t d = c.hidden, m = c.mlpHidden;
  ParamSpecs specs;
  addFusedLinear(specs, "attn.qkv", d, 3, d, "embed", "heads");
  addLinear(specs, "attn.proj", d, d, "heads", "embed");
  addLinear(specs, "mlp.fc1", d, m, "embed", "mlp");
  addLinear(specs, "mlp.fc2", m, d, "mlp", "embed");
  // adaLN-Zero: every block starts as the identity. The six vectors are
  // not split over `tensor`: they scale whole activations.
  addFusedLinear(specs, "adaLN_modulation.1", d, 6, d, "embed", "_",
                 InitKind::zeros);
  return specs;
}

/// One DiT block: (x [B, S, D], SiLU(c) [B, D]) → x. The block uses c only
/// through adaLN_modulation = Linear(SiLU(c)), so SiLU(c) is computed once
/// for all blocks: one value, resharded once for all of them.
SmallVector<Value> ditBlock(FnBuilder &f, const ModelConfig &c,
                            ArrayRef<Value> in, const ParamMap &p) {
  Value x = in[0], condSilu = in[1];
  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp.
  SmallVector<Value> mod =
      linearChunks(f, condSilu, p.lookup("adaLN_modulation.1.weight"),
                   p.lookup("adaLN_modulation.1.bias"));

  Value h = modulate(f, f.layerNorm(x), mod[0], mod[1]);
  SmallVector<Value> qkv = linearChunks(f, h, p.lookup("attn.qkv.weight"),
                                        p.lookup("attn.qkv.bias"));
  Value q = f.name(qkv[0], "query_proj");
  Value k = f.name(qkv[1], "key_proj");
  Value v = f.name(qkv[2], "value_proj");
  Value q4 = f.name(headsFirst(f, splitHeads(f, q, c.heads)), "xq_out");
  Value k4 = f.name(headsFirst(f, splitHeads(f, k, c.heads)), "xk_out");
  Value v4 = headsFirst(f, splitHeads(f, v, c.heads));
  Value o = mergeHeads(f, f.attention(q4, k4, v4));
  Value attn =
      f.linear(o, p.lookup("attn.proj.weight"), p.lookup("attn.proj.bias"));
  x = gatedResidual(f, x, mod[2], attn);

  h = modulate(f, f.layerNorm(x), mod[3], mod[4]);
  Value act = f.name(
      f.gelu(f.linear(h, p.lookup("mlp.fc1.weight"), p.lookup("mlp.fc1.bias"))),
      "ffn_activation");
  Value mlp =
      f.linear(act, p.lookup("mlp.fc2.weight"), p.lookup("mlp.fc2.bias"));
  return {f.name(gatedResidual(f, x, mod[5], mlp), "hidden_states")};
}

/// The DiT network: patch and position embedding, the conditioning c from
/// t and the labels, the blocks and the final layer. Returns the
/// prediction [B, H, W, C] for the noised latents `xt`; declares the
/// parameters in the current model function, so @loss and @denoise get the
/// same ones, and calls the shared @dit_block.
Value ditNetwork(ModelBuilder &mb, Value xt, Value t, Value labels) {
  const ModelConfig &c = mb.getConfig();
  FnBuilder &f = mb.fn();
  Type dtype = mb.getDType();
  int64_t b = mb.getBatchDim(), d = c.hidden, p = c.patch;
  int64_t gridH = c.latentHeight / p, gridW = c.latentWidth / p;
  int64_t tokens = gridH * gridW;
  SmallVector<int64_t> latentShape = {b, c.latentHeight, c.latentWidth,
                                      c.latentChannels};

  ParamSpecs embedSpecs;
  addPatchEmbedding(embedSpecs, "x_embedder.proj", c.latentChannels, {p, p}, d,
                    "embed");
  addLinear(embedSpecs, "t_embedder.mlp.0", c.freqDim, d, "embed", "mlp",
            InitKind::normal, 0.02);
  addLinear(embedSpecs, "t_embedder.mlp.2", d, d, "mlp", "embed",
            InitKind::normal, 0.02);
  // One more row than classes: the null class of classifier-free guidance.
  addParam(embedSpecs, "y_embedder.embedding_table.weight",
           {c.numClasses + 1, d}, {"_", "embed"}, InitKind::normal, 0.02);
  ParamMap ep = mb.params(embedSpecs);

  // Patch embedding, then the fixed position embedding. The bias is added
  // to the projection, not folded into the [S, D] position table: a sharded
  // bias would shard the table, which would then be gathered.
  Value patches = patchify(f, xt, 1, p, PatchOrder::ChannelMajor);
  Value x = f.linear(patches, ep.lookup("x_embedder.proj.weight"),
                     ep.lookup("x_embedder.proj.bias"));
  Value pos = f.convert(sinCos2D(f, gridH, gridW, d), dtype);
  x = f.add(x, f.expand(pos, {b, tokens, d}, {1, 2}));

  Value temb = timestepEmbedding(f, t, c.freqDim);
  temb = f.silu(f.linear(temb, ep.lookup("t_embedder.mlp.0.weight"),
                         ep.lookup("t_embedder.mlp.0.bias")));
  temb = f.linear(temb, ep.lookup("t_embedder.mlp.2.weight"),
                  ep.lookup("t_embedder.mlp.2.bias"));
  Value yemb = f.dot(labels, ep.lookup("y_embedder.embedding_table.weight"));
  Value cond = f.add(temb, yemb);
  Value condSilu = f.silu(cond);

  ParamSpecs blockSpecs = ditBlockParams(c);
  func::FuncOp block = mb.blockFunction(
      "dit_block", {x.getType(), condSilu.getType()}, blockSpecs,
      [&](FnBuilder &bf, ArrayRef<Value> in, const ParamMap &bp) {
        return ditBlock(bf, c, in, bp);
      });
  for (int64_t i = 0; i < c.depth; ++i)
    x = mb.callBlock(block, {x, condSilu}, blockSpecs,
                     "blocks." + std::to_string(i) + ".")[0];

  ParamSpecs finalSpecs;
  int64_t outDim = p * p * c.outChannels;
  addLinear(finalSpecs, "final_layer.linear", d, outDim, "embed", "_",
            InitKind::zeros);
  addFusedLinear(finalSpecs, "final_layer.adaLN_modulation.1", d, 2, d, "embed",
                 "_", InitKind::zeros);
  ParamMap fp = mb.params(finalSpecs);
  Value h = modulatedNorm(f, fp, "final_layer.adaLN_modulation.1", x, condSilu);

  // DiT's whole output, [B, H, W, outChannels] (its patches are
  // channel-minor): the learned sigma, when there is one, in the channels
  // after the prediction.
  Value out = f.linear(h, fp.lookup("final_layer.linear.weight"),
                       fp.lookup("final_layer.linear.bias"));
  SmallVector<int64_t> outShape = {b, c.latentHeight, c.latentWidth,
                                   c.outChannels};
  return unpatchify(f, out, outShape, 1, p, PatchOrder::ChannelMinor);
}

/// The prediction: the first latentChannels of DiT's output channels
/// (sliced from the output rather than from the weight, which stays whole).
Value predictionOf(FnBuilder &f, const ModelConfig &c, Value output) {
  if (c.outChannels == c.latentChannels)
    return output;
  return f.slice(output, 3, 0, c.latentChannels);
}

} // namespace

void modelgen::buildDiT(ModelBuilder &mb) {
  const ModelConfig &c = mb.getConfig();
  int64_t b = mb.getBatchDim();
  ModelNetwork network;
  network.latentShape = {b, c.latentHeight, c.latentWidth, c.latentChannels};
  network.latentAxes = {"batch", "_", "_", "_"};
  network.conditions = [&](ModelBuilder &m) -> SmallVector<Value> {
    Value t = m.input(InputKind::timestep, {b}, m.fn().getF32(), {"batch"});
    Value labels = m.input(InputKind::labels, {b, c.numClasses + 1},
                           m.getDType(), {"batch", "_"});
    return {t, labels};
  };
  network.predict = [](ModelBuilder &m, Value xt, ArrayRef<Value> in) {
    return ditNetwork(m, xt, in[0], in[1]);
  };
  network.loss = [&](FnBuilder &f, Value output, Value target) {
    return f.mseLoss(predictionOf(f, c, output), target);
  };
  network.toLatents = [&](FnBuilder &f, Value output) {
    return predictionOf(f, c, output);
  };
  network.withForward = true;
  buildModelFunctions(mb, network);
}
