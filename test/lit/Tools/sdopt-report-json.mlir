// --report=json: the same report as JSON, with exact numbers (keys sorted).
// RUN: sdopt %s --report=json | FileCheck %s
// The pass with options; layout=global reads the local types as global
// ones divided by the argument shardings.
// RUN: sdopt %s -sd-print-report="format=json layout=global" -o /dev/null | FileCheck %s --check-prefix=GLOBAL

// A 512x1024 bf16 weight gathered over fsdp=4 from 128x1024 blocks:
// S = 512·1024·2 B = 1048576 B, each device sends 3/4 of it = 786432 B.
// FLOPs: the dot, 2 × (64·1024 result elements) × 512 contracted =
// 67108864, and the reduce_max, 1 per operand element, 65536: 67174400. Parameter 128·1024·2 = 262144 B; input 64·512·2 = 65536 B.
// Peak at the dot: the gathered weight (1048576 B) and the f32 result
// (64·1024·4 = 262144 B) = 1310720 B; total 262144 + 65536 + 1310720.
// The weight is the one sharded parameter and is gathered once: its
// 786432 B meet ZeRO's bound Ψ(N−1)/N, Ψ = 1048576 B (the whole weight),
// N = 4. The network model's default (10 GB/s per device inside a
// process, 1 µs a ring step) predicts 786432 B / 10 GB/s + 3 steps =
// 81.6432 µs for it.
// CHECK:      "collectives": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "axes": [
// CHECK-NEXT:       "fsdp"
// CHECK-NEXT:     ],
// CHECK-NEXT:     "bytes_per_device": 786432,
// CHECK-NEXT:     "count": 1,
// CHECK-NEXT:     "group_size": 4,
// CHECK-NEXT:     "kind": "all_gather",
// CHECK-NEXT:     "tensor_bytes": 1048576
// CHECK-NEXT:   }
// CHECK-NEXT: ],
// CHECK-NEXT: "communication": [
// CHECK-NEXT:   {
// CHECK-NEXT:     "axes": [
// CHECK-NEXT:       "fsdp"
// CHECK-NEXT:     ],
// CHECK-NEXT:     "bytes_per_device": 786432,
// CHECK-NEXT:     "count": 1,
// CHECK-NEXT:     "group_size": 4,
// CHECK-NEXT:     "link": "ICI",
// CHECK-NEXT:     "predicted_seconds": 8.16432{{0*[0-9]?}}e-05
// CHECK-NEXT:   }
// CHECK-NEXT: ],
// CHECK-NEXT: "function": "loss",
// CHECK-NEXT: "mesh": {
// CHECK-NEXT:   "devices": 4,
// CHECK-NEXT:   "name": "mesh",
// CHECK-NEXT:   "spec": "fsdp:4"
// CHECK-NEXT: },
// CHECK-NEXT: "network": {
// CHECK-NEXT:   "dcn_bytes_per_second": 3125000000,
// CHECK-NEXT:   "dcn_latency_seconds": 2.5{{0*[0-9]?}}e-05,
// CHECK-NEXT:   "ici_bytes_per_second": 10000000000,
// CHECK-NEXT:   "ici_latency_seconds": 9.9{{9*[0-9]?}}e-07
// CHECK-NEXT: },
// CHECK-NEXT: "parameter_gathers": {
// CHECK-NEXT:   "all_gather_bytes": 786432,
// CHECK-NEXT:   "all_gathers": 1,
// CHECK-NEXT:   "exceptions": [],
// CHECK-NEXT:   "gathered_more_than_once": 0,
// CHECK-NEXT:   "gathered_once": 1,
// CHECK-NEXT:   "group_size": 4,
// CHECK-NEXT:   "never_gathered": 0,
// CHECK-NEXT:   "parameters": 1,
// CHECK-NEXT:   "sharded": 1,
// CHECK-NEXT:   "sharded_bytes": 1048576,
// CHECK-NEXT:   "zero_bound_bytes": 786432
// CHECK-NEXT: },
// CHECK-NEXT: "per_device": {
// CHECK-NEXT:   "activations": {
// CHECK-NEXT:     "peak_bytes": 1310720,
// CHECK-NEXT:     "peak_gradient_sum_bytes": 0,
// CHECK-NEXT:     "peak_op": "sd.dot_general",
// CHECK-NEXT:     "values": 3,
// CHECK-NEXT:     "values_without_sharding": 0
// CHECK-NEXT:   },
// CHECK:        "collective_bytes": 786432,
// CHECK-NEXT:   "flops": 67174400,
// CHECK-NEXT:   "host": {
// CHECK-NEXT:     "peak_bytes": 0,
// CHECK-NEXT:     "transfer_bytes": 0
// CHECK-NEXT:   },
// CHECK-NEXT:   "inputs": {
// CHECK-NEXT:     "bytes": 65536,
// CHECK-NEXT:     "tensors": 1
// CHECK-NEXT:   },
// CHECK-NEXT:   "ops_without_sharding": 0,
// CHECK-NEXT:   "optimizer_state": {
// CHECK-NEXT:     "bytes": 0,
// CHECK-NEXT:     "tensors": 0
// CHECK-NEXT:   },
// CHECK-NEXT:   "padding": {
// CHECK-NEXT:     "bytes": 0,
// CHECK-NEXT:     "computed_elements": 0,
// CHECK-NEXT:     "padded_elements": 0,
// CHECK-NEXT:     "tensors": 0
// CHECK-NEXT:   },
// CHECK-NEXT:   "parameters": {
// CHECK-NEXT:     "bytes": 262144,
// CHECK-NEXT:     "elements": 131072,
// CHECK-NEXT:     "tensors": 1
// CHECK-NEXT:   },
// CHECK-NEXT:   "recompute_flops": 0,
// CHECK-NEXT:   "reshards": 0,
// CHECK-NEXT:   "total_bytes": 1638400
// CHECK-NEXT: },
// CHECK-NEXT: "program": "partitioned"

// Read as global, the weight's sharding [{"fsdp"}, {}] splits its 128 rows
// over 4 devices: 32·1024·2 = 65536 B.
// GLOBAL:      "parameters": {
// GLOBAL-NEXT:   "bytes": 65536,
// GLOBAL:      "program": "global"
sd.mesh @mesh = <["fsdp"=4]>
func.func @loss(%w: tensor<128x1024xbf16> {sd.role = #sd.param<"w", zeros>, sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
                %x: tensor<64x512xbf16> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %g = sd.all_gather %w @mesh [{"fsdp"}, {}] : (tensor<128x1024xbf16>) -> tensor<512x1024xbf16>
  %y = sd.dot_general %x, %g batch = [] x [] contract = [1] x [0] : (tensor<64x512xbf16>, tensor<512x1024xbf16>) -> tensor<64x1024xf32>
  %l = sd.reduce_max %y dims = [0, 1] : (tensor<64x1024xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
