// Uneven shards in the report: DiT-tiny's batch of 8 on data:3 is blocks
// of 3 samples, the last with 2. Each device's padding, on average: a ninth
// of each batch-major block, 3 − 8/3 samples. latents and noise [8, 32, 32,
// 4]: 49,152 − 43,691 B = 5,461 B each; timestep [8]: 12 − 11 = 1 B; the
// one-hot labels [8, 1001]: 12,012 − 10,677 = 1,335 B; 12,258 B in all.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:3 --batch=8 --report | FileCheck %s
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:3 --batch=8 --report=json | FileCheck %s --check-prefix=JSON
// The partitioned program keeps the global shapes of its padded blocks.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:3 --batch=8 | FileCheck %s --check-prefix=IR
// Even shards have no padding.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=data:2 --batch=8 --report | FileCheck %s --check-prefix=EVEN

// CHECK-LABEL: memory per device
// CHECK:       inputs
// CHECK:       padding 12.3 kB   of the above: 4 arguments padded to whole blocks (uneven shards)
// CHECK-LABEL: compute per device
// CHECK:       padding {{ *}}11.0%   of the elements ops compute are padding (821,120 elements of 7,460,676)

// JSON:      "padding": {
// JSON-NEXT:   "bytes": 12258,
// JSON-NEXT:   "computed_elements": 7460676,
// JSON-NEXT:   "padded_elements": 821120,
// JSON-NEXT:   "tensors": 4
// JSON-NEXT: },

// IR: func.func @loss(
// IR-SAME: tensor<3x32x32x4xf32> {sd.global_shape = array<i64: 8, 32, 32, 4>, sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}, {}, {}]>
// IR-SAME: attributes {{{.*}}sd.padding = array<i64: 821120, 7460676>

// EVEN-NOT: padding
