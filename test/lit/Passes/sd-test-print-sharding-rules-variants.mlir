// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-test-print-sharding-rules | FileCheck %s

// Variants of the rules in sd-test-print-sharding-rules.mlir: reshape
// factorizations, broadcasts, optional operands, grouped convolution.

// A split dimension is a compound factor: [6] -> [2, 3] is [ij] -> [i, j].
// CHECK-LABEL: func.func @reshape_split(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<6xf32>
// CHECK: sd.reshape %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([ij]) -> ([i, j]) {i=2, j=3}>}
func.func @reshape_split(%x: tensor<6xf32>) -> tensor<2x3xf32> {
  %y = sd.reshape %x : (tensor<6xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Merged dimensions: [2, 3, 4] -> [6, 4] is [i, j, k] -> [ij, k].
// CHECK-LABEL: func.func @reshape_merge(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x3x4xf32>
// CHECK: sd.reshape %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([ij, k]) {i=2, j=3, k=4}>}
func.func @reshape_merge(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %y = sd.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// Size-1 dimensions map to no factor (1).
// CHECK-LABEL: func.func @reshape_unit_dims(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<1x6xf32>
// CHECK: sd.reshape %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([1, i]) -> ([i, 1]) {i=6}>}
func.func @reshape_unit_dims(%x: tensor<1x6xf32>) -> tensor<6x1xf32> {
  %y = sd.reshape %x : (tensor<1x6xf32>) -> tensor<6x1xf32>
  return %y : tensor<6x1xf32>
}

// -----

// [2, 3] -> [3, 2] shares no factor: each dimension has its own.
// CHECK-LABEL: func.func @reshape_unaligned(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x3xf32>
// CHECK: sd.reshape %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([i, k]) -> ([j, l]) {i=2, j=3, k=3, l=2}>}
func.func @reshape_unaligned(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %y = sd.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Splitting the embedding into heads: [kl] -> [k, l], so a sharded embedding
// shards the heads.
// CHECK-LABEL: func.func @reshape_heads(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x8x384xf32>
// CHECK: sd.reshape %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([i, j, kl]) -> ([i, j, k, l]) {i=2, j=8, k=6, l=64}>}
func.func @reshape_heads(%x: tensor<2x8x384xf32>) -> tensor<2x8x6x64xf32> {
  %y = sd.reshape %x : (tensor<2x8x384xf32>) -> tensor<2x8x6x64xf32>
  return %y : tensor<2x8x6x64xf32>
}

// -----

// A size-1 operand dimension kept at size 1 shares its factor.
// CHECK-LABEL: func.func @broadcast_unit(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<1x4xf32>
// CHECK: sd.broadcast_in_dim %[[A0]] dims = [0, 1] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j, k]) {i=1, j=4, k=8}>}
func.func @broadcast_unit(%x: tensor<1x4xf32>) -> tensor<1x4x8xf32> {
  %y = sd.broadcast_in_dim %x dims = [0, 1]
      : (tensor<1x4xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// A projection x·W: the contracted j is a reduction.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<8x16xf32>, %[[A1:[^:]*]]: tensor<16x32xf32>
// CHECK: sd.dot_general %[[A0]], %[[A1]] batch = [] x [] contract = [1] x [0] {sd.sharding_rule = #sd.sharding_rule<([i, j], [j, k]) -> ([i, k]) {i=8, j=16, k=32}, reduction={j}>}
func.func @matmul(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
      : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Q·Kᵀ: two batch factors, the head dimension l is a reduction.
// CHECK-LABEL: func.func @qk(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x4x8x16xf32>, %[[A1:[^:]*]]: tensor<2x4x6x16xf32>
// CHECK: sd.dot_general %[[A0]], %[[A1]] batch = [0, 1] x [0, 1] contract = [3] x [3] {sd.sharding_rule = #sd.sharding_rule<([i, j, k, l], [i, j, m, l]) -> ([i, j, k, m]) {i=2, j=4, k=8, l=16, m=6}, reduction={l}>}
func.func @qk(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32> {
  %y = sd.dot_general %q, %k batch = [0, 1] x [0, 1] contract = [3] x [3]
      : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x6xf32>
  return %y : tensor<2x4x8x6xf32>
}

// -----

// layer_norm without scale and bias.
// CHECK-LABEL: func.func @layer_norm_plain(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x8xf32>
// CHECK: sd.layer_norm %[[A0]] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([i, j]) {i=2, j=8}, need_replication={j}>}
func.func @layer_norm_plain(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = sd.layer_norm %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// layer_norm with a bias only: the bias is the second operand.
// CHECK-LABEL: func.func @layer_norm_bias(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x8xf32>, %[[A1:[^:]*]]: tensor<8xf32>
// CHECK: sd.layer_norm %[[A0]] bias %[[A1]] {sd.sharding_rule = #sd.sharding_rule<([i, j], [j]) -> ([i, j]) {i=2, j=8}, need_replication={j}>}
func.func @layer_norm_bias(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %y = sd.layer_norm %x bias %b
      : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// group_norm of rank 3 without scale and bias.
// CHECK-LABEL: func.func @group_norm_plain(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x16x8xf32>
// CHECK: sd.group_norm %[[A0]] groups = 4 {sd.sharding_rule = #sd.sharding_rule<([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=8}, need_replication={k}>}
func.func @group_norm_plain(%x: tensor<2x16x8xf32>) -> tensor<2x16x8xf32> {
  %y = sd.group_norm %x groups = 4 : (tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %y : tensor<2x16x8xf32>
}

// -----

// attention without a mask.
// CHECK-LABEL: func.func @attention_no_mask(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x3x4x8xf32>, %[[A1:[^:]*]]: tensor<2x3x6x8xf32>, %[[A2:[^:]*]]: tensor<2x3x6x8xf32>
// CHECK: sd.attention %[[A0]], %[[A1]], %[[A2]] scale = 5.000000e-01 {sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n]) -> ([i, j, k, n]) {i=2, j=3, k=4, l=6, m=8, n=8}, need_replication={l, m}>}
func.func @attention_no_mask(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x6x8xf32>, %v: tensor<2x3x6x8xf32>) -> tensor<2x3x4x8xf32> {
  %y = sd.attention %q, %k, %v scale = 0.5
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// A mask per sample, broadcast over the heads.
// CHECK-LABEL: func.func @attention_full_mask(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x3x4x8xf32>, %[[A1:[^:]*]]: tensor<2x3x6x8xf32>, %[[A2:[^:]*]]: tensor<2x3x6x8xf32>, %[[A3:[^:]*]]: tensor<2x1x4x6xi1>
// CHECK: sd.attention %[[A0]], %[[A1]], %[[A2]] mask %[[A3]] {sd.sharding_rule = #sd.sharding_rule<([i, j, k, m], [i, j, l, m], [i, j, l, n], [i, 1, k, l]) -> ([i, j, k, n]) {i=2, j=3, k=4, l=6, m=8, n=8}, need_replication={l, m}>}
func.func @attention_full_mask(%q: tensor<2x3x4x8xf32>, %k: tensor<2x3x6x8xf32>, %v: tensor<2x3x6x8xf32>, %m: tensor<2x1x4x6xi1>) -> tensor<2x3x4x8xf32> {
  %y = sd.attention %q, %k, %v mask %m
      : (tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x8xf32>, tensor<2x1x4x6xi1>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// Grouped conv2d without bias: Cin (l), Cin/groups (o) and Cout (p) need
// replication; N (i) and the same-size spatial dimensions (j, k) pass
// through.
// CHECK-LABEL: func.func @conv2d_groups(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x8x8x4xf32>, %[[A1:[^:]*]]: tensor<3x3x2x8xf32>
// CHECK: sd.conv2d %[[A0]], %[[A1]] strides = [1, 1] padding = [1, 1, 1, 1] groups = 2 {sd.sharding_rule = #sd.sharding_rule<([i, j, k, l], [m, n, o, p]) -> ([i, j, k, p]) {i=2, j=8, k=8, l=4, m=3, n=3, o=2, p=8}, need_replication={l, m, n, o, p}>}
func.func @conv2d_groups(%x: tensor<2x8x8x4xf32>, %w: tensor<3x3x2x8xf32>) -> tensor<2x8x8x8xf32> {
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] groups = 2
      : (tensor<2x8x8x4xf32>, tensor<3x3x2x8xf32>) -> tensor<2x8x8x8xf32>
  return %y : tensor<2x8x8x8xf32>
}

// -----

// A scale of 1 adds no factor: W maps to l on both sides.
// CHECK-LABEL: func.func @upsample_rows(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x4x4x8xf32>
// CHECK: sd.upsample_nearest %[[A0]] scale = [2, 1] {sd.sharding_rule = #sd.sharding_rule<([i, j, l, m]) -> ([i, jk, l, m]) {i=2, j=4, k=2, l=4, m=8}>}
func.func @upsample_rows(%x: tensor<2x4x4x8xf32>) -> tensor<2x8x4x8xf32> {
  %y = sd.upsample_nearest %x scale = [2, 1]
      : (tensor<2x4x4x8xf32>) -> tensor<2x8x4x8xf32>
  return %y : tensor<2x8x4x8xf32>
}

// -----

// Three inputs: each has its own concatenated-dimension factor.
// CHECK-LABEL: func.func @concat3(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.concat %[[A0]], %[[A0]], %[[A0]] dim = 0 {sd.sharding_rule = #sd.sharding_rule<([i, m], [j, m], [k, m]) -> ([l, m]) {i=2, j=2, k=2, l=6, m=4}, need_replication={i, j, k, l}>}
func.func @concat3(%a: tensor<2x4xf32>) -> tensor<6x4xf32> {
  %y = sd.concat %a, %a, %a dim = 0
      : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// A reduction to a scalar.
// CHECK-LABEL: func.func @reduce_all(
// CHECK-SAME: %[[A0:[^:]*]]: tensor<2x4xf32>
// CHECK: sd.reduce_max %[[A0]] dims = [0, 1] {sd.sharding_rule = #sd.sharding_rule<([i, j]) -> ([]) {i=2, j=4}, reduction={i, j}>}
func.func @reduce_all(%x: tensor<2x4xf32>) -> tensor<f32> {
  %y = sd.reduce_max %x dims = [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %y : tensor<f32>
}
