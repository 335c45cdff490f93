//===- PartitionOpsDifferentialTest.cpp - every op partitioned ------------===//
//
// PartitionDifferentialTest's check, op by op: each sd op that can have a
// sharded operand runs with that operand sharded (by the dit logical axis
// rules: batch -> data,fsdp; activation_length -> context; heads, mlp ->
// tensor; embed -> fsdp) on the meshes data:2, fsdp:2, tensor:2, context:2
// and data:2,fsdp:2,context:2,tensor:2, partitioned and evaluated on every
// device, and compared with the unpartitioned program on one device. On
// the four-axis mesh each test also requires its ops to have a per-device
// operand (or, for iota / rng / constant, result) smaller than the global
// one.
//
//===----------------------------------------------------------------------===//

#include "PartitionTestUtils.h"

#include <initializer_list>
#include <map>
#include <string>

using namespace sd::testing;
using namespace sd::testing::partition;

namespace {

constexpr llvm::StringLiteral kFullMesh = "data:2,fsdp:2,context:2,tensor:2";

class PartitionOpsDifferentialTest : public PartitionTestBase {
protected:
  /// Checks `source`'s @main (batch 8) and, on the four-axis mesh, that
  /// each of `ops` has a sharded operand.
  void checkOps(llvm::StringRef source,
                std::initializer_list<const char *> ops) {
    check(source, "main", 8);
    if (GetParam() != kFullMesh || HasFailure())
      return;
    for (const char *op : ops)
      EXPECT_TRUE(shardedOps.count(op))
          << op << " has no sharded operand on " << GetParam();
  }
};

// Unary elementwise ops; log, sqrt and rsqrt of positive values.
constexpr llvm::StringLiteral kUnary = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %e = sd.exp %x : tensor<8x16x32xf32>
  %t = sd.tanh %x : tensor<8x16x32xf32>
  %ga = sd.gelu %x : tensor<8x16x32xf32>
  %ge = sd.gelu %x {approximate = false} : tensor<8x16x32xf32>
  %si = sd.silu %x : tensor<8x16x32xf32>
  %sg = sd.sigmoid %x : tensor<8x16x32xf32>
  %n = sd.neg %x : tensor<8x16x32xf32>
  %s = sd.sin %x : tensor<8x16x32xf32>
  %c = sd.cos %x : tensor<8x16x32xf32>
  %l = sd.log %e : tensor<8x16x32xf32>
  %q = sd.sqrt %e : tensor<8x16x32xf32>
  %r = sd.rsqrt %e : tensor<8x16x32xf32>
  return %e, %t, %ga, %ge, %si, %sg, %n, %s, %c, %l, %q, %r
      : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// Binary elementwise ops; div by and pow of positive values.
constexpr llvm::StringLiteral kBinary = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>},
                %y: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<noise>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %a = sd.add %x, %y : tensor<8x16x32xf32>
  %s = sd.sub %x, %y : tensor<8x16x32xf32>
  %m = sd.mul %x, %y : tensor<8x16x32xf32>
  %ey = sd.exp %y : tensor<8x16x32xf32>
  %d = sd.div %x, %ey : tensor<8x16x32xf32>
  %mx = sd.max %x, %y : tensor<8x16x32xf32>
  %mn = sd.min %x, %y : tensor<8x16x32xf32>
  %half = sd.constant dense<0.5> : tensor<8x16x32xf32>
  %ex = sd.exp %x : tensor<8x16x32xf32>
  %hy = sd.mul %y, %half : tensor<8x16x32xf32>
  %p = sd.pow %ex, %hy : tensor<8x16x32xf32>
  return %a, %s, %m, %d, %mx, %mn, %p
      : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>,
        tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// AdamW's update of a sharded parameter, with and without weight decay;
// its learning rate is a sum over every element (partial sums on each
// device until reduced).
constexpr llvm::StringLiteral kAdamW = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>},
                %y: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<noise>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %mu = sd.tanh %x : tensor<8x16x32xf32>
  %nu = sd.mul %y, %y : tensor<8x16x32xf32>
  %xx = sd.mul %x, %x : tensor<8x16x32xf32>
  %mean = sd.reduce_mean %xx dims = [0, 1, 2] : (tensor<8x16x32xf32>) -> tensor<f32>
  %milli = sd.constant dense<1.0e-3> : tensor<f32>
  %lr = sd.mul %mean, %milli : tensor<f32>
  %c1 = sd.constant dense<0.19> : tensor<f32>
  %c2 = sd.constant dense<0.002> : tensor<f32>
  %b1 = sd.constant dense<0.9> : tensor<f32>
  %omb1 = sd.constant dense<0.1> : tensor<f32>
  %b2 = sd.constant dense<0.999> : tensor<f32>
  %omb2 = sd.constant dense<0.001> : tensor<f32>
  %eps = sd.constant dense<1.0e-8> : tensor<f32>
  %wd = sd.constant dense<0.01> : tensor<f32>
  %p1, %m1, %v1 = sd.adamw %x, %y, %mu, %nu lr = %lr corrections = (%c1, %c2) beta1 = (%b1, %omb1) beta2 = (%b2, %omb2) eps = %eps weight_decay = %wd : tensor<8x16x32xf32>
  %p2, %m2, %v2 = sd.adamw %x, %y, %mu, %nu lr = %lr corrections = (%c1, %c2) beta1 = (%b1, %omb1) beta2 = (%b2, %omb2) eps = %eps : tensor<8x16x32xf32>
  return %p1, %m1, %v1, %p2 : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// compare + select, and convert f32 -> bf16 -> f32.
constexpr llvm::StringLiteral kSelectConvert = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>},
                %y: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<noise>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %p = sd.compare gt, %x, %y : tensor<8x16x32xf32>
  %s = sd.select %p, %x, %y : tensor<8x16x32xi1>, tensor<8x16x32xf32>
  %b = sd.convert %x : tensor<8x16x32xf32> -> tensor<8x16x32xbf16>
  %f = sd.convert %b : tensor<8x16x32xbf16> -> tensor<8x16x32xf32>
  return %s, %f : tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// Reductions: sums and means over sharded and unsharded dimensions, max
// over an unsharded one.
constexpr llvm::StringLiteral kReduce = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, _]>, sd.role = #sd.input<latents>})
    -> (tensor<8x32xf32>, tensor<8x16xf32>, tensor<16x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<f32>) {
  %s1 = sd.reduce_sum %x dims = [1] : (tensor<8x16x32xf32>) -> tensor<8x32xf32>
  %s2 = sd.reduce_sum %x dims = [2] : (tensor<8x16x32xf32>) -> tensor<8x16xf32>
  %s0 = sd.reduce_sum %x dims = [0] : (tensor<8x16x32xf32>) -> tensor<16x32xf32>
  %mx = sd.reduce_max %x dims = [2] : (tensor<8x16x32xf32>) -> tensor<8x16xf32>
  %m1 = sd.reduce_mean %x dims = [1] : (tensor<8x16x32xf32>) -> tensor<8x32xf32>
  %ma = sd.reduce_mean %x dims = [0, 1, 2] : (tensor<8x16x32xf32>) -> tensor<f32>
  return %s1, %s2, %s0, %mx, %m1, %ma : tensor<8x32xf32>, tensor<8x16xf32>, tensor<16x32xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<f32>
}
)mlir";

// broadcast_in_dim of a sharded bias.
constexpr llvm::StringLiteral kBroadcast = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>},
                %b: tensor<32xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"b", normal(1.0)>},
                %c: tensor<8x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, mlp]>, sd.role = #sd.param<"c", normal(1.0)>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %bb = sd.broadcast_in_dim %b dims = [2] : (tensor<32xf32>) -> tensor<8x16x32xf32>
  %y = sd.add %x, %bb : tensor<8x16x32xf32>
  %cb = sd.broadcast_in_dim %c dims = [0, 2] : (tensor<8x32xf32>) -> tensor<8x16x32xf32>
  %z = sd.mul %x, %cb : tensor<8x16x32xf32>
  return %y, %z : tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// reshape splitting a sharded dimension (heads into 4 x 8) and merging a
// sharded one with the next (length x heads).
constexpr llvm::StringLiteral kReshape = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, heads]>, sd.role = #sd.input<latents>})
    -> (tensor<8x16x4x8xf32>, tensor<8x512xf32>) {
  %s = sd.reshape %x : (tensor<8x16x32xf32>) -> tensor<8x16x4x8xf32>
  %m = sd.reshape %x : (tensor<8x16x32xf32>) -> tensor<8x512xf32>
  %e = sd.exp %m : tensor<8x512xf32>
  return %s, %e : tensor<8x16x4x8xf32>, tensor<8x512xf32>
}
)mlir";

// transpose of a tensor sharded on every dimension.
constexpr llvm::StringLiteral kTranspose = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, heads]>, sd.role = #sd.input<latents>})
    -> tensor<16x32x8xf32> {
  %t = sd.transpose %x permutation = [1, 2, 0] : (tensor<8x16x32xf32>) -> tensor<16x32x8xf32>
  return %t : tensor<16x32x8xf32>
}
)mlir";

// slice and pad along the unsharded dimension of sharded tensors; concat
// along it.
constexpr llvm::StringLiteral kSlicePadConcat = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, _]>, sd.role = #sd.input<latents>},
                %y: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, _]>, sd.role = #sd.input<noise>})
    -> (tensor<8x16x8xf32>, tensor<8x16x35xf32>, tensor<8x16x64xf32>) {
  %s = sd.slice %x start = [0, 0, 4] limit = [8, 16, 20] strides = [1, 1, 2] : (tensor<8x16x32xf32>) -> tensor<8x16x8xf32>
  %p = sd.pad %x low = [0, 0, 1] high = [0, 0, 2] {padding_value = 0.5 : f64} : (tensor<8x16x32xf32>) -> tensor<8x16x35xf32>
  %c = sd.concat %x, %y dim = 2 : (tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x16x64xf32>
  return %s, %p, %c : tensor<8x16x8xf32>, tensor<8x16x35xf32>, tensor<8x16x64xf32>
}
)mlir";

// concat along a sharded dimension.
constexpr llvm::StringLiteral kConcatSharded = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, _]>, sd.role = #sd.input<latents>},
                %y: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, _]>, sd.role = #sd.input<noise>})
    -> tensor<8x32x32xf32> {
  %c = sd.concat %x, %y dim = 1 : (tensor<8x16x32xf32>, tensor<8x16x32xf32>) -> tensor<8x32x32xf32>
  return %c : tensor<8x32x32xf32>
}
)mlir";

// dot_general with batch dimensions (attention scores), and with a sharded
// contracting dimension (partial sums).
constexpr llvm::StringLiteral kDotGeneral = R"mlir(
func.func @main(%q: tensor<8x4x16x8xf32> {sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, _]>, sd.role = #sd.input<latents>},
                %k: tensor<8x4x8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, heads, _, _]>, sd.role = #sd.input<noise>},
                %x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.param<"x", normal(1.0)>},
                %w: tensor<32x24xf32> {sd.logical_axes = #sd.logical_axes<[mlp, _]>, sd.role = #sd.param<"w", normal(0.2)>})
    -> (tensor<8x4x16x16xf32>, tensor<8x16x24xf32>) {
  %s = sd.dot_general %q, %k batch = [0, 1] x [0, 1] contract = [3] x [2] : (tensor<8x4x16x8xf32>, tensor<8x4x8x16xf32>) -> tensor<8x4x16x16xf32>
  %o = sd.dot_general %x, %w batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x24xf32>) -> tensor<8x16x24xf32>
  return %s, %o : tensor<8x4x16x16xf32>, tensor<8x16x24xf32>
}
)mlir";

// layer_norm, rms_norm and group_norm with scale and bias.
constexpr llvm::StringLiteral kNorms = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<latents>},
                %img: tensor<8x4x4x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>},
                %s: tensor<32xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"s", normal(1.0)>},
                %b: tensor<32xf32> {sd.logical_axes = #sd.logical_axes<[embed]>, sd.role = #sd.param<"b", normal(1.0)>},
                %gs: tensor<16xf32> {sd.role = #sd.param<"gs", normal(1.0)>},
                %gb: tensor<16xf32> {sd.role = #sd.param<"gb", normal(1.0)>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x4x4x16xf32>) {
  %l = sd.layer_norm %x scale %s bias %b : (tensor<8x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<8x16x32xf32>
  %r = sd.rms_norm %x scale %s : (tensor<8x16x32xf32>, tensor<32xf32>) -> tensor<8x16x32xf32>
  %g = sd.group_norm %img scale %gs bias %gb groups = 4 : (tensor<8x4x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x4x4x16xf32>
  return %l, %r, %g : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<8x4x4x16xf32>
}
)mlir";

// softmax over an unsharded and over a sharded dimension.
constexpr llvm::StringLiteral kSoftmax = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, heads]>, sd.role = #sd.input<latents>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>) {
  %a = sd.softmax %x dim = 2 : tensor<8x16x32xf32>
  %b = sd.softmax %x dim = 1 : tensor<8x16x32xf32>
  return %a, %b : tensor<8x16x32xf32>, tensor<8x16x32xf32>
}
)mlir";

// attention without a mask and with a causal one.
constexpr llvm::StringLiteral kAttentionMask = R"mlir(
func.func @main(%q: tensor<8x4x16x8xf32> {sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, _]>, sd.role = #sd.input<latents>},
                %k: tensor<8x4x16x8xf32> {sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, _]>, sd.role = #sd.input<noise>},
                %v: tensor<8x4x16x8xf32> {sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, _]>, sd.role = #sd.param<"v", normal(1.0)>})
    -> (tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>) {
  %a = sd.attention %q, %k, %v : (tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>) -> tensor<8x4x16x8xf32>
  %qi = sd.iota dim = 2 : tensor<8x1x16x16xf32>
  %ki = sd.iota dim = 3 : tensor<8x1x16x16xf32>
  %m = sd.compare ge, %qi, %ki : tensor<8x1x16x16xf32>
  %b = sd.attention %q, %k, %v mask %m scale = 0.5 : (tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>, tensor<8x1x16x16xi1>) -> tensor<8x4x16x8xf32>
  return %a, %b : tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>
}
)mlir";

// conv2d sharded on the batch.
constexpr llvm::StringLiteral kConvBatch = R"mlir(
func.func @main(%x: tensor<8x8x8x4xf32> {sd.logical_axes = #sd.logical_axes<[conv_batch, _, _, _]>, sd.role = #sd.input<latents>},
                %w: tensor<3x3x4x8xf32> {sd.role = #sd.param<"w", normal(0.3)>},
                %b: tensor<8xf32> {sd.role = #sd.param<"b", normal(1.0)>})
    -> tensor<8x8x8x8xf32> {
  %y = sd.conv2d %x, %w bias %b strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<3x3x4x8xf32>, tensor<8xf32>) -> tensor<8x8x8x8xf32>
  return %y : tensor<8x8x8x8xf32>
}
)mlir";

// conv2d with the input channels sharded (groups = 1: partial sums).
constexpr llvm::StringLiteral kConvCin = R"mlir(
func.func @main(%x: tensor<8x8x8x4xf32> {sd.logical_axes = #sd.logical_axes<[conv_batch, _, _, mlp]>, sd.role = #sd.input<latents>},
                %w: tensor<3x3x4x8xf32> {sd.logical_axes = #sd.logical_axes<[_, _, mlp, _]>, sd.role = #sd.param<"w", normal(0.3)>})
    -> tensor<8x4x4x8xf32> {
  %y = sd.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<8x4x4x8xf32>
  return %y : tensor<8x4x4x8xf32>
}
)mlir";

// Convolutions and group norm with the image split: height on context
// (activation_length) and width on tensor (mlp), so that each device
// exchanges halo rows, then columns (corners included), with its
// neighbours: same-size 3×3, stride-2 3×3, 1×1 and a 5×5, forward and both
// gradients.
constexpr llvm::StringLiteral kConvHalo = R"mlir(
func.func @main(%x: tensor<8x8x8x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp, _]>, sd.role = #sd.input<latents>},
                %dy: tensor<8x8x8x6xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp, _]>, sd.role = #sd.input<noise>},
                %w: tensor<3x3x4x6xf32> {sd.role = #sd.param<"w", normal(0.3)>},
                %w5: tensor<5x5x4x6xf32> {sd.role = #sd.param<"w5", normal(0.3)>},
                %w1: tensor<1x1x4x6xf32> {sd.role = #sd.param<"w1", normal(0.3)>},
                %b: tensor<6xf32> {sd.role = #sd.param<"b", normal(1.0)>},
                %g: tensor<4xf32> {sd.role = #sd.param<"g", normal(1.0)>})
    -> (tensor<8x8x8x6xf32>, tensor<8x4x4x6xf32>, tensor<8x8x8x6xf32>, tensor<8x8x8x6xf32>,
        tensor<8x8x8x4xf32>, tensor<8x8x8x4xf32>, tensor<8x8x8x4xf32>,
        tensor<3x3x4x6xf32>, tensor<3x3x4x6xf32>, tensor<5x5x4x6xf32>, tensor<8x8x8x4xf32>) {
  %same = sd.conv2d %x, %w bias %b strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<3x3x4x6xf32>, tensor<6xf32>) -> tensor<8x8x8x6xf32>
  %down = sd.conv2d %x, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<3x3x4x6xf32>) -> tensor<8x4x4x6xf32>
  %point = sd.conv2d %x, %w1 strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<8x8x8x4xf32>, tensor<1x1x4x6xf32>) -> tensor<8x8x8x6xf32>
  %wide = sd.conv2d %x, %w5 strides = [1, 1] padding = [2, 2, 2, 2] groups = 1 : (tensor<8x8x8x4xf32>, tensor<5x5x4x6xf32>) -> tensor<8x8x8x6xf32>
  %dx = sd.conv2d_input_grad %dy, %w strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x6xf32>, tensor<3x3x4x6xf32>) -> tensor<8x8x8x4xf32>
  %dx2 = sd.conv2d_input_grad %down, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x4x4x6xf32>, tensor<3x3x4x6xf32>) -> tensor<8x8x8x4xf32>
  %dx5 = sd.conv2d_input_grad %wide, %w5 strides = [1, 1] padding = [2, 2, 2, 2] groups = 1 : (tensor<8x8x8x6xf32>, tensor<5x5x4x6xf32>) -> tensor<8x8x8x4xf32>
  %dw = sd.conv2d_filter_grad %x, %dy strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<8x8x8x6xf32>) -> tensor<3x3x4x6xf32>
  %dw2 = sd.conv2d_filter_grad %x, %down strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<8x8x8x4xf32>, tensor<8x4x4x6xf32>) -> tensor<3x3x4x6xf32>
  %dw5 = sd.conv2d_filter_grad %x, %wide strides = [1, 1] padding = [2, 2, 2, 2] groups = 1 : (tensor<8x8x8x4xf32>, tensor<8x8x8x6xf32>) -> tensor<5x5x4x6xf32>
  %gn = sd.group_norm %x scale %g bias %g groups = 2 {epsilon = 1.0e-5 : f64} : (tensor<8x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x8x8x4xf32>
  return %same, %down, %point, %wide, %dx, %dx2, %dx5, %dw, %dw2, %dw5, %gn
      : tensor<8x8x8x6xf32>, tensor<8x4x4x6xf32>, tensor<8x8x8x6xf32>, tensor<8x8x8x6xf32>,
        tensor<8x8x8x4xf32>, tensor<8x8x8x4xf32>, tensor<8x8x8x4xf32>,
        tensor<3x3x4x6xf32>, tensor<3x3x4x6xf32>, tensor<5x5x4x6xf32>, tensor<8x8x8x4xf32>
}
)mlir";

// upsample_nearest of a batch- and channel-sharded image.
constexpr llvm::StringLiteral kUpsample = R"mlir(
func.func @main(%x: tensor<8x4x4x8xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, heads]>, sd.role = #sd.input<latents>})
    -> tensor<8x8x12x8xf32> {
  %y = sd.upsample_nearest %x scale = [2, 3] : (tensor<8x4x4x8xf32>) -> tensor<8x8x12x8xf32>
  return %y : tensor<8x8x12x8xf32>
}
)mlir";

// iota, rng and constants made sharded by constraints.
constexpr llvm::StringLiteral kSourcesSharded = R"mlir(
func.func @main(%x: tensor<8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length]>, sd.role = #sd.input<latents>})
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x2xf32>) {
  %i0 = sd.iota dim = 1 : tensor<8x16xf32>
  %i = sd.sharding_constraint %i0 logical = <[batch, activation_length]> : tensor<8x16xf32>
  %r0 = sd.rng_normal seed = 3 : tensor<8x16xf32>
  %r = sd.sharding_constraint %r0 logical = <[batch, activation_length]> : tensor<8x16xf32>
  %u0 = sd.rng_uniform seed = 4 {high = 3.0 : f64, low = 1.0 : f64} : tensor<8x16xf32>
  %u = sd.sharding_constraint %u0 logical = <[batch, activation_length]> : tensor<8x16xf32>
  %c0 = sd.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0], [-7.0, -8.0]]> : tensor<8x2xf32>
  %c = sd.sharding_constraint %c0 logical = <[batch, _]> : tensor<8x2xf32>
  %a = sd.add %x, %i : tensor<8x16xf32>
  %b = sd.mul %x, %r : tensor<8x16xf32>
  %d = sd.mul %x, %u : tensor<8x16xf32>
  %e = sd.exp %c : tensor<8x2xf32>
  return %a, %b, %d, %e : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x2xf32>
}
)mlir";

// mse_loss of sharded predictions, and sharding_constraint moving a value.
constexpr llvm::StringLiteral kLossConstraint = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<latents>},
                %t: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, mlp]>, sd.role = #sd.input<noise>})
    -> (tensor<f32>, tensor<8x16x32xf32>) {
  %l = sd.mse_loss %x, %t : tensor<8x16x32xf32>
  %c = sd.sharding_constraint %x logical = <[activation_length, batch, _]> : tensor<8x16x32xf32>
  %e = sd.exp %c : tensor<8x16x32xf32>
  return %l, %e : tensor<f32>, tensor<8x16x32xf32>
}
)mlir";

TEST_P(PartitionOpsDifferentialTest, Unary) {
  checkOps(kUnary, {"sd.exp", "sd.tanh", "sd.gelu", "sd.silu", "sd.sigmoid",
                    "sd.neg", "sd.sin", "sd.cos", "sd.log", "sd.sqrt",
                    "sd.rsqrt"});
}

TEST_P(PartitionOpsDifferentialTest, Binary) {
  checkOps(kBinary, {"sd.add", "sd.sub", "sd.mul", "sd.div", "sd.max",
                     "sd.min", "sd.pow"});
}

TEST_P(PartitionOpsDifferentialTest, AdamW) {
  checkOps(kAdamW, {"sd.adamw"});
}

TEST_P(PartitionOpsDifferentialTest, CompareSelectConvert) {
  checkOps(kSelectConvert, {"sd.compare", "sd.select", "sd.convert"});
}

TEST_P(PartitionOpsDifferentialTest, Reduce) {
  checkOps(kReduce, {"sd.reduce_sum", "sd.reduce_max", "sd.reduce_mean"});
}

TEST_P(PartitionOpsDifferentialTest, BroadcastInDim) {
  checkOps(kBroadcast, {"sd.broadcast_in_dim"});
}

TEST_P(PartitionOpsDifferentialTest, Reshape) {
  checkOps(kReshape, {"sd.reshape"});
}

TEST_P(PartitionOpsDifferentialTest, Transpose) {
  checkOps(kTranspose, {"sd.transpose"});
}

TEST_P(PartitionOpsDifferentialTest, SlicePadConcat) {
  checkOps(kSlicePadConcat, {"sd.slice", "sd.pad", "sd.concat"});
}

TEST_P(PartitionOpsDifferentialTest, ConcatShardedDim) {
  checkOps(kConcatSharded, {"sd.concat"});
}

TEST_P(PartitionOpsDifferentialTest, DotGeneral) {
  checkOps(kDotGeneral, {"sd.dot_general"});
}

TEST_P(PartitionOpsDifferentialTest, Norms) {
  checkOps(kNorms, {"sd.layer_norm", "sd.rms_norm", "sd.group_norm"});
}

TEST_P(PartitionOpsDifferentialTest, Softmax) {
  checkOps(kSoftmax, {"sd.softmax"});
}

TEST_P(PartitionOpsDifferentialTest, Attention) {
  checkOps(kAttentionMask, {"sd.attention", "sd.compare"});
}

TEST_P(PartitionOpsDifferentialTest, Conv2dBatch) {
  checkOps(kConvBatch, {"sd.conv2d"});
}

TEST_P(PartitionOpsDifferentialTest, Conv2dInputChannels) {
  checkOps(kConvCin, {"sd.conv2d"});
}

TEST_P(PartitionOpsDifferentialTest, Conv2dHaloExchange) {
  // Group norm over split pixels becomes its statistics' local sums and an
  // all_reduce, so it leaves no sd.group_norm to inspect.
  std::map<std::string, int> ops = check(kConvHalo, "main", 8);
  if (GetParam() != kFullMesh || HasFailure())
    return;
  for (const char *op :
       {"sd.conv2d", "sd.conv2d_input_grad", "sd.conv2d_filter_grad"})
    EXPECT_TRUE(shardedOps.count(op)) << op << " has no sharded operand";
  // The halos travel by permutes (started early where the pipeline makes
  // them asynchronous).
  EXPECT_GT(ops["sd.collective_permute"] + ops["sd.collective_permute_start"],
            0)
      << "no halo was exchanged";
  EXPECT_GT(ops["sd.all_reduce"], 0) << "no statistic was summed";
}

TEST_P(PartitionOpsDifferentialTest, UpsampleNearest) {
  checkOps(kUpsample, {"sd.upsample_nearest"});
}

TEST_P(PartitionOpsDifferentialTest, Sources) {
  // The constraints are what shards these ops' results (sd-partition
  // replaces sd.sharding_constraint by collectives, so it has no local
  // instance to inspect). A constant is made whole on every device and
  // then sliced (all_slice), so its own result is not checked.
  std::map<std::string, int> ops = check(kSourcesSharded, "main", 8);
  if (GetParam() != kFullMesh || HasFailure())
    return;
  EXPECT_GT(ops["sd.all_slice"], 0) << "the constant is sliced";
  for (const char *op : {"sd.add", "sd.mul", "sd.exp"})
    EXPECT_TRUE(shardedOps.count(op)) << op << " has no sharded operand";
  for (const char *op : {"sd.iota", "sd.rng_normal", "sd.rng_uniform"})
    EXPECT_TRUE(shardedResultOps.count(op)) << op << " is not sharded";
}

TEST_P(PartitionOpsDifferentialTest, MseLossShardingConstraint) {
  // sd-partition replaces sd.sharding_constraint by collectives: moving
  // the batch axes from dimension 0 to 1 of a sharded value is an
  // all-to-all, and the constrained layout reaches the exp.
  std::map<std::string, int> ops = check(kLossConstraint, "main", 8);
  if (GetParam() != kFullMesh || HasFailure())
    return;
  EXPECT_TRUE(shardedOps.count("sd.mse_loss"));
  EXPECT_TRUE(shardedOps.count("sd.exp"));
  EXPECT_GT(ops["sd.all_to_all"], 0);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PartitionOpsDifferentialTest,
    ::testing::Values("data:2", "fsdp:2", "tensor:2", "context:2",
                      "data:2,fsdp:2,context:2,tensor:2"),
    meshTestName);

} // namespace
