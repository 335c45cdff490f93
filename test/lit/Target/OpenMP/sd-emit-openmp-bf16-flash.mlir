// RUN: sdopt %s --emit=openmp | FileCheck %s

// Flash attention on bf16 operands calls the runtime's bf16 kernels with the
// buffers as they are: no widened copies before, no rounding after; the i1
// mask and the f32 lse are f32 buffers.
// CHECK-LABEL: from @bf16_flash
// CHECK: api->flash_attention_bf16(dev, reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), [[M:b\[[0-9]+\]]], 1, 1, reinterpret_cast<sd_bf16 *>([[O:b\[[0-9]+\]]]), [[LSE:b\[[0-9]+\]]], 1, 2, 8, 8, 4, 4,
// The dQ call, then the dK/dV call.
// CHECK: api->flash_attention_backward_bf16(dev, reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), [[M]], 1, 1, reinterpret_cast<sd_bf16 *>([[O]]), [[LSE]], reinterpret_cast<sd_bf16 *>(a[1]), reinterpret_cast<sd_bf16 *>({{b\[[0-9]+\]}}), nullptr, nullptr, 1, 2, 8, 8, 4, 4,
// CHECK: api->flash_attention_backward_bf16(dev, reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), reinterpret_cast<sd_bf16 *>(a[0]), [[M]], 1, 1, reinterpret_cast<sd_bf16 *>([[O]]), [[LSE]], reinterpret_cast<sd_bf16 *>(a[1]), nullptr, reinterpret_cast<sd_bf16 *>({{b\[[0-9]+\]}}), reinterpret_cast<sd_bf16 *>({{b\[[0-9]+\]}}), 1, 2, 8, 8, 4, 4,
// No widening or rounding kernel: the mask's is the one kernel.
// CHECK: SD_LOCAL void
// CHECK-NOT: SD_LOCAL void
func.func @bf16_flash(%q: tensor<1x2x8x4xbf16>, %do: tensor<1x2x8x4xbf16>) -> (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>) {
  %i = sd.iota dim = 2 : tensor<1x1x8x8xf32>
  %j = sd.iota dim = 3 : tensor<1x1x8x8xf32>
  %m = sd.compare ge, %i, %j : tensor<1x1x8x8xf32>
  %o, %lse = sd.flash_attention %q, %q, %q mask %m scale = 0.5 blocks = <use_fused_bwd_kernel = true> : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x1x8x8xi1>) -> (tensor<1x2x8x4xbf16>, tensor<1x2x8xf32>)
  %dq = sd.flash_attention_dq %q, %q, %q, %o, %lse, %do mask %m scale = 0.5 blocks = <use_fused_bwd_kernel = true> : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8xf32>, tensor<1x2x8x4xbf16>, tensor<1x1x8x8xi1>) -> tensor<1x2x8x4xbf16>
  %dk, %dv = sd.flash_attention_dkv %q, %q, %q, %o, %lse, %do mask %m scale = 0.5 blocks = <use_fused_bwd_kernel = true> : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8xf32>, tensor<1x2x8x4xbf16>, tensor<1x1x8x8xi1>) -> (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>)
  return %o, %dq, %dk, %dv : tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>
}
