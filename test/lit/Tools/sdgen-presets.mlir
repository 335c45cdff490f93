// Every preset writes a program that sdopt parses and verifies, with one
// call of the block function per layer. The summary pins the parameter
// count to about three significant digits; the published sizes are
// DiT-S/2 33.0M, DiT-B/2 130M, DiT-XL/2 675M, Wan2.1-14B 14.0B and Flux.1-dev
// 11.9B (each within 3%).

// RUN: sdgen --preset=dit-tiny 2>%t.tiny | sdopt | FileCheck %s --check-prefix=TINY
// RUN: FileCheck %s --check-prefix=TINY-SUM < %t.tiny
// TINY-LABEL: func.func private @dit_block
// TINY-LABEL: func.func @loss
// TINY-COUNT-2: call @dit_block
// TINY-NOT: call @dit_block
// TINY: sd.mse_loss
// TINY-SUM: sdgen: dit-tiny: 245.{{[0-9]}}K parameters (31 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)

// RUN: sdgen --preset=dit-s2 2>%t.s2 | sdopt | FileCheck %s --check-prefix=S2
// RUN: FileCheck %s --check-prefix=S2-SUM < %t.s2
// S2-LABEL: func.func @loss
// S2-COUNT-12: call @dit_block
// S2-NOT: call @dit_block
// S2-SUM: sdgen: dit-s2: 32.8{{[0-9]}}M parameters (131 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)

// RUN: sdgen --preset=dit-b2 2>%t.b2 | sdopt | FileCheck %s --check-prefix=B2
// RUN: FileCheck %s --check-prefix=B2-SUM < %t.b2
// B2-LABEL: func.func @loss
// B2-COUNT-12: call @dit_block
// B2-SUM: sdgen: dit-b2: 130.{{[0-9]+}}M parameters (131 tensors)

// RUN: sdgen --preset=dit-xl2 2>%t.xl2 | sdopt | FileCheck %s --check-prefix=XL2
// RUN: FileCheck %s --check-prefix=XL2-SUM < %t.xl2
// XL2-LABEL: func.func @loss
// XL2-COUNT-28: call @dit_block
// XL2-SUM: sdgen: dit-xl2: 67{{[45]}}.{{[0-9]+}}M parameters (291 tensors)

// RUN: sdgen --preset=wan2.1-14b 2>%t.wan | sdopt | FileCheck %s --check-prefix=WAN
// RUN: FileCheck %s --check-prefix=WAN-SUM < %t.wan
// WAN-LABEL: func.func private @wan_block
// WAN-SAME: tensor<?x75600x5120xf32>
// WAN-LABEL: func.func @loss
// WAN-COUNT-40: call @wan_block
// WAN-NOT: call @wan_block
// WAN-SUM: sdgen: wan2.1-14b: 14.2{{[0-9]}}B parameters (1095 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)

// RUN: sdgen --preset=flux-dev 2>%t.flux | sdopt | FileCheck %s --check-prefix=FLUX
// RUN: FileCheck %s --check-prefix=FLUX-SUM < %t.flux
// FLUX-LABEL: func.func private @flux_double_block
// FLUX-SAME: tensor<?x4096x3072xf32>, tensor<?x512x3072xf32>
// FLUX-LABEL: func.func private @flux_single_block
// FLUX-SAME: tensor<?x4608x3072xf32>
// FLUX-LABEL: func.func @loss
// FLUX-COUNT-19: call @flux_double_block
// FLUX-COUNT-38: call @flux_single_block
// FLUX-NOT: call @flux
// FLUX-SUM: sdgen: flux-dev: 11.9{{[0-9]}}B parameters (1160 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined)
