// Hardware profiles and the step-time model (docs/planner.md): DiT-tiny's
// training step on fsdp:2, priced on a made-up machine of round numbers
// (test/data/profiles/round.yml: 100 GFLOP/s f32, 400 bf16, 10 GB/s of
// memory, 1 GB of it, 1 GB/s ICI).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=fsdp:2 --batch=8 --train --report --profile=%sd_src_root/test/data/profiles/round.yml | FileCheck %s
// The JSON's numbers obey the model: products at the rates or their bytes
// at the memory bandwidth, the bytes the other ops move once fused (fewer
// than they access) at it, and the step their sum with the communication
// less what hides.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=fsdp:2 --batch=8 --train --report=json --profile=%sd_src_root/test/data/profiles/round.yml > %t.json
// RUN: %python -c "import json, sys; t = json.load(open(sys.argv[1]))['step_time']; close = lambda a, b: abs(a - b) <= 1e-12 * max(abs(b), 1e-30); sys.exit(0 if (t['profile'] == 'round' and t['matmul_flops_f32'] > 0 and close(t['matmul_seconds'], max(t['matmul_flops_f32'] / 1e11 + t['matmul_flops_bf16'] / 4e11, t['matmul_bytes'] / 1e10)) and close(t['other_seconds'], t['other_memory_bytes'] / 1e10) and 0 < t['other_memory_bytes'] < t['other_bytes'] and close(t['step_seconds'], t['matmul_seconds'] + t['other_seconds'] + t['communication_seconds'] - t['hidden_seconds'] + t['offload_seconds']) and t['communication_seconds'] > 0 and t['device_bytes'] == 1e9 and t['fits']) else 1)" %t.json
// Under bf16 the products are priced at the bf16 rate.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=fsdp:2 --batch=8 --train --weights-dtype=bfloat16 --activations-dtype=bfloat16 --report=json --profile=tpu-v5p | %python -c "import json, sys; t = json.load(sys.stdin)['step_time']; sys.exit(0 if t['profile'] == 'tpu-v5p' and t['matmul_flops_bf16'] > t['matmul_flops_f32'] else 1)"
// An offloading remat policy's host traffic at the profile's host link (the
// round profile has none: its memory bandwidth, 10 GB/s).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=fsdp:2 --batch=8 --train --remat=OFFLOAD_MATMUL_WITHOUT_BATCH --report=json --profile=%sd_src_root/test/data/profiles/round.yml | %python -c "import json, sys; t = json.load(sys.stdin)['step_time']; sys.exit(0 if t['host_transfer_bytes'] > 0 and abs(t['offload_seconds'] - t['host_transfer_bytes'] / 1e10) <= 1e-12 * t['offload_seconds'] else 1)"
// Without --profile there is no prediction.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --mesh=fsdp:2 --batch=8 --report | FileCheck %s --check-prefix=NONE
// Bad profiles are one error each.
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --report --profile=tpu-v4 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --report --profile=%sd_src_root/test/data/profiles/bad_value.yml 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --report --profile=%t.missing.yml 2>&1 | FileCheck %s --check-prefix=MISSING

// CHECK-LABEL: predicted step time per device on round (step-time model)
// CHECK-NEXT:  matrix products {{.*}} f32 at 100.0 GFLOP/s, 0 FLOP bf16 at 400.0 GFLOP/s, or their bytes at the memory bandwidth
// CHECK-NEXT:  other ops {{.*}} at 10.0 GB/s (of their {{.*}} accessed, what fused loops move)
// CHECK-NEXT:  communication {{.*}} the collectives on the profile's links
// CHECK-NEXT:    hidden
// CHECK-NEXT:  offload 0.0 µs 0 B to and from the host at 10.0 GB/s
// CHECK-NEXT:  step
// CHECK-NEXT:  device memory {{.*}} fits 1.0 GB

// NONE-NOT: predicted step time

// UNKNOWN: error: --profile: unknown hardware profile "tpu-v4"; expected one of cpu, tpu-v5p, tpu-v6e, h100-sxm, or the path of a profile file
// VALUE: error: {{.*}}bad_value.yml:3: "f32_flops" must be a finite positive number (SI base units), not "-1e11"
// MISSING: error: --profile: cannot read profile file "{{.*}}missing.yml"
