// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="attention=ring cache-bytes=1048576" | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-tile-attention="attention=ulysses cache-bytes=1048576" | FileCheck %s

// Ring, Ulysses and their hybrid spread unmasked self-attention only: a
// masked one is tiled with whole keys and values, and a remark says so.
// CHECK-LABEL: func.func @masked_self_attention
// CHECK: sd.flash_attention {{.*}} mask {{.*}} blocks = <{{.*}}> :
// CHECK-NOT: context_parallel
// (attention=flash asks for nothing more: sd-tile-attention.mlir's
// @masked_ragged expects no remark.)
func.func @masked_self_attention(%q: tensor<1x2x64x8xf32>, %m: tensor<1x1x64x64xi1>) -> tensor<1x2x64x8xf32> {
  // expected-remark @+1 {{has a mask, so attention=}}
  %o = sd.attention %q, %q, %q mask %m : (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x1x64x64xi1>) -> tensor<1x2x64x8xf32>
  return %o : tensor<1x2x64x8xf32>
}

// -----

// Masked cross-attention keeps whole keys without a word.
// CHECK-LABEL: func.func @masked_cross_attention
// CHECK: sd.flash_attention {{.*}} mask {{.*}} blocks = <{{.*}}> :
// CHECK-NOT: context_parallel
func.func @masked_cross_attention(%q: tensor<1x2x64x8xf32>, %c: tensor<1x2x16x8xf32>, %m: tensor<1x1x64x16xi1>) -> tensor<1x2x64x8xf32> {
  %o = sd.attention %q, %c, %c mask %m : (tensor<1x2x64x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x1x64x16xi1>) -> tensor<1x2x64x8xf32>
  return %o : tensor<1x2x64x8xf32>
}
