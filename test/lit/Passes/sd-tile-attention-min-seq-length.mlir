// RUN: sdopt %s -sd-tile-attention="min-seq-length=64 cache-bytes=1048576" | FileCheck %s
// RUN: sdopt %s -sd-tile-attention="min-seq-length=65 attention=ring cache-bytes=1048576" | FileCheck %s --check-prefix=ABOVE
// RUN: not sdopt %s -sd-tile-attention="min-seq-length=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// MaxDiffusion's flash_min_seq_length: an attention whose query is shorter
// keeps the untiled form; one at the threshold or longer is tiled. The key
// length does not count (a 16-token text context is tiled with its 64-token
// query).
// CHECK-LABEL: func.func @threshold
// CHECK: sd.attention %arg0, %arg0, %arg0 :
// CHECK: sd.flash_attention %arg1, %arg1, %arg1 {{.*}} blocks =
// CHECK: sd.flash_attention %arg1, %arg2, %arg2 {{.*}} blocks =
// CHECK-NOT: sd.flash_attention
// Above every query length nothing is tiled, whatever the attention.
// ABOVE-LABEL: func.func @threshold
// ABOVE-NOT: sd.flash_attention
// ABOVE-COUNT-3: sd.attention
// NEGATIVE: error: min-seq-length is -1; it must not be negative
func.func @threshold(%short: tensor<1x2x32x8xf32>, %long: tensor<1x2x64x8xf32>, %text: tensor<1x2x16x8xf32>) -> (tensor<1x2x32x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) {
  %a = sd.attention %short, %short, %short : (tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x8xf32>) -> tensor<1x2x32x8xf32>
  %b = sd.attention %long, %long, %long : (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) -> tensor<1x2x64x8xf32>
  %c = sd.attention %long, %text, %text : (tensor<1x2x64x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x64x8xf32>
  return %a, %b, %c : tensor<1x2x32x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>
}
