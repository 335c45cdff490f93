// Spatial partitioning: test/data/rules/spatial.yml puts the image's
// height on context and its width on tensor. A 3×3 convolution (padding
// 1) then reads one row above and one below each device's block: sd-
// partition sends each device's last row to the next device and its first
// row to the previous one (sd.collective_permute marked sd.halo), zeroes
// what the first and last devices receive (the global zero padding),
// concatenates, and convolves without padding along the height.
// RUN: sdopt %s --mesh=context:2 --rules=%sd_src_root/test/data/rules/spatial.yml --stage=partitioned | FileCheck %s
// The report prices the halo permutes apart from the other collectives
// (kind halo_exchange), each a block of k/2 = 1 row: with the height split
// over 2 (context:2), a row is [4 samples, 1, 8 columns, 4 channels] f32 =
// 512 B, sent twice (up and down) = 1024 B. With the width split too
// (context:2,tensor:2), rows are [4, 1, 4, 4] = 256 B (512 B for both),
// then columns of the block already extended by its two halo rows,
// [4, 4 + 2, 1, 4] = 384 B (768 B for both), which carries the corners.
// RUN: sdopt %s --mesh=context:2 --rules=%sd_src_root/test/data/rules/spatial.yml --report | FileCheck %s --check-prefix=REPORT
// RUN: sdopt %s --mesh=context:2,tensor:2 --rules=%sd_src_root/test/data/rules/spatial.yml --report=json | FileCheck %s --check-prefix=JSON

// CHECK-LABEL: func.func @loss(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x4x8x4xf32>
// CHECK: %[[LAST:.*]] = sd.slice %[[X]] start = [0, 3, 0, 0] limit = [4, 4, 8, 4]
// CHECK: sd.collective_permute_start %[[LAST]] @mesh axes = ["context"] pairs = {{\[\[}}0, 1]] {sd.halo}
// CHECK: %[[FIRST:.*]] = sd.slice %[[X]] start = [0, 0, 0, 0] limit = [4, 1, 8, 4]
// CHECK: sd.collective_permute_start %[[FIRST]] @mesh axes = ["context"] pairs = {{\[\[}}1, 0]] {sd.halo}
// CHECK: %[[EXT:.*]] = sd.concat %{{.*}}, %[[X]], %{{.*}} dim = 1 : (tensor<4x1x8x4xf32>, tensor<4x4x8x4xf32>, tensor<4x1x8x4xf32>) -> tensor<4x6x8x4xf32>
// CHECK: sd.conv2d %[[EXT]], %{{.*}} strides = [1, 1] padding = [0, 0, 1, 1] groups = 1 : (tensor<4x6x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<4x4x8x8xf32>

// REPORT:      kind                mesh axes           N   count   bytes sent
// REPORT:      halo_exchange       context             2       2       1.0 kB

// The loss's all_reduce comes first (kinds sort by name).
// JSON:      "kind": "all_reduce",
// JSON:      "axes": [
// JSON-NEXT:   "context"
// JSON-NEXT: ],
// JSON-NEXT: "bytes_per_device": 512,
// JSON-NEXT: "count": 2,
// JSON-NEXT: "group_size": 2,
// JSON-NEXT: "kind": "halo_exchange",
// JSON-NEXT: "tensor_bytes": 512
// JSON:      "axes": [
// JSON-NEXT:   "tensor"
// JSON-NEXT: ],
// JSON-NEXT: "bytes_per_device": 768,
// JSON-NEXT: "count": 2,
// JSON-NEXT: "group_size": 2,
// JSON-NEXT: "kind": "halo_exchange",
// JSON-NEXT: "tensor_bytes": 768

func.func @loss(%x: tensor<4x8x8x4xf32> {sd.role = #sd.input<latents>,
                                         sd.logical_axes = #sd.logical_axes<[batch, activation_height, activation_width, _]>},
                %t: tensor<4x8x8x8xf32> {sd.role = #sd.input<noise>,
                                         sd.logical_axes = #sd.logical_axes<[batch, activation_height, activation_width, _]>},
                %w: tensor<3x3x4x8xf32> {sd.role = #sd.param<"conv.weight", normal(0.1)>})
    -> tensor<f32> {
  %y = sd.conv2d %x, %w strides = [1, 1] padding = [1, 1, 1, 1] groups = 1
      : (tensor<4x8x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<4x8x8x8xf32>
  %l = sd.mse_loss %y, %t : tensor<4x8x8x8xf32>
  return %l : tensor<f32>
}
