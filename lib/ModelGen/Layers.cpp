//===- Layers.cpp - layers shared by the diffusion transformers -----------===//
//
// adaLN modulation, chunked projections, timestep and position embeddings,
// rotary embeddings, head reshapes, patchify and the noising of the loss.
// No weight is sliced: a fused projection (qkv, adaLN) is one dot_general
// with its whole [in, k, out] weight, and its chunks are slices of the
// activation, whose batch dimension is taken whole with limit -1 so that
// sd-specialize-batch can size it. Slicing a sharded weight would make the
// partitioner gather it once per slice.
//
//===----------------------------------------------------------------------===//

#include "ModelBuilder.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::modelgen;

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

//===----------------------------------------------------------------------===//
// adaLN and projections
//===----------------------------------------------------------------------===//

Value modelgen::modulate(FnBuilder &f, Value x, Value shift, Value scale) {
  ArrayRef<int64_t> shape = shapeOf(x);
  Value scaleB = f.broadcast(scale, shape, {0, 2});
  Value shiftB = f.broadcast(shift, shape, {0, 2});
  return f.add(f.add(x, f.mul(x, scaleB)), shiftB);
}

Value modelgen::gatedResidual(FnBuilder &f, Value x, Value gate, Value y) {
  return f.add(x, f.mul(f.broadcast(gate, shapeOf(x), {0, 2}), y));
}

Value modelgen::modulatedNorm(FnBuilder &f, const ParamMap &p, StringRef name,
                              Value x, Value condSilu) {
  SmallVector<Value> mod =
      linearChunks(f, condSilu, p.lookup((name + ".weight").str()),
                   p.lookup((name + ".bias").str()));
  return modulate(f, f.layerNorm(x), mod[0], mod[1]);
}

Value modelgen::chunk(FnBuilder &f, Value fused, int64_t index) {
  SmallVector<int64_t> shape(shapeOf(fused));
  int64_t dim = static_cast<int64_t>(shape.size()) - 2;
  Value slice = f.slice(fused, dim, index, index + 1);
  shape.erase(shape.begin() + dim);
  return f.reshape(slice, shape);
}

SmallVector<Value> modelgen::linearChunks(FnBuilder &f, Value x, Value w,
                                          Value b, Value *fused) {
  Value y = f.linear(x, w, b);
  if (fused)
    *fused = y;
  // The weight is the fused view [k, out, in].
  int64_t count = shapeOf(w)[0];
  SmallVector<Value> chunks;
  for (int64_t i = 0; i < count; ++i)
    chunks.push_back(chunk(f, y, i));
  return chunks;
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

/// theta^(−k/denominator) for k < n, as f32 [n].
static Value inverseFrequencies(FnBuilder &f, int64_t n, double denominator,
                                double theta = 10000.0) {
  return f.exp(f.scale(f.iota({n}, 0), -std::log(theta) / denominator));
}

Value modelgen::timestepEmbedding(FnBuilder &f, Value t, int64_t dim) {
  int64_t half = dim / 2;
  Value freqs = f.scale(inverseFrequencies(f, half, half), 1000.0);
  int64_t batch = shapeOf(t)[0];
  // The outer product t ⊗ freqs as a contraction over a unit dimension: the
  // batch comes from t, the frequencies stay batch-free.
  Value times = f.reshape(t, {batch, 1});
  Value args = f.dot(times, f.reshape(freqs, {1, half}));
  Value emb = f.concat({f.cos(args), f.sin(args)}, 1);
  return f.convert(emb, f.getDType());
}

Value modelgen::idEmbedding(FnBuilder &f, Value ids, int64_t dim) {
  int64_t half = dim / 2;
  ArrayRef<int64_t> shape = shapeOf(ids);
  int64_t batch = shape[0], count = shape[1];
  Value freqs = f.reshape(inverseFrequencies(f, half, half), {1, half});
  // ids [B, n, 1] · freqs [1, half] → [B, n, half]: the batch from the ids.
  Value args = f.dot(f.reshape(ids, {batch, count, 1}), freqs);
  Value emb = f.concat({f.cos(args), f.sin(args)}, 2);
  return f.convert(f.reshape(emb, {batch, count * dim}), f.getDType());
}

Value modelgen::sinCos2D(FnBuilder &f, int64_t gridH, int64_t gridW,
                         int64_t dim) {
  int64_t quarter = dim / 4;
  SmallVector<int64_t> shape = {gridH, gridW, quarter};
  Value omega =
      f.broadcast(inverseFrequencies(f, quarter, quarter), shape, {2});
  // As DiT's get_2d_sincos_pos_embed: the first half encodes the column,
  // the second the row, each as [sin, cos].
  Value col = f.mul(f.iota(shape, 1), omega);
  Value row = f.mul(f.iota(shape, 0), omega);
  Value emb = f.concat({f.sin(col), f.cos(col), f.sin(row), f.cos(row)}, 2);
  return f.reshape(emb, {gridH * gridW, dim});
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

Value modelgen::ropeAngles(FnBuilder &f, ArrayRef<int64_t> grid,
                           ArrayRef<int64_t> axisPairs, double theta) {
  int64_t tokens = 1, pairs = 0;
  for (int64_t size : grid)
    tokens *= size;
  SmallVector<Value> parts;
  for (auto [axis, n] : llvm::enumerate(axisPairs)) {
    if (n == 0)
      continue;
    pairs += n;
    SmallVector<int64_t> shape(grid);
    shape.push_back(n);
    Value omega = f.broadcast(inverseFrequencies(f, n, n, theta), shape,
                              {static_cast<int64_t>(grid.size())});
    parts.push_back(f.mul(f.iota(shape, axis), omega));
  }
  Value angles = f.concat(parts, grid.size());
  return f.reshape(angles, {tokens, pairs});
}

Value modelgen::ropeMatrix(FnBuilder &f, Value angles) {
  ArrayRef<int64_t> shape = shapeOf(angles);
  SmallVector<int64_t> cell = {shape[0], shape[1], 1, 1};
  Value c = f.reshape(f.cos(angles), cell);
  Value s = f.reshape(f.sin(angles), cell);
  Value row0 = f.concat({c, s}, 3);
  Value row1 = f.concat({f.neg(s), c}, 3);
  return f.convert(f.concat({row0, row1}, 2), f.getDType());
}

Value modelgen::applyRope(FnBuilder &f, Value x, Value rotation) {
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t b = shape[0], s = shape[1], h = shape[2], d = shape[3];
  Value pairs = f.reshape(x, {b, s, h, d / 2, 2});
  // out[j] = Σ_i x[i]·R[i][j] per (position, pair): batch dimensions, so
  // remat policies treat it like the elementwise rotation it is.
  Value rotated = DotGeneralOp::create(
      f.getBuilder(), f.getLoc(), pairs, rotation, ArrayRef<int64_t>{1, 3},
      ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{4}, ArrayRef<int64_t>{2});
  // [S, P, B, H, 2] → [B, S, H, P, 2].
  Value ordered = f.transpose(rotated, {2, 0, 3, 1, 4});
  return f.reshape(ordered, shape);
}

//===----------------------------------------------------------------------===//
// Heads and patches
//===----------------------------------------------------------------------===//

Value modelgen::splitHeads(FnBuilder &f, Value x, int64_t heads) {
  ArrayRef<int64_t> shape = shapeOf(x);
  return f.reshape(x, {shape[0], shape[1], heads, shape[2] / heads});
}

Value modelgen::headsFirst(FnBuilder &f, Value x) {
  return f.transpose(x, {0, 2, 1, 3});
}

Value modelgen::mergeHeads(FnBuilder &f, Value o) {
  Value t = f.transpose(o, {0, 2, 1, 3});
  ArrayRef<int64_t> shape = shapeOf(t);
  return f.name(f.reshape(t, {shape[0], shape[1], shape[2] * shape[3]}),
                "attn_output");
}

Value modelgen::patchify(FnBuilder &f, Value latents, int64_t patchFrames,
                         int64_t patch, PatchOrder order) {
  ArrayRef<int64_t> shape = shapeOf(latents);
  bool major = order == PatchOrder::ChannelMajor;
  int64_t b = shape[0], c = shape.back(), p = patch;
  if (shape.size() == 4) {
    int64_t h = shape[1] / p, w = shape[2] / p;
    Value x = f.reshape(latents, {b, h, p, w, p, c});
    // → [B, h, w, C, p, p] or [B, h, w, p, p, C].
    x = f.transpose(x, major ? ArrayRef<int64_t>{0, 1, 3, 5, 2, 4}
                             : ArrayRef<int64_t>{0, 1, 3, 2, 4, 5});
    return f.reshape(x, {b, h * w, p * p * c});
  }
  int64_t pf = patchFrames;
  int64_t fr = shape[1] / pf, h = shape[2] / p, w = shape[3] / p;
  Value x = f.reshape(latents, {b, fr, pf, h, p, w, p, c});
  // → [B, f, h, w, C, pf, p, p] or [B, f, h, w, pf, p, p, C].
  x = f.transpose(x, major ? ArrayRef<int64_t>{0, 1, 3, 5, 7, 2, 4, 6}
                           : ArrayRef<int64_t>{0, 1, 3, 5, 2, 4, 6, 7});
  return f.reshape(x, {b, fr * h * w, pf * p * p * c});
}

Value modelgen::unpatchify(FnBuilder &f, Value tokens,
                           ArrayRef<int64_t> latentShape, int64_t patchFrames,
                           int64_t patch, PatchOrder order) {
  bool major = order == PatchOrder::ChannelMajor;
  int64_t b = latentShape[0], c = latentShape.back(), p = patch;
  if (latentShape.size() == 4) {
    int64_t h = latentShape[1] / p, w = latentShape[2] / p;
    Value x = major ? f.reshape(tokens, {b, h, w, c, p, p})
                    : f.reshape(tokens, {b, h, w, p, p, c});
    // → [B, h, p, w, p, C].
    x = f.transpose(x, major ? ArrayRef<int64_t>{0, 1, 4, 2, 5, 3}
                             : ArrayRef<int64_t>{0, 1, 3, 2, 4, 5});
    return f.reshape(x, latentShape);
  }
  int64_t pf = patchFrames;
  int64_t fr = latentShape[1] / pf, h = latentShape[2] / p,
          w = latentShape[3] / p;
  Value x = major ? f.reshape(tokens, {b, fr, h, w, c, pf, p, p})
                  : f.reshape(tokens, {b, fr, h, w, pf, p, p, c});
  // → [B, f, pf, h, p, w, p, C].
  x = f.transpose(x, major ? ArrayRef<int64_t>{0, 1, 5, 2, 6, 3, 7, 4}
                           : ArrayRef<int64_t>{0, 1, 4, 2, 5, 3, 6, 7});
  return f.reshape(x, latentShape);
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

NoisedLatents modelgen::addNoise(FnBuilder &f, PredictionType type,
                                 Value latents, Value noise, Value t) {
  ArrayRef<int64_t> shape = shapeOf(latents);
  Type dtype = cast<RankedTensorType>(latents.getType()).getElementType();
  auto perSample = [&](Value v) {
    return f.broadcast(f.convert(v, dtype), shape, {0});
  };
  if (type == PredictionType::flow) {
    // x_t = (1 − t)·x0 + t·noise = x0 + t·(noise − x0).
    Value target = f.sub(noise, latents);
    return {f.add(latents, f.mul(perSample(t), target)), target};
  }
  // ᾱ = cos²(πt/2): sqrt(ᾱ) = cos(πt/2), sqrt(1 − ᾱ) = sin(πt/2).
  Value angle = f.scale(t, M_PI / 2);
  Value cosB = perSample(f.cos(angle));
  Value signal = f.mul(cosB, latents);
  Value sinB = perSample(f.sin(angle));
  Value input = f.add(signal, f.mul(sinB, noise));
  if (type == PredictionType::epsilon)
    return {input, noise};
  // v = sqrt(ᾱ)·noise − sqrt(1 − ᾱ)·x0 (Salimans & Ho; diffusers'
  // get_velocity), its products written in operand order.
  Value noisePart = f.mul(cosB, noise);
  Value signalPart = f.mul(sinB, latents);
  return {input, f.sub(noisePart, signalPart)};
}
