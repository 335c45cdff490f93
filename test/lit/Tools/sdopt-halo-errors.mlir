// A halo comes from the next device only: a 5×5 convolution reads 2 rows
// on each side of a device's block, and with 8 rows split over 8 devices
// (context:8) each holds 1. One error names the op, the size and the mesh
// axes, and no program is printed.
// RUN: not sdopt %s --mesh=context:8 --rules=%sd_src_root/test/data/rules/spatial.yml --stage=partitioned 2>&1 | FileCheck %s

// CHECK: error: 'sd.conv2d' op cannot exchange a halo of 2 rows between the 8 devices that split the image's height (mesh axes context): each holds 1, fewer than the kernel reads; split it over fewer devices
// CHECK-NOT: error:
// CHECK-NOT: func.func @loss

func.func @loss(%x: tensor<2x8x8x4xf32> {sd.role = #sd.input<latents>,
                                         sd.logical_axes = #sd.logical_axes<[batch, activation_height, activation_width, _]>},
                %t: tensor<2x8x8x4xf32> {sd.role = #sd.input<noise>,
                                         sd.logical_axes = #sd.logical_axes<[batch, activation_height, activation_width, _]>},
                %w: tensor<5x5x4x4xf32> {sd.role = #sd.param<"conv.weight", normal(0.1)>})
    -> tensor<f32> {
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [2, 2, 2, 2] groups = 1
      : (tensor<2x8x8x4xf32>, tensor<5x5x4x4xf32>) -> tensor<2x8x8x4xf32>
  %l = sd.mse_loss %y, %t : tensor<2x8x8x4xf32>
  return %l : tensor<f32>
}
