// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-test-print-sharding-rules | FileCheck %s

// One case per sd op (every op but sd.mesh, which has no tensors): the rule
// that ShardingRuleOpInterface gives, recorded as `sd.sharding_rule`.
// Factors are named by position (i, j, k, ...) in the order the op adds them;
// `jk` is a compound factor (j major), `1` a size-1 dimension without factors.
// Variants (reshapes, broadcasts, optional operands, groups) are in
// sd-test-print-sharding-rules-variants.mlir.

// sd.neg is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @neg(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.neg %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @neg(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.neg %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.exp is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @exp(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.exp %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @exp(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.exp %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.log is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @log(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.log %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @log(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.log %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.sqrt is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @sqrt(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.sqrt %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @sqrt(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.sqrt %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.rsqrt is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @rsqrt(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.rsqrt %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @rsqrt(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.rsqrt %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.tanh is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @tanh(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.tanh %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @tanh(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.tanh %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.sin is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @sin(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.sin %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @sin(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.sin %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.cos is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @cos(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.cos %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @cos(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.cos %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.sigmoid is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @sigmoid(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.sigmoid %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @sigmoid(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.sigmoid %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.silu is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @silu(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.silu %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @silu(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.silu %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.gelu is elementwise: one pass-through factor per dimension.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.gelu %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @gelu(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.gelu %x : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.add: both operands and the result share the factors.
// CHECK-LABEL: func.func @add(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.add %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @add(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.add %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.sub: both operands and the result share the factors.
// CHECK-LABEL: func.func @sub(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.sub %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @sub(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.sub %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.mul: both operands and the result share the factors.
// CHECK-LABEL: func.func @mul(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.mul %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @mul(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.mul %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.div: both operands and the result share the factors.
// CHECK-LABEL: func.func @div(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.div %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @div(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.div %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.max: both operands and the result share the factors.
// CHECK-LABEL: func.func @max(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.max %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @max(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.max %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.min: both operands and the result share the factors.
// CHECK-LABEL: func.func @min(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.min %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @min(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.min %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.pow: both operands and the result share the factors.
// CHECK-LABEL: func.func @pow(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.pow %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @pow(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.pow %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.compare: elementwise, the i1 result included.
// CHECK-LABEL: func.func @compare(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.compare lt, %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @compare(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xi1> {
  %y = sd.compare lt, %x, %z : tensor<2x4xf32>
  return %y : tensor<2x4xi1>
}

// -----

// sd.select: the predicate is elementwise too.
// CHECK-LABEL: func.func @select(
// CHECK-SAME: %[[P:[^:]*]]: tensor<2x4xi1>, %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.select %[[P]], %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j], [i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @select(%p: tensor<2x4xi1>, %x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.select %p, %x, %z : tensor<2x4xi1>, tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.convert: elementwise across element types.
// CHECK-LABEL: func.func @convert(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.convert %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @convert(%x: tensor<2x4xf32>) -> tensor<2x4xbf16> {
  %y = sd.convert %x : tensor<2x4xf32> -> tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}

// -----

// sd.sharding_constraint: the identity, elementwise.
// CHECK-LABEL: func.func @sharding_constraint(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.sharding_constraint %[[X]] logical = <[batch, embed]> {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=4}>}
func.func @sharding_constraint(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = sd.sharding_constraint %x logical = <[batch, embed]> : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.softmax: the softmax dimension needs replication (max and sum
// over the whole row), the others pass through.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.softmax %[[X]] dim = 1 {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([i, j, k]) {i=2, j=4, k=8}, need_replication={j}>}
func.func @softmax(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = sd.softmax %x dim = 1 : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// sd.reduce_sum: reduced dimensions are reduction factors (a sharded one
// leaves a partial result), kept ones pass through.
// CHECK-LABEL: func.func @reduce_sum(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.reduce_sum %[[X]] dims = [0, 2] {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([j]) {i=2, j=4, k=8}, reduction={i, k}>}
func.func @reduce_sum(%x: tensor<2x4x8xf32>) -> tensor<4xf32> {
  %y = sd.reduce_sum %x dims = [0, 2] : (tensor<2x4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sd.reduce_max: reduced dimensions are reduction factors (a sharded one
// leaves a partial result), kept ones pass through.
// CHECK-LABEL: func.func @reduce_max(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.reduce_max %[[X]] dims = [0, 2] {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([j]) {i=2, j=4, k=8}, reduction={i, k}>}
func.func @reduce_max(%x: tensor<2x4x8xf32>) -> tensor<4xf32> {
  %y = sd.reduce_max %x dims = [0, 2] : (tensor<2x4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sd.reduce_mean: reduced dimensions are reduction factors (a sharded one
// leaves a partial result), kept ones pass through.
// CHECK-LABEL: func.func @reduce_mean(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.reduce_mean %[[X]] dims = [0, 2] {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([j]) {i=2, j=4, k=8}, reduction={i, k}>}
func.func @reduce_mean(%x: tensor<2x4x8xf32>) -> tensor<4xf32> {
  %y = sd.reduce_mean %x dims = [0, 2] : (tensor<2x4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sd.mse_loss: the scalar loss reduces over every dimension.
// CHECK-LABEL: func.func @mse_loss(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.mse_loss %[[X]], %[[Z]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, j]) -> ([]) {i=2, j=4}, reduction={i, j}>}
func.func @mse_loss(%x: tensor<2x4xf32>, %z: tensor<2x4xf32>) -> tensor<f32> {
  %y = sd.mse_loss %x, %z : tensor<2x4xf32>
  return %y : tensor<f32>
}

// -----

// sd.broadcast_in_dim: operand dimension 0 is result dimension 1 (j);
// the repeated size-1 operand dimension maps to no factor, and the
// result's new and expanded dimensions get factors of their own.
// CHECK-LABEL: func.func @broadcast_in_dim(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x1xf32>
// CHECK: sd.broadcast_in_dim %[[X]] dims = [1, 2] {sd.sharding_rule = #sd.sharding_rule<([j, 1]) -> ([i, j, k]) {i=2, j=4, k=8}>}
func.func @broadcast_in_dim(%x: tensor<4x1xf32>) -> tensor<2x4x8xf32> {
  %y = sd.broadcast_in_dim %x dims = [1, 2] : (tensor<4x1xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// sd.reshape: a split dimension becomes a compound factor ([ij] -> [i, j]);
// 4x6 -> 8x3 shares gcd parts: 8 = 4 (i) x 2 (j), 6 = 2 (j) x 3 (k).
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x6xf32>
// CHECK: sd.reshape %[[X]] {sd.sharding_rule = #sd.sharding_rule<([i, jk]) -> ([ij, k]) {i=4, j=2, k=3}>}
func.func @reshape(%x: tensor<4x6xf32>) -> tensor<8x3xf32> {
  %y = sd.reshape %x : (tensor<4x6xf32>) -> tensor<8x3xf32>
  return %y : tensor<8x3xf32>
}

// -----

// sd.transpose: the result permutes the operand's factors.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>
// CHECK: sd.transpose %[[X]] permutation = [2, 0, 1] {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([k, i, j]) {i=2, j=4, k=8}>}
func.func @transpose(%x: tensor<2x4x8xf32>) -> tensor<8x2x4xf32> {
  %y = sd.transpose %x permutation = [2, 0, 1] : (tensor<2x4x8xf32>) -> tensor<8x2x4xf32>
  return %y : tensor<8x2x4xf32>
}

// -----

// sd.slice: a dimension taken whole passes through; a sliced one has a
// need_replication factor on each side.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8xf32>
// CHECK: sd.slice %[[X]] start = [0, 1] limit = [2, 7] strides = [1, 2] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, k]) {i=2, j=8, k=3}, need_replication={j, k}>}
func.func @slice(%x: tensor<2x8xf32>) -> tensor<2x3xf32> {
  %y = sd.slice %x start = [0, 1] limit = [2, 7] strides = [1, 2] : (tensor<2x8xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// sd.concat: the concatenated dimension needs replication (each input
// its own factor); the others are shared.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>, %[[Z:[^:]*]]: tensor<2x6xf32>
// CHECK: sd.concat %[[X]], %[[Z]] dim = 1 {sd.sharding_rule = #sd.sharding_rule<([i, j], [i, k]) -> ([i, l]) {i=2, j=4, k=6, l=10}, need_replication={j, k, l}>}
func.func @concat(%x: tensor<2x4xf32>, %z: tensor<2x6xf32>) -> tensor<2x10xf32> {
  %y = sd.concat %x, %z dim = 1 : (tensor<2x4xf32>, tensor<2x6xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// sd.pad: padded dimensions need replication, unpadded ones pass through.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.pad %[[X]] low = [0, 1] high = [0, 2] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, k]) {i=2, j=4, k=7}, need_replication={j, k}>}
func.func @pad(%x: tensor<2x4xf32>) -> tensor<2x7xf32> {
  %y = sd.pad %x low = [0, 1] high = [0, 2] : (tensor<2x4xf32>) -> tensor<2x7xf32>
  return %y : tensor<2x7xf32>
}

// -----

// sd.dot_general: batch (i) and free (j, l) factors pass through, the
// contracting one (k) is a reduction.
// CHECK-LABEL: func.func @dot_general(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[Z:[^:]*]]: tensor<2x8x16xf32>
// CHECK: sd.dot_general %[[X]], %[[Z]] batch = [0] x [0] contract = [2] x [1] {sd.sharding_rule = #sd.sharding_rule<([i, j, k], [i, k, l]) -> ([i, j, l]) {i=2, j=4, k=8, l=16}, reduction={k}>}
func.func @dot_general(%x: tensor<2x4x8xf32>, %z: tensor<2x8x16xf32>) -> tensor<2x4x16xf32> {
  %y = sd.dot_general %x, %z batch = [0] x [0] contract = [2] x [1]
      : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// sd.layer_norm: the normalized last dimension needs replication; scale and
// bias map to it.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[S:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>
// CHECK: sd.layer_norm %[[X]] scale %[[S]] bias %[[B]] {sd.sharding_rule = #sd.sharding_rule<([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=4, k=8}, need_replication={k}>}
func.func @layer_norm(%x: tensor<2x4x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %y = sd.layer_norm %x scale %s bias %b
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// sd.rms_norm: as layer_norm, with a scale only.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8xf32>, %[[S:[^:]*]]: tensor<8xf32>
// CHECK: sd.rms_norm %[[X]] scale %[[S]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [j]) -> ([i, j]) {i=2, j=8}, need_replication={j}>}
func.func @rms_norm(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %y = sd.rms_norm %x scale %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// sd.group_norm: the batch and the pixels pass through (split pixels sum
// their statistics across devices); the channels, which the groups cut,
// need replication.
// CHECK-LABEL: func.func @group_norm(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x4x8xf32>, %[[S:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>
// CHECK: sd.group_norm %[[X]] scale %[[S]] bias %[[B]] groups = 2 {sd.sharding_rule = #sd.sharding_rule<([i, j, k, l], [l], [l]) -> ([i, j, k, l]) {i=2, j=4, k=4, l=8}, need_replication={l}>}
func.func @group_norm(%x: tensor<2x4x4x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x4x8xf32> {
  %y = sd.group_norm %x scale %s bias %b groups = 2
      : (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x4x8xf32>
  return %y : tensor<2x4x4x8xf32>
}

// -----

// sd.attention: b (i), h (j), sq (k) and dv (n) pass through; skv (l) and
// d (m) need replication until context parallelism exists. The mask is
// broadcast along the batch (1).
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x3x4x8xf32>, %[[K:[^:]*]]: tensor<2x3x6x8xf32>, %[[V:[^:]*]]: tensor<2x3x6x16xf32>, %[[M:[^:]*]]: tensor<1x3x4x6xi1>
// CHECK: sd.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n], [1, j, k, l]) -> ([i, j, k, n]) {i=2, j=3, k=4, l=6, m=8, n=16}, need_replication={l, m}>}
func.func @attention(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x6x8xf32>, %v: tensor<2x3x6x16xf32>, %m: tensor<1x3x4x6xi1>) -> tensor<2x3x4x16xf32> {
  %y = sd.attention %q, %k, %v mask %m
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>, tensor<1x3x4x6xi1>)
      -> tensor<2x3x4x16xf32>
  return %y : tensor<2x3x4x16xf32>
}

// -----

// sd.conv2d: N (i) and Cout (q, with the bias) pass through, Cin (n) is a
// reduction. Each spatial input dimension is the output's (j, l: split
// over devices, a halo exchange) times the stride (k, m), which needs
// replication, as do the kernel's KH and KW (o, p).
// CHECK-LABEL: func.func @conv2d(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8x8x4xf32>, %[[W:[^:]*]]: tensor<3x3x4x16xf32>, %[[B:[^:]*]]: tensor<16xf32>
// CHECK: sd.conv2d %[[X]], %[[W]] bias %[[B]] strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 {sd.sharding_rule = #sd.sharding_rule<([i, jk, lm, n], [o, p, n, q], [q]) -> ([i, j, l, q]) {i=2, j=4, k=2, l=4, m=2, n=4, o=3, p=3, q=16}, reduction={n}, need_replication={k, m, o, p}>}
func.func @conv2d(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x4x16xf32>, %b: tensor<16xf32>) -> tensor<2x4x4x16xf32> {
  %y = sd.conv2d %x, %w bias %b strides = [2, 2] padding = [1, 1, 1, 1] groups = 1
      : (tensor<2x8x8x4xf32>, tensor<3x3x4x16xf32>, tensor<16xf32>) -> tensor<2x4x4x16xf32>
  return %y : tensor<2x4x4x16xf32>
}

// -----

// sd.conv2d_input_grad: the forward's factors, with dy in the result's place
// and dx in the input's: Cout (q) is summed over, Cin (n) passes through.
// CHECK-LABEL: func.func @conv2d_input_grad(
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x4x4x16xf32>, %[[W:[^:]*]]: tensor<3x3x4x16xf32>
// CHECK: sd.conv2d_input_grad %[[DY]], %[[W]] strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 {sd.sharding_rule = #sd.sharding_rule<([i, j, l, q], [o, p, n, q]) -> ([i, jk, lm, n]) {i=2, j=4, k=2, l=4, m=2, n=4, o=3, p=3, q=16}, reduction={q}, need_replication={k, m, o, p}>}
func.func @conv2d_input_grad(%dy: tensor<2x4x4x16xf32>, %w: tensor<3x3x4x16xf32>) -> tensor<2x8x8x4xf32> {
  %dx = sd.conv2d_input_grad %dy, %w strides = [2, 2] padding = [1, 1, 1, 1] groups = 1
      : (tensor<2x4x4x16xf32>, tensor<3x3x4x16xf32>) -> tensor<2x8x8x4xf32>
  return %dx : tensor<2x8x8x4xf32>
}

// -----

// sd.conv2d_filter_grad: N (i) and the output pixels (j, l) are summed
// over; Cin (n) and Cout (q) pass through to the kernel.
// CHECK-LABEL: func.func @conv2d_filter_grad(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8x8x4xf32>, %[[DY:[^:]*]]: tensor<2x4x4x16xf32>
// CHECK: sd.conv2d_filter_grad %[[X]], %[[DY]] strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 {sd.sharding_rule = #sd.sharding_rule<([i, jk, lm, n], [i, j, l, q]) -> ([o, p, n, q]) {i=2, j=4, k=2, l=4, m=2, n=4, o=3, p=3, q=16}, reduction={i, j, l}, need_replication={k, m, o, p}>}
func.func @conv2d_filter_grad(%x: tensor<2x8x8x4xf32>, %dy: tensor<2x4x4x16xf32>) -> tensor<3x3x4x16xf32> {
  %dw = sd.conv2d_filter_grad %x, %dy strides = [2, 2] padding = [1, 1, 1, 1] groups = 1
      : (tensor<2x8x8x4xf32>, tensor<2x4x4x16xf32>) -> tensor<3x3x4x16xf32>
  return %dw : tensor<3x3x4x16xf32>
}

// -----

// sd.upsample_nearest: result H is the compound [h, scale] (jk), W is
// [w, scale] (lm).
// CHECK-LABEL: func.func @upsample_nearest(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x4x8xf32>
// CHECK: sd.upsample_nearest %[[X]] scale = [2, 3] {sd.sharding_rule = #sd.sharding_rule<([i, j, l, n]) -> ([i, jk, lm, n]) {i=2, j=4, k=2, l=4, m=3, n=8}>}
func.func @upsample_nearest(%x: tensor<2x4x4x8xf32>) -> tensor<2x8x12x8xf32> {
  %y = sd.upsample_nearest %x scale = [2, 3] : (tensor<2x4x4x8xf32>) -> tensor<2x8x12x8xf32>
  return %y : tensor<2x8x12x8xf32>
}

// -----

// sd.constant: one pass-through factor per result dimension.
// CHECK-LABEL: func.func @constant(
// CHECK: sd.constant {sd.sharding_rule = #sd.sharding_rule<() -> ([i, j]) {i=2, j=4}>} dense<1.000000e+00> : tensor<2x4xf32>
func.func @constant() -> tensor<2x4xf32> {
  %y = sd.constant dense<1.0> : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.iota: computed from global indices, so its dimension may be split too.
// CHECK-LABEL: func.func @iota(
// CHECK: sd.iota dim = 1 {sd.sharding_rule = #sd.sharding_rule<() -> ([i, j]) {i=2, j=4}>} : tensor<2x4xf32>
func.func @iota() -> tensor<2x4xf32> {
  %y = sd.iota dim = 1 : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.rng_normal: counter-based on global indices, so any dimension may be split.
// CHECK-LABEL: func.func @rng_normal(
// CHECK: sd.rng_normal seed = 7 {sd.sharding_rule = #sd.sharding_rule<() -> ([i, j]) {i=2, j=4}>} : tensor<2x4xf32>
func.func @rng_normal() -> tensor<2x4xf32> {
  %y = sd.rng_normal seed = 7 : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// sd.rng_uniform: counter-based on global indices, so any dimension may be split.
// CHECK-LABEL: func.func @rng_uniform(
// CHECK: sd.rng_uniform seed = 7 {sd.sharding_rule = #sd.sharding_rule<() -> ([i, j]) {i=2, j=4}>} : tensor<2x4xf32>
func.func @rng_uniform() -> tensor<2x4xf32> {
  %y = sd.rng_uniform seed = 7 : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// The tiled forward has sd.attention's rule, its log-sum-exp following
// b (i), h (j) and sq (k). The backward ops' sums: dQ sums over skv (l) and
// dv (n), dK and dV over sq (k); head_dims that exp separates need
// replication.
// CHECK-LABEL: func.func @flash_attention(
// CHECK: sd.flash_attention {{.*}}{sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n], [1, j, k, l]) -> ([i, j, k, n], [i, j, k]) {i=2, j=3, k=4, l=6, m=8, n=16}, need_replication={l, m}>}
// CHECK: sd.flash_attention_dq {{.*}}{sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n], [i, j, k, n], [i, j, k], [i, j, k, n], [1, j, k, l]) -> ([i, j, k, m]) {i=2, j=3, k=4, l=6, m=8, n=16}, reduction={l, n}, need_replication={m}>}
// CHECK: sd.flash_attention_dkv {{.*}}{sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n], [i, j, k, n], [i, j, k], [i, j, k, n], [1, j, k, l]) -> ([i, j, l, m], [i, j, l, n]) {i=2, j=3, k=4, l=6, m=8, n=16}, reduction={k}, need_replication={m, n}>}
func.func @flash_attention(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x6x8xf32>, %v: tensor<2x3x6x16xf32>, %m: tensor<1x3x4x6xi1>, %do: tensor<2x3x4x16xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>) {
  %o, %lse = sd.flash_attention %q, %k, %v mask %m scale = 0.5 blocks = <>
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>, tensor<1x3x4x6xi1>)
      -> (tensor<2x3x4x16xf32>, tensor<2x3x4xf32>)
  %dq = sd.flash_attention_dq %q, %k, %v, %o, %lse, %do mask %m scale = 0.5 blocks = <>
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>, tensor<2x3x4x16xf32>, tensor<2x3x4xf32>, tensor<2x3x4x16xf32>, tensor<1x3x4x6xi1>)
      -> tensor<2x3x4x8xf32>
  %dk, %dv = sd.flash_attention_dkv %q, %k, %v, %o, %lse, %do mask %m scale = 0.5 blocks = <>
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>, tensor<2x3x4x16xf32>, tensor<2x3x4xf32>, tensor<2x3x4x16xf32>, tensor<1x3x4x6xi1>)
      -> (tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>)
  return %dq, %dk, %dv : tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x16xf32>
}
