// RUN: not sdopt %s -sd-tile-attention="attention=ulysses_ring" 2>&1 | FileCheck %s --check-prefix=NO-SHARDS
// RUN: not sdopt %s -sd-tile-attention="attention=ring ulysses-shards=2" 2>&1 | FileCheck %s --check-prefix=OTHER-KIND

// ulysses_ring needs its group size, and only it takes one; the errors
// name the options and point at the function.
// NO-SHARDS: sd-tile-attention-hybrid-invalid.mlir:8:1: error: attention=ulysses_ring needs ulysses-shards, the devices per Ulysses group (a positive number; it is 0)
// OTHER-KIND: sd-tile-attention-hybrid-invalid.mlir:8:1: error: ulysses-shards=2 is for attention=ulysses_ring, not attention=ring
func.func @hybrid(%q: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %o = sd.attention %q, %q, %q : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}
