// The report of DiT-S/2 (batch 8) on data=2 × fsdp=4, a global program:
// parameters and inputs per device from the shardings the dit rules give.
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --stage=rules --report | FileCheck %s
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --stage=rules --report=json | FileCheck %s --check-prefix=JSON
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:2,fsdp:4 --stage=sharded --report | FileCheck %s --check-prefix=SHARDED

// Parameters: 32.87M in 131 tensors; the per-device sum of each argument's
// block (its global shape divided by its sharding, e.g. a 1536x384 weight
// [{}, {"fsdp"}] → 1536x96) is 8,262,080 elements = 33,048,320 B (summed
// independently over the arguments of `sdopt --mesh=data:2,fsdp:4`).
// Inputs: the batch split 8 ways: latents and noise 1x32x32x4 f32 (16384 B
// each), timestep 1 (4 B), labels 1x1001 (4004 B) = 36,776 B.
// FLOPs: the whole program (no op has a sharding before propagation):
// dot_general 87,233,257,472 + attention 9,890,168,832 + elementwise and
// norms 621,960,768 = 97,745,387,072, i.e. 2 × 6.1 GMACs per image as
// published for DiT-S/2 (6.06 Gflops), plus elementwise work (and the
// learn_sigma half of the final projection, computed and not used).
// CHECK-LABEL: sd report: @loss, mesh @mesh data:2,fsdp:4 (8 devices)
// CHECK-NEXT:  program: global (not partitioned)
// CHECK:       850 of 850 values and 325 ops with FLOPs have none and count whole
// CHECK-NEXT:  calls: @dit_block x12 (each costed through its callee, once per call)
// CHECK:       parameters 33.0 MB 131 tensors, 8,262,080 elements
// CHECK-NEXT:  inputs 36.8 kB 4 tensors
// CHECK-NEXT:  activations (peak) 44.2 MB at func.call @dit_block > sd.add
// CHECK:       FLOPs 97.7 GFLOP

// JSON:      "calls": {
// JSON-NEXT:   "dit_block": 12
// JSON:        "flops": 97745387072,
// JSON:        "inputs": {
// JSON-NEXT:     "bytes": 36776,
// JSON-NEXT:     "tensors": 4
// JSON:        "parameters": {
// JSON-NEXT:     "bytes": 33048320,
// JSON-NEXT:     "elements": 8262080,
// JSON-NEXT:     "tensors": 131

// After propagation every value has a sharding and most work splits 8
// ways (97.7 GFLOP / 8 = 12.21 GFLOP; a few small replicated ops count
// whole); the reshards become collectives in sd-partition.
// SHARDED-LABEL: sd report: @loss
// SHARDED:       every value has one
// SHARDED:       parameters 33.0 MB 131 tensors, 8,262,080 elements
// SHARDED:       FLOPs 12.2 GFLOP
// SHARDED:       collectives per device: none yet (sd-partition turns {{[0-9]+}} sd.reshard ops
