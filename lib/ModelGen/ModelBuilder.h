//===- ModelBuilder.h - building blocks of model programs ------*- C++ -*-===//
//
// Private to SDModelGen. `FnBuilder` writes the ops of one function with
// inferred types; `ModelBuilder` owns the module, declares the parameters
// and inputs of the model functions (@loss, @denoise), and creates block
// functions and their calls. The
// layer helpers (linear, attention, adaLN, embeddings, RoPE, loss) are the
// pieces the model families share.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_MODELGEN_MODELBUILDER_H
#define SD_LIB_MODELGEN_MODELBUILDER_H

#include "sd/IR/SDOps.h"
#include "sd/ModelGen/ModelGen.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace mlir::sd::modelgen {

/// A trainable parameter to declare. `axes` holds one logical axis name per
/// dimension (`_` for none). `storedShape`, when set, is the shape the
/// reference implementation's checkpoints hold it under, of which `shape`
/// is a row-major view (#sd.param's `stored`).
struct ParamSpec {
  std::string name;
  SmallVector<int64_t> shape;
  InitKind init = InitKind::xavier_uniform;
  double scale = 0.0;
  SmallVector<std::string> axes;
  SmallVector<int64_t> storedShape;
};
using ParamSpecs = SmallVector<ParamSpec>;

/// Appends `name.weight` [out, in] (PyTorch's nn.Linear layout, which
/// `FnBuilder::linear` contracts on its last dimension) and `name.bias`
/// [out] (zeros).
void addLinear(ParamSpecs &specs, const std::string &name, int64_t in,
               int64_t out, StringRef inAxis, StringRef outAxis,
               InitKind init = InitKind::xavier_uniform, double scale = 0.0);
/// Appends a fused projection: PyTorch's Linear(in, k·out) whose output is
/// chunked (qkv, adaLN), stored as `name.weight` [k·out, in] and
/// `name.bias` [k·out] and declared as their row-major views [k, out, in]
/// (logical axes _, outAxis, inAxis) and [k, out]. The chunks are taken
/// from the activation (`linearChunks`), so the weight is used whole and
/// never sliced, and `outAxis` shards every chunk alike.
void addFusedLinear(ParamSpecs &specs, const std::string &name, int64_t in,
                    int64_t k, int64_t out, StringRef inAxis, StringRef outAxis,
                    InitKind init = InitKind::xavier_uniform);
/// Appends a patch embedding: PyTorch's Conv2d/Conv3d(channels, out,
/// kernel = stride = `patch`) as `name.weight` [out, channels·∏patch]
/// (stored [out, channels, patch...]: the conv's weight, whose input
/// dimensions are the patch vectors' channel-major order, `patchify`'s
/// PatchOrder::ChannelMajor) and `name.bias` [out].
void addPatchEmbedding(ParamSpecs &specs, const std::string &name,
                       int64_t channels, ArrayRef<int64_t> patch, int64_t out,
                       StringRef outAxis);
/// Appends a 2-D convolution in PyTorch's layout: `name.weight` [out, in,
/// kernel, kernel] (logical axes conv_out, conv_in, _, _; uniform within
/// ±1/sqrt(in·kernel²), PyTorch's default) and `name.bias` [out] (zeros).
/// `FnBuilder::conv2d` transposes the weight to the op's HWIO.
void addConv(ParamSpecs &specs, const std::string &name, int64_t in,
             int64_t out, int64_t kernel);
/// Appends a parameter of any shape (a norm scale or bias, an embedding).
void addParam(ParamSpecs &specs, const std::string &name,
              ArrayRef<int64_t> shape, ArrayRef<StringRef> axes, InitKind init,
              double scale = 0.0);

/// Parameters by local name (`attn.qkv.weight`).
using ParamMap = llvm::StringMap<Value>;

/// Writes the ops of one function body at the end of its entry block.
class FnBuilder {
public:
  /// `batch` is the batch size in types: ShapedType::kDynamic or static.
  FnBuilder(Block *block, Type dtype, int64_t batch);

  OpBuilder &getBuilder() { return builder; }
  Location getLoc() const { return loc; }
  /// The activation element type (f32 or bf16).
  Type getDType() const { return dtype; }
  Type getF32() { return builder.getF32Type(); }
  /// The batch size in types: dynamic unless the program is static.
  int64_t getBatch() const { return batch; }

  /// A tensor with a dynamic batch dimension (dim 0) from which the
  /// function derives a batch-shaped vector of ones (see `expand`).
  void setBatchSource(Value source) { batchSource = source; }

  /// Names a value for remat policies (`sd.name` on its defining op).
  Value name(Value value, StringRef name);

  // Elementwise.
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value neg(Value a);
  Value exp(Value a);
  Value sin(Value a);
  Value cos(Value a);
  Value silu(Value a);
  /// GELU, by default with the tanh approximation (DiT, Wan, Flux); exact
  /// as diffusers' GEGLU.
  Value gelu(Value a, bool approximate = true);
  Value convert(Value a, Type elementType);
  /// `value · factor` for a batch-free or batch-carrying value.
  Value scale(Value value, double factor);

  // Constants (static shapes only).
  Value splat(double value, ArrayRef<int64_t> shape, Type elementType = {});
  /// Indices along `dim` of an f32 tensor of `shape`.
  Value iota(ArrayRef<int64_t> shape, int64_t dim);

  // Shapes.
  Value reshape(Value value, ArrayRef<int64_t> shape);
  Value transpose(Value value, ArrayRef<int64_t> permutation);
  /// `value[start:limit]` along `dim`, every other dimension whole (a
  /// dynamic one with limit -1, the end, so the slice specializes).
  Value slice(Value value, int64_t dim, int64_t start, int64_t limit);
  Value concat(ValueRange values, int64_t dim);
  /// broadcast_in_dim to `shape` (operand dim i → result dim dims[i]).
  Value broadcast(Value value, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims);
  /// Broadcasts a batch-free `value` into `shape`, whose dim 0 is the batch:
  /// the value, viewed (reshaped) as the sizes of `shape` at `dims` (each
  /// ≥ 1), fills those dimensions. With a static batch this is one
  /// broadcast_in_dim. With a dynamic batch, sd-specialize-batch could not size
  /// a batch dimension that no operand carries, so the batch comes in through
  /// an outer product with a [B, 1] vector of ones: dot_general(ones, value as
  /// [1, n]) → [B, n], reshaped and broadcast.
  Value expand(Value value, ArrayRef<int64_t> shape, ArrayRef<int64_t> dims);

  // Linear algebra and normalization.
  /// Contracts the last dimension of `x` with dim 0 of `w`: [..., n] ·
  /// [n, m] → [..., m] (an embedding table read by one-hot rows, an outer
  /// product over a unit dimension).
  Value dot(Value x, Value w);
  /// `x·Wᵀ + b` of a PyTorch Linear weight: the last dimensions of `x` and
  /// `w` contract, [..., in] · [out, in] → [..., out], or a fused [k, out,
  /// in] → [..., k, out]; the bias ([out] or [k, out], or null) is
  /// broadcast over the leading dimensions.
  Value linear(Value x, Value w, Value b);
  /// Adds `bias` ([out] or [k, out]) along the trailing dimensions of `x`.
  Value addBias(Value x, Value bias);
  Value layerNorm(Value x, Value scale = {}, Value bias = {},
                  double epsilon = 1e-6);
  /// Group norm of channels-last x [B, ..., C] with per-channel scale and
  /// bias.
  Value groupNorm(Value x, Value scale, Value bias, int64_t groups,
                  double epsilon);
  /// A convolution of NHWC x with a PyTorch-layout weight [Cout, Cin, K, K]
  /// (`addConv`), square strides and zero padding on every side.
  Value conv2d(Value x, Value weight, Value bias, int64_t stride,
               int64_t padding);
  /// Nearest-neighbour upsampling of NHWC x by `factor` in H and W.
  Value upsampleNearest(Value x, int64_t factor);
  Value rmsNorm(Value x, Value scale);
  /// Attention of q [B, H, Sq, D] over k, v [B, H, Skv, D], whose operands
  /// are constrained to MaxDiffusion's activation names (batch, heads,
  /// length, kv), as its attention layers constrain theirs, so that the
  /// logical rules can shard the sequence (context parallelism): the keys'
  /// length is `activation_length` for self-attention (one sequence) and
  /// `activation_kv_length` for cross-attention.
  Value attention(Value q, Value k, Value v, bool selfAttention = true);
  Value mseLoss(Value pred, Value target);

private:
  /// A [B, 1] tensor of ones of `elementType`, derived from batchSource.
  Value ones(Type elementType);

  OpBuilder builder;
  Location loc;
  Type dtype;
  int64_t batch;
  Value batchSource;
  /// Vectors of ones by element type, made on first use.
  DenseMap<Type, Value> onesCache;
};

/// The module under construction and its public model functions (@loss,
/// @denoise). One model function is built at a time, the current one:
/// inputs, parameters and block calls go to it. Block functions are shared
/// by all model functions.
class ModelBuilder {
public:
  ModelBuilder(MLIRContext &context, const ModelConfig &config);

  const ModelConfig &getConfig() const { return config; }
  Type getDType() const { return dtype; }
  /// The batch dimension of types: dynamic, or the static batch.
  int64_t getBatchDim() const {
    return config.staticBatch ? config.batch : ShapedType::kDynamic;
  }

  /// Starts the public function @name, after the previous ones, and makes
  /// it current. It carries `sd.default_batch`.
  func::FuncOp beginFunction(StringRef name);
  /// The builder of the current function's body.
  FnBuilder &fn() { return *body; }
  /// Returns `results` from the current function, whose result types they
  /// become.
  void endFunction(ValueRange results);

  /// Appends a model input to the current function.
  Value input(InputKind kind, ArrayRef<int64_t> shape, Type elementType,
              ArrayRef<StringRef> axes);
  /// Declares a parameter of the current function (after its parameters,
  /// before its inputs), named `prefix + spec.name`.
  Value param(const ParamSpec &spec, StringRef prefix = "");
  /// Declares all of `specs`; the map is keyed by `spec.name`.
  ParamMap params(ArrayRef<ParamSpec> specs, StringRef prefix = "");

  /// The body of a block function: its leading arguments and parameters in,
  /// its results out.
  using BlockBody = std::function<SmallVector<Value>(
      FnBuilder &, ArrayRef<Value> leading, const ParamMap &)>;
  /// Creates private function @name(leading..., params in spec order)
  /// before the first model function; a second request for @name returns
  /// the function the first one created (`body` is not run again).
  func::FuncOp blockFunction(StringRef name, TypeRange leadingTypes,
                             ArrayRef<ParamSpec> specs, const BlockBody &body);
  /// Declares the parameters `prefix + spec.name` and calls `func` from the
  /// current function.
  SmallVector<Value> callBlock(func::FuncOp func, ValueRange leading,
                               ArrayRef<ParamSpec> specs, StringRef prefix);

  /// Verifies the module and hands it over.
  OwningOpRef<ModuleOp> finish();

private:
  MLIRContext &context;
  const ModelConfig &config;
  Type dtype;
  OwningOpRef<ModuleOp> module;
  /// The first model function: block functions go before it.
  func::FuncOp firstFunc;
  /// The current model function, its body and its number of parameters.
  func::FuncOp func;
  std::unique_ptr<FnBuilder> body;
  unsigned numParams = 0;
  llvm::StringMap<func::FuncOp> blockFunctions;
};

/// What a model family gives `buildModelFunctions`: the shape of its
/// latents and its network, split so that @loss and @denoise share it.
struct ModelNetwork {
  SmallVector<int64_t> latentShape;
  SmallVector<StringRef> latentAxes;
  /// Declares the inputs after the latents (and the noise) in the current
  /// function: the timestep [B] first, then the conditioning.
  std::function<SmallVector<Value>(ModelBuilder &)> conditions;
  /// The network's output for noised latents x_t and the conditions:
  /// declares the parameters and calls the block functions.
  std::function<Value(ModelBuilder &, Value xt, ArrayRef<Value> conditions)>
      predict;
  /// The loss of an output against the target in latent layout; default
  /// the MSE of the output.
  std::function<Value(FnBuilder &, Value output, Value target)> loss;
  /// The output in latent layout, for @denoise; default the output itself.
  std::function<Value(FnBuilder &, Value output)> toLatents;
  /// With @denoise, also write @forward: the network's whole output (the
  /// reference's forward(), e.g. DiT's learned sigma), for sdsample
  /// --predict.
  bool withForward = false;
  /// Attributes every model function carries (Flux's sd.guidance).
  SmallVector<NamedAttribute> functionAttributes;
};

/// Writes @loss(params..., latents, noise, conditions...) -> loss and, with
/// `withDenoise`, @denoise(params..., x_t, conditions...) -> prediction
/// [latentShape] and, with the network's `withForward`, @forward(params...,
/// x_t, conditions...) -> output: the same network, parameters and block
/// functions.
void buildModelFunctions(ModelBuilder &mb, const ModelNetwork &network);

//===----------------------------------------------------------------------===//
// Layers shared by the model families (Layers.cpp)
//===----------------------------------------------------------------------===//

/// `x·(1 + scale) + shift`, written `x + x·scale + shift` (no constant of
/// batch shape); x is [B, S, D], shift and scale [B, D].
Value modulate(FnBuilder &f, Value x, Value shift, Value scale);
/// `x + gate·y` with gate [B, D] broadcast over the sequence.
Value gatedResidual(FnBuilder &f, Value x, Value gate, Value y);
/// layerNorm(x) modulated by the shift and scale of the fused linear
/// `name` [D, 2, D] of SiLU(c) (the final layers of DiT and Flux).
Value modulatedNorm(FnBuilder &f, const ParamMap &p, StringRef name, Value x,
                    Value condSilu);
/// Chunk `index` of a fused value [..., k, out]: [..., out].
Value chunk(FnBuilder &f, Value fused, int64_t index);
/// The k chunks [..., out] of a fused projection (`addFusedLinear`): one
/// dot_general of x [..., in] with the whole weight [in, k, out], the bias
/// [k, out], then a slice of the activation per chunk. `fused`, when given,
/// receives the projection [..., k, out] (to name it).
SmallVector<Value> linearChunks(FnBuilder &f, Value x, Value w, Value b,
                                Value *fused = nullptr);

/// Sinusoidal embedding [cos, sin] of t·1000 with `dim` frequencies as in
/// DiT, Wan, Flux and the UNets; `t` is f32 [B] (or static [1]); result in
/// the dtype.
Value timestepEmbedding(FnBuilder &f, Value t, int64_t dim);
/// The same features of each entry of `ids` [B, n], unscaled (SDXL's size
/// and crop ids): [B, n·dim], each id's [cos, sin] in turn.
Value idEmbedding(FnBuilder &f, Value ids, int64_t dim);
/// DiT's fixed 2-D sin-cos position embedding [gh·gw, dim], f32.
Value sinCos2D(FnBuilder &f, int64_t gridH, int64_t gridW, int64_t dim);

/// RoPE rotation angles [F·H·W, pairs] of a token grid: axis a of the grid
/// gets `axisPairs[a]` frequencies theta^(−2k/(2·axisPairs[a])).
Value ropeAngles(FnBuilder &f, ArrayRef<int64_t> grid,
                 ArrayRef<int64_t> axisPairs, double theta = 10000.0);
/// The 2×2 rotation per position and pair, [S, P, 2, 2] in the dtype, from
/// angles [S, P]: [[cos, sin], [−sin, cos]].
Value ropeMatrix(FnBuilder &f, Value angles);
/// Rotates adjacent pairs of x [B, S, H, Dh] by `rotation` [S, Dh/2, 2, 2]:
/// one dot_general with batch dimensions (S, pair).
Value applyRope(FnBuilder &f, Value x, Value rotation);

/// [B, S, H·Dh] → [B, S, H, Dh].
Value splitHeads(FnBuilder &f, Value x, int64_t heads);
/// [B, S, H, Dh] → [B, H, S, Dh].
Value headsFirst(FnBuilder &f, Value x);
/// Attention output [B, H, S, Dh] → [B, S, H·Dh], named attn_output.
Value mergeHeads(FnBuilder &f, Value o);

/// How the values of one patch are ordered in a token: channel-major
/// (c, [t,] i, j), as a flattened convolution weight [D, C, ...] and Flux's
/// "(c ph pw)"; or channel-minor ([t,] i, j, c), as DiT and Wan unpatchify.
enum class PatchOrder { ChannelMajor, ChannelMinor };

/// Patchifies latents [B, F, H, W, C] (or [B, H, W, C]) with patch
/// (pf, p, p) into tokens [B, S, pf·p·p·C], tokens row-major over the grid.
Value patchify(FnBuilder &f, Value latents, int64_t patchFrames, int64_t patch,
               PatchOrder order);
/// The inverse of patchify into `latentShape` (with the batch).
Value unpatchify(FnBuilder &f, Value tokens, ArrayRef<int64_t> latentShape,
                 int64_t patchFrames, int64_t patch, PatchOrder order);

/// The noised input and the regression target of the configured loss.
struct NoisedLatents {
  Value input;
  Value target;
};
NoisedLatents addNoise(FnBuilder &f, PredictionType type, Value latents,
                       Value noise, Value t);

//===----------------------------------------------------------------------===//
// Model families
//===----------------------------------------------------------------------===//

/// Each writes the model functions into `mb` (`buildModelFunctions`).
void buildDiT(ModelBuilder &mb);
void buildWan(ModelBuilder &mb);
void buildFlux(ModelBuilder &mb);
void buildUNet(ModelBuilder &mb);

} // namespace mlir::sd::modelgen

#endif // SD_LIB_MODELGEN_MODELBUILDER_H
