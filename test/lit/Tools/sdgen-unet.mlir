// The UNets: diffusers' UNet2DConditionModel as SD 2 and SDXL configure
// it. The released sizes have the released parameter counts exactly
// (865,910,724 and 2,567,463,684); the tiny ones are the tests' models.
// RUN: sdgen --preset=sd2-base 2>&1 >/dev/null | FileCheck %s --check-prefix=SD2-SUM
// RUN: sdgen --preset=sdxl 2>&1 >/dev/null | FileCheck %s --check-prefix=XL-SUM
// SD2-SUM: sdgen: sd2-base: 865.91M parameters (686 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined); published 865.91M (+0.00%)
// XL-SUM: sdgen: sdxl: 2.57B parameters (1680 tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined); published 2567.46M (+0.00%)
// Other sizes are not the published model: no reference in the summary.
// RUN: sdgen --preset=sd2-base --block-channels=64,128 --attention-heads=1,2 --transformer-layers=1,1 --latent-size=8 2>&1 >/dev/null | FileCheck %s --check-prefix=SMALL-SUM
// SMALL-SUM: sdgen: sd2-base: {{[0-9.]+}}M parameters ({{[0-9]+}} tensors), {{[0-9]+}} ops ({{[0-9]+}} inlined){{$}}

// RUN: sdgen --preset=unet-tiny 2>/dev/null | FileCheck %s
// RUN: sdgen --preset=unet-tiny 2>/dev/null | sdopt --batch=2 | not grep 'tensor<?'

// A ResNet block: group norm, SiLU, the conv weight [Cout, Cin, 3, 3]
// transposed to HWIO, the time embedding added per channel, the shortcut.
// CHECK-LABEL: func.func private @resnet_32_32_8x8
// CHECK-SAME: (%[[X:.*]]: tensor<?x8x8x32xf32>, %[[EMB:.*]]: tensor<?x128xf32>,
// CHECK: sd.group_norm %[[X]] scale %{{.*}} bias %{{.*}} groups = 8 {epsilon = 1.000000e-05 : f64}
// CHECK: sd.transpose %{{.*}} permutation = [2, 3, 1, 0] : (tensor<32x32x3x3xf32>) -> tensor<3x3x32x32xf32>
// CHECK: sd.conv2d {{.*}} strides = [1, 1] padding = [1, 1, 1, 1] groups = 1 : (tensor<?x8x8x32xf32>, tensor<3x3x32x32xf32>, tensor<32xf32>) -> tensor<?x8x8x32xf32>
// CHECK: sd.dot_general %[[EMB]], %{{.*}} contract = [1] x [1] : (tensor<?x128xf32>, tensor<32x128xf32>) -> tensor<?x32xf32>
// CHECK: sd.broadcast_in_dim %{{.*}} dims = [0, 3] : (tensor<?x32xf32>) -> tensor<?x8x8x32xf32>
// CHECK: sd.add %[[X]], %{{.*}} {sd.name = "hidden_states"} : tensor<?x8x8x32xf32>
// A transformer block: self-attention over the 64 positions, cross-
// attention to the 8 text tokens, GEGLU with the exact GELU.
// CHECK-LABEL: func.func private @transformer_32_8x8
// CHECK-SAME: (%{{.*}}: tensor<?x64x32xf32>, %{{.*}}: tensor<?x8x32xf32>
// CHECK: sd.layer_norm {{.*}} {epsilon = 1.000000e-05 : f64}
// CHECK: sd.attention {{.*}} : (tensor<?x2x64x16xf32>, tensor<?x2x64x16xf32>, tensor<?x2x64x16xf32>) -> tensor<?x2x64x16xf32>
// CHECK: sd.attention {{.*}} : (tensor<?x2x64x16xf32>, tensor<?x2x8x16xf32>, tensor<?x2x8x16xf32>) -> tensor<?x2x64x16xf32>
// CHECK: sd.gelu %{{.*}} {approximate = false} : tensor<?x64x128xf32>
// A 1×1 shortcut where the channels change.
// CHECK-LABEL: func.func private @resnet_32_64_4x4
// CHECK: sd.conv2d {{.*}} padding = [0, 0, 0, 0] groups = 1 : (tensor<?x4x4x32xf32>, tensor<1x1x32x64xf32>, tensor<64xf32>) -> tensor<?x4x4x64xf32>
// CHECK-LABEL: func.func @loss
// CHECK-SAME: sd.role = #sd.param<"conv_in.weight", uniform(0.16666666666666666)>
// CHECK-SAME: sd.role = #sd.param<"down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight"
// CHECK-SAME: sd.role = #sd.param<"mid_block.attentions.0.transformer_blocks.0.ff.net.0.proj.weight"
// CHECK-SAME: sd.role = #sd.param<"up_blocks.1.resnets.0.conv_shortcut.weight"
// CHECK-SAME: sd.role = #sd.param<"conv_out.bias"
// CHECK-SAME: sd.role = #sd.input<context>
// The downsampler, the skips concatenated after the hidden states, the
// upsampler.
// CHECK: sd.conv2d {{.*}} strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<?x8x8x32xf32>, tensor<3x3x32x32xf32>, tensor<32xf32>) -> tensor<?x4x4x32xf32>
// CHECK: call @resnet_32_64_4x4
// CHECK: call @resnet_64_64_4x4
// CHECK: call @transformer_64_4x4
// CHECK: call @resnet_64_64_4x4
// CHECK: sd.concat %{{.*}}, %{{.*}} dim = 3 : (tensor<?x4x4x64xf32>, tensor<?x4x4x64xf32>) -> tensor<?x4x4x128xf32>
// CHECK: call @resnet_128_64_4x4
// CHECK: sd.concat %{{.*}}, %{{.*}} dim = 3 : (tensor<?x4x4x64xf32>, tensor<?x4x4x32xf32>) -> tensor<?x4x4x96xf32>
// CHECK: sd.upsample_nearest %{{.*}} scale = [2, 2] : (tensor<?x4x4x64xf32>) -> tensor<?x8x8x64xf32>
// CHECK: sd.mse_loss %{{.*}}, %{{.*}} : tensor<?x8x8x4xf32>

// SDXL: the pooled text and the size and crop ids, each id's 8 features
// [cos | sin] unscaled, concatenated after the pooled text.
// RUN: sdgen --preset=sdxl-tiny 2>/dev/null | FileCheck %s --check-prefix=XL
// XL-LABEL: func.func @loss
// XL-SAME: sd.role = #sd.param<"add_embedding.linear_1.weight"
// XL-SAME: %[[POOLED:[a-z0-9]+]]: tensor<?x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<pooled>}
// XL-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x6xf32> {sd.logical_axes = #sd.logical_axes<[batch, _]>, sd.role = #sd.input<time_ids>}
// XL: sd.reshape %[[IDS]] : (tensor<?x6xf32>) -> tensor<?x6x1xf32>
// XL: sd.concat %{{.*}}, %{{.*}} dim = 2 : (tensor<?x6x4xf32>, tensor<?x6x4xf32>) -> tensor<?x6x8xf32>
// XL: sd.concat %[[POOLED]], %{{.*}} dim = 1 : (tensor<?x16xf32>, tensor<?x48xf32>) -> tensor<?x64xf32>
// XL-COUNT-2: call @transformer_64_4x4
