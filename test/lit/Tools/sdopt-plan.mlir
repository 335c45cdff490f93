// sdopt --plan (docs/planner.md): DiT-tiny's training step on 2 devices of
// the cpu profile. Every mesh of 2 devices over data, fsdp, context and
// tensor (4), with dot_product and flash attention (and ring and Ulysses on
// context:2: 10 pairs), with 6 remat policies is 60 candidates. Every pair
// fits without remat, so its other 5 policies are not priced: 10 priced and
// ranked.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 > %t.one
// RUN: FileCheck %s < %t.one
// The same input gives the same plan.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 > %t.two
// RUN: diff %t.one %t.two
// Across hosts: DCN meshes over data and fsdp (4 devices on 2 hosts: 4
// meshes inside a host times 2 across, 20 pairs, 120 candidates).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=4 --hosts=2 --profile=cpu --batch=8 | FileCheck %s --check-prefix=HOSTS
// --attention and --remat restrict the search to themselves.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=FULL | FileCheck %s --check-prefix=RESTRICT
// The best plan as a run config that sdrun reads back: the table's first
// row's mesh, attention and remat policy, the global batch as
// per_device_batch_size.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --plan-output=%t.plan.yml | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s --check-prefix=YAML < %t.plan.yml
// RUN: sdrun %sd_src_root/models/dit_tiny.mlir --config=%t.plan.yml --print-config | FileCheck %s --check-prefix=CONFIG
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --plan-output=%t.missing/plan.yml 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// A machine too small for any plan: one error with the smallest plan's
// memory and a device count that would fit it.
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/small_memory.yml --batch=8 2>&1 | FileCheck %s --check-prefix=NOFIT
// A machine where neither NONE nor FULL fits: the policies that keep more
// than FULL are not priced, the offloading ones are (their host traffic at
// the profile's host link) and win.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash | FileCheck %s --check-prefix=OFFLOAD
// Flags that do not go with --plan.
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --mesh=data:2 --devices=2 --profile=cpu 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --profile=cpu 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=6 --hosts=4 --profile=cpu 2>&1 | FileCheck %s --check-prefix=HOSTS-DIVIDE
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --report 2>&1 | FileCheck %s --check-prefix=REPORT

// CHECK:      sd plan: 2 devices (1 host of 2) of cpu, device memory 12.9 GB: 60 candidates
// CHECK-NEXT:   # mesh attention remat step compute comm memory why it lost
// CHECK-NEXT:   1 {{(data|fsdp|context|tensor)}}:2 {{(dot_product|flash|ring|ulysses)}} NONE {{[0-9.]+ m?s}}
// CHECK-NEXT:   2 {{.*}} {{\+.* compute|\+.* communication|\+.* offload|same time, more memory}}
// CHECK-NEXT: {{^ +3 +[a-z]}}
// CHECK-NEXT: {{^ +4 +[a-z]}}
// CHECK-NEXT: {{^ +5 +[a-z]}}
// CHECK-NEXT: priced 10, ranked 10; not priced: 50 remat policies where NONE fits (recomputing and offloading only add time), 0 that keep more than FULL where FULL does not fit; dropped: 0 that do not fit the device memory, 0 that do not partition

// HOSTS:      sd plan: 4 devices (2 hosts of 2) of cpu, {{.*}}: 120 candidates
// HOSTS:        1  {{.*}} | {{(data|fsdp)}}:2
// HOSTS:      priced 20, ranked 20;

// RESTRICT:      2 devices (1 host of 2) of cpu, {{.*}}: 4 candidates
// RESTRICT-NEXT: # mesh
// RESTRICT-NEXT: 1 {{(data|fsdp|context|tensor)}}:2 flash FULL
// RESTRICT-NEXT: 2 {{(data|fsdp|context|tensor)}}:2 flash FULL
// RESTRICT-NEXT: 3 {{(data|fsdp|context|tensor)}}:2 flash FULL
// RESTRICT-NEXT: 4 {{(data|fsdp|context|tensor)}}:2 flash FULL
// RESTRICT-NEXT: priced 4, ranked 4;

// NOFIT: error: no plan fits 2 devices of 1.0 MB: the smallest ({{.*}}, attention {{[a-z_]+}}, remat {{[A-Z_]+}}) needs {{.*}} MB per device; about {{[0-9]+}} devices would fit it (its state split over more)
// NOFIT-NOT: see current operation

// OFFLOAD:      2 devices (1 host of 2) of offload_memory, device memory 18.0 MB: 24 candidates
// OFFLOAD:      1 {{(data|fsdp|context|tensor)}}:2 flash OFFLOAD_MATMUL_WITHOUT_BATCH
// OFFLOAD:      priced 16, ranked {{[1-9][0-9]*}}; not priced: 0 remat policies where NONE fits (recomputing and offloading only add time), 8 that keep more than FULL where FULL does not fit;

// MESH: error: --plan chooses the mesh: leave out --mesh and --dcn-mesh
// DEVICES: error: --plan needs --devices, the devices to plan for
// PROFILE: error: --plan needs --profile, the hardware to price on (cpu, tpu-v5p, tpu-v6e, h100-sxm or a profile file)
// HOSTS-DIVIDE: error: --hosts=4 must be positive and divide --devices=6
// REPORT: error: --plan prints its own table: leave out --report, --show-sharding, --emit and --stage

// WROTE: wrote the best plan to {{.*}}plan.yml (sdrun --config={{.*}}plan.yml)
// YAML:      # sdopt --plan's best plan on cpu for 2 devices (1 host): predicted step
// YAML:      ici_data_parallelism: {{[12]}}
// YAML-NEXT: ici_fsdp_parallelism: {{[12]}}
// YAML-NEXT: ici_context_parallelism: {{[12]}}
// YAML-NEXT: ici_tensor_parallelism: {{[12]}}
// YAML-NEXT: dcn_data_parallelism: 1
// YAML-NEXT: dcn_fsdp_parallelism: 1
// YAML-NEXT: per_device_batch_size: 4.00
// YAML-NEXT: attention: '{{(dot_product|flash|ring|ulysses)}}'
// YAML-NEXT: remat_policy: '{{[A-Z_]+}}'
// CONFIG: mesh {{ *}}{{(data|fsdp|context|tensor)}}:2 ({{.*}}plan.yml:
// CONFIG: per_device_batch_size {{ *}}4 ({{.*}}plan.yml:
// CONFIG: attention {{ *}}{{(dot_product|flash|ring|ulysses)}} ({{.*}}plan.yml:
// UNWRITABLE: error: cannot write --plan-output file "{{.*}}missing/plan.yml": No such file or directory
