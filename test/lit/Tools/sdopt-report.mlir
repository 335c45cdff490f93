// sdopt --report prints the per-device cost report instead of the IR. The
// programs here are partitioned by hand (local types, collectives); every
// number below is worked out in the comments.
// RUN: sdopt %s --report -split-input-file | FileCheck %s
// The pass alone prints the same report to stdout (and the IR to -o).
// RUN: sdopt %s -sd-print-report -split-input-file -o /dev/null | FileCheck %s
// RUN: sdopt %s --report -split-input-file -o %t && FileCheck %s < %t

// FSDP forward on data=2 × fsdp=2: the weight (global 4x8, split over fsdp)
// is gathered, the batch (global 8x4, split over data and fsdp) is local.
//
// Memory: parameter 2x8 f32 = 64 B; inputs 2x4 + 2x8 f32 = 32 + 64 = 96 B.
// Liveness, one position per op (value: bytes, defined..last use):
//   0 %wg 4x8 = 128 B (0..1), 1 %y 2x8 = 64 B (1..2), 2 %a 64 B (2..3),
//   3 %l 4 B (3..4), 4 %r 4 B (4..5, returned).
//   Peak at 1 (the dot): %wg + %y = 192 B. Total 64 + 96 + 192 = 352 B.
// FLOPs: dot 2·M·N·K = 2·2·8·4 = 128; gelu (tanh) 9·16 = 144;
//   mse_loss 3·16 = 48; collectives 0. Total 320.
// Bytes accessed: 192 + 224 + 128 + 132 + 8 = 684 B.
// Collectives (ring convention, S = full tensor):
//   all_gather 2x8 → 4x8 over fsdp=2: S = 128 B, S(N−1)/N = 64 B;
//   all_reduce of an f32 scalar over data,fsdp (N = 4): chunks of ⌈4/4⌉ =
//   1 B, 2(N−1) chunks = 6 B. Total 70 B.

// CHECK-LABEL: sd report: @loss, mesh @mesh data:2,fsdp:2 (4 devices)
// CHECK-NEXT:  program: partitioned; types are local, every number is per device
// CHECK:       memory per device
// CHECK-NEXT:    parameters          64 B   1 tensor, 16 elements
// CHECK-NEXT:    inputs              96 B   2 tensors
// CHECK-NEXT:    activations (peak)  192 B   at sd.dot_general "proj"
// CHECK-NEXT:    total               352 B   parameters + inputs + activation peak
// CHECK:       compute per device
// CHECK-NEXT:    FLOPs               320 FLOP
// CHECK-NEXT:    bytes accessed      684 B
// CHECK:       collectives per device (ring convention: bytes each device sends)
// CHECK-NEXT:    kind                mesh axes           N   count   bytes sent
// CHECK-NEXT:    all_gather          fsdp                2       1         64 B
// CHECK-NEXT:    all_reduce          data,fsdp           4       1          6 B
// CHECK-NEXT:    total                                           2         70 B
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @loss(%w: tensor<2x8xf32> {sd.role = #sd.param<"proj.weight", zeros>},
                %x: tensor<2x4xf32> {sd.role = #sd.input<latents>},
                %t: tensor<2x8xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  %wg = sd.all_gather %w @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %y = sd.dot_general %x, %wg batch = [] x [] contract = [1] x [0] {sd.name = "proj"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %a = sd.gelu %y : tensor<2x8xf32>
  %l = sd.mse_loss %a, %t : tensor<2x8xf32>
  %r = sd.all_reduce %l @mesh axes = ["data", "fsdp"] : tensor<f32>
  return %r : tensor<f32>
}

// -----

// Every collective kind on data=2 × fsdp=4 (f32, so a 4x8 local is 128 B):
//   all_gather 4x8 → 16x8 over fsdp:   S = 512, 3·⌈512/4⌉ = 384 B
//   all_gather 4x8 → 16x8 over fsdp:   384 B again (aggregated: count 2)
//   reduce_scatter 16x8 → 8x8 over data: S = 512, 1·256 = 256 B
//   all_to_all 8x8 → 32x2 over fsdp:   S = 256, 3·64 = 192 B
//   collective_permute 32x2 over fsdp:  S = 256 B (a ring shift by 1)
//   collective_permute, pairs [s, s]:   0 B (nothing moves)
//   all_slice 32x2 → 16x2 over data:   0 B (local)
//   all_reduce 16x2 over fsdp,data:    S = 128, N = 8, 2·7·16 = 224 B,
//                                       listed in mesh order as data,fsdp
// Total: 2 + 1 + 1 + 1 + 2 + 1 = 8 ops, 768 + 224 + 192 + 256 + 256 =
// 1696 B = 1.7 kB.
// FLOPs: the exp, 32. Peak: at the second all_gather, %g1 (512 B, used by
// the reduce_scatter) and %g2 (512 B, never used: alive only where it is
// made) = 1024 B = 1.0 kB.

// CHECK-LABEL: sd report: @every_kind, mesh @mesh data:2,fsdp:4 (8 devices)
// CHECK:           parameters          0 B   0 tensors, 0 elements
// CHECK-NEXT:      inputs              128 B   1 tensor
// CHECK-NEXT:      activations (peak)  1.0 kB   at sd.all_gather
// CHECK:           FLOPs               32 FLOP
// CHECK:           all_gather          fsdp                4       2        768 B
// CHECK-NEXT:      all_reduce          data,fsdp           8       1        224 B
// CHECK-NEXT:      all_slice           data                2       1          0 B
// CHECK-NEXT:      all_to_all          fsdp                4       1        192 B
// CHECK-NEXT:      collective_permute  fsdp                4       2        256 B
// CHECK-NEXT:      reduce_scatter      data                2       1        256 B
// CHECK-NEXT:      total                                           8       1.7 kB
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
func.func @every_kind(%x: tensor<4x8xf32> {sd.role = #sd.input<latents>}) -> tensor<16x2xf32> {
  %g1 = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<16x8xf32>
  %g2 = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<16x8xf32>
  %e = sd.exp %x : tensor<4x8xf32>
  %rs = sd.reduce_scatter %g1 @mesh [{"data"}, {}] : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %a2a = sd.all_to_all %rs @mesh axes = ["fsdp"] src_dim = 0 tgt_dim = 1 : (tensor<8x8xf32>) -> tensor<32x2xf32>
  %p = sd.collective_permute %a2a @mesh axes = ["fsdp"] pairs = [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<32x2xf32>
  %p0 = sd.collective_permute %p @mesh axes = ["fsdp"] pairs = [[0, 0], [2, 2]] : tensor<32x2xf32>
  %s = sd.all_slice %p0 @mesh [{"data"}, {}] : (tensor<32x2xf32>) -> tensor<16x2xf32>
  %r = sd.all_reduce %s @mesh axes = ["fsdp", "data"] : tensor<16x2xf32>
  return %r : tensor<16x2xf32>
}
