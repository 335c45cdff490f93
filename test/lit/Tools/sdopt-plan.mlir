// sdopt --plan (docs/planner.md): DiT-tiny's training step on 2 devices of
// the cpu profile. Every mesh of 2 devices over data, fsdp, context and
// tensor (4); on fsdp:2 the dit rules and their fsdp-seq variant, on
// context:2 the rules and their ctx-embed variant (6 mesh and rules pairs);
// dot_product and flash attention, with ring and Ulysses where context
// splits the sequence (16 groups); 6 remat policies; 1, 2, 4 and (where the
// batch of 8 splits over the batch's devices) 8 microbatches: 360
// candidates. Every group fits without remat in one microbatch, so nothing
// else of it is priced: 16 priced and ranked.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 > %t.one
// RUN: FileCheck %s < %t.one
// The same input gives the same plan; --global-batch is --batch.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 > %t.two
// RUN: diff %t.one %t.two
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --global-batch=8 > %t.three
// RUN: diff %t.one %t.three
// A per-device batch is of the devices planned for: 4 on 2 devices is
// the global batch of 8.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --per-device-batch=4 > %t.per-device
// RUN: diff %t.one %t.per-device
// With --grad-accum it is a microbatch's: 2 × 2 devices × 2 microbatches.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --grad-accum=2 > %t.accum-batch
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --per-device-batch=2 --grad-accum=2 > %t.accum-per-device
// RUN: diff %t.accum-batch %t.accum-per-device
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --per-device-batch=0.75 2>&1 | FileCheck %s --check-prefix=PER-DEVICE
// Partitioned on the context's threads or on one, the same table, down to
// the first plan that does not partition (every plan of 8 devices: Ulysses
// where context does not divide the heads of a device).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=8 --profile=cpu --batch=8 --plan-top=0 > %t.threads
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=8 --profile=cpu --batch=8 --plan-top=0 --mlir-disable-threading > %t.thread
// RUN: diff %t.threads %t.thread
// RUN: FileCheck %s --check-prefix=THREADS < %t.thread
// Across hosts: DCN meshes over data and fsdp (4 devices on 2 hosts: 4
// meshes inside a host times 2 across, 44 groups, 816 candidates).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=4 --hosts=2 --profile=cpu --batch=8 | FileCheck %s --check-prefix=HOSTS
// --attention, --remat, --rules and --grad-accum restrict the search to
// themselves.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=FULL --rules=dit --grad-accum=2 | FileCheck %s --check-prefix=RESTRICT
// The best plan as a run config that sdrun reads back: the table's first
// row's mesh, attention and remat policy, the global batch as
// per_device_batch_size.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --plan-output=%t.plan.yml | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s --check-prefix=YAML < %t.plan.yml
// RUN: sdrun %sd_src_root/models/dit_tiny.mlir --config=%t.plan.yml --print-config | FileCheck %s --check-prefix=CONFIG
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --plan-output=%t.missing/plan.yml 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// The rest of the run the search priced goes with the plan, so that sdrun
// runs that program: the precision, the buckets, LoRA's adapters as
// enable_lora and lora_config; a flag no config key holds (--warmup-steps)
// on the "Run it" line.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --weights-dtype=bfloat16 --activations-dtype=bfloat16 --bucket-cap-mb=1 --lora-rank=4 --lora-targets=qkv --warmup-steps=10 --lr=3e-5 --plan-output=%t.carried-plan.yml | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s --check-prefix=CARRIED < %t.carried-plan.yml
// RUN: sdrun %sd_src_root/models/dit_tiny.mlir --config=%t.carried-plan.yml --print-config | FileCheck %s --check-prefix=CARRIED-CONFIG
// A rule whose logical name has a quote is written as a quoted YAML scalar
// that reads back.
// RUN: printf "logical_axis_rules: [['batch', ['data', 'fsdp']], ['embed', 'fsdp'], ['it''s', 'tensor']]\n" > %t.quoted.yml
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --rules=%t.quoted.yml --plan-output=%t.quoted-plan.yml > /dev/null
// RUN: FileCheck %s --check-prefix=QUOTED < %t.quoted-plan.yml
// RUN: sdrun %sd_src_root/models/dit_tiny.mlir --config=%t.quoted-plan.yml --print-config | FileCheck %s --check-prefix=QUOTED-CONFIG
// A machine too small for any plan: one error with the smallest plan's
// memory and a device count that would fit it. (Flash attention and one
// microbatch: with nothing that fits, every remat policy is priced.)
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/small_memory.yml --batch=8 --attention=flash --grad-accum=1 2>&1 | FileCheck %s --check-prefix=NOFIT
// --device-memory replaces the profile's memory. A DiT-tiny of width 512
// on 4 devices of 120 MB: where the parameters and their optimizer state
// alone take more (data:4, and data:2 with tensor:2), no remat policy is
// priced; the rest of those groups is not either.
// RUN: sdgen --preset=dit-tiny --hidden=512 --heads=8 --depth=2 --batch=2 -o %t.wide.mlir
// RUN: sdopt %t.wide.mlir --plan --devices=4 --profile=cpu --device-memory=120MB --attention=flash --grad-accum=1 --rules=dit | FileCheck %s --check-prefix=STATE
// Without NONE in the search (--remat=FULL), the first plan priced of a
// group rules out the rest of it (data:4's second microbatch count).
// RUN: sdopt %t.wide.mlir --plan --devices=4 --profile=cpu --device-memory=120MB --attention=flash --rules=dit --remat=FULL | FileCheck %s --check-prefix=STATE
// RUN: not sdopt %t.wide.mlir --plan --devices=4 --profile=cpu --device-memory=lots 2>&1 | FileCheck %s --check-prefix=STATE-SIZE
// RUN: not sdopt %t.wide.mlir --device-memory=120MB 2>&1 | FileCheck %s --check-prefix=STATE-PLAN
// A machine where neither NONE nor FULL fits in one microbatch: the
// policies that keep more than FULL are not priced, the offloading ones
// are (their host traffic at the profile's host link) and win.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash --grad-accum=1 | FileCheck %s --check-prefix=OFFLOAD
// With accumulation in the search, 2 microbatches without remat fit and
// win; they are written as gradient_accumulation_steps, the per-device
// batch a microbatch's (MaxDiffusion's global batch = per device x
// devices x steps), and sdrun reads them back. The groups whose NONE is
// slower than the table's fifth row price nothing more.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash --plan-output=%t.accum.yml | FileCheck %s --check-prefix=ACCUM
// RUN: FileCheck %s --check-prefix=ACCUM-YAML < %t.accum.yml
// RUN: sdrun %sd_src_root/models/dit_tiny.mlir --config=%t.accum.yml --print-config | FileCheck %s --check-prefix=ACCUM-CONFIG
// --plan-top=0 prints every plan that fits (and prunes nothing for time).
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash --plan-top=0 | FileCheck %s --check-prefix=ALL
// Flags that do not go with --plan.
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --mesh=data:2 --devices=2 --profile=cpu 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --profile=cpu 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=6 --hosts=4 --profile=cpu 2>&1 | FileCheck %s --check-prefix=HOSTS-DIVIDE
// RUN: not sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --report 2>&1 | FileCheck %s --check-prefix=REPORT

// CHECK:      sd plan: 2 devices (1 host of 2) of cpu, device memory 12.9 GB: 360 candidates
// CHECK-NEXT: shardings propagated for {{[0-9]+}} of {{[0-9]+}} programs
// CHECK-NEXT:   # mesh rules attention remat accum step compute comm memory why it lost communication by mesh axes
// The first row lost to nothing; the last column is the collectives' time
// on each set of mesh axes (a 2-device mesh has one).
// CHECK-NEXT:   1 {{(data|fsdp|context|tensor)}}:2 dit{{[a-z+-]*}} {{(dot_product|flash|ring|ulysses)}} NONE 1 {{[0-9.]+ m?s}} {{.*}} - {{(data|fsdp|context|tensor) [0-9.]+ (µs|ms|s)$}}
// CHECK-NEXT:   2 {{.*}} {{\+.* compute|\+.* communication|\+.* offload|same time, more memory}}
// CHECK-NEXT: {{^ +3 +[a-z]}}
// CHECK-NEXT: {{^ +4 +[a-z]}}
// CHECK-NEXT: {{^ +5 +[a-z]}}
// CHECK-NEXT: priced 16, ranked 16; not priced: 344 remat policies where NONE fits (recomputing and offloading only add time), 0 that keep more than FULL where FULL does not fit, 0 where NONE already takes longer than the table's last row, 0 where NONE does not partition, 0 where the parameters and optimizer state alone do not fit, 0 of groups whose matrix products alone take longer than the table's last row; dropped: 0 that do not fit the device memory, 0 that do not partition

// HOSTS:      sd plan: 4 devices (2 hosts of 2) of cpu, {{.*}}: 816 candidates
// HOSTS:        1  {{.*}} | {{(data|fsdp)}}:2
// HOSTS:      priced 44, ranked 44;

// THREADS:    sd plan: 8 devices (1 host of 8) of cpu, {{.*}}: 2640 candidates
// THREADS:    priced 144, ranked 132; {{.*}} 276 where NONE does not partition, {{.*}} 12 that do not partition (first: context:2,tensor:4, ulysses, NONE: 'sd.flash_attention' op cannot use ulysses attention: 1 heads per device are not divisible by the 2 devices

// RESTRICT:      2 devices (1 host of 2) of cpu, {{.*}}: 4 candidates
// RESTRICT-NEXT: shardings propagated for 4 of 4 programs
// RESTRICT-NEXT: # mesh
// RESTRICT-NEXT: 1 {{(data|fsdp|context|tensor)}}:2 dit flash FULL 2
// RESTRICT-NEXT: 2 {{(data|fsdp|context|tensor)}}:2 dit flash FULL 2
// RESTRICT-NEXT: 3 {{(data|fsdp|context|tensor)}}:2 dit flash FULL 2
// RESTRICT-NEXT: 4 {{(data|fsdp|context|tensor)}}:2 dit flash FULL 2
// RESTRICT-NEXT: priced 4, ranked 4;

// NOFIT: error: no plan fits 2 devices of 1.0 MB: the smallest ({{.*}}, attention {{[a-z_]+}}, remat {{[A-Z_]+}}) needs {{.*}} MB per device; about {{[0-9]+}} devices would fit it (its state split over more)
// NOFIT-NOT: see current operation

// STATE:      4 devices (1 host of 4) of cpu, device memory 120.0 MB:
// STATE:      priced {{[0-9]+}}, ranked {{[1-9][0-9]*}}; {{.*}}, {{[1-9][0-9]*}} where the parameters and optimizer state alone do not fit,
// STATE-SIZE: error: --device-memory='lots' is not a size (e.g. 512MiB, 2GB)
// STATE-PLAN: error: --device-memory is the memory --plan plans for (sdrun's budget); sdopt uses it only with --plan

// OFFLOAD:      2 devices (1 host of 2) of offload_memory, device memory 18.0 MB: 36 candidates
// OFFLOAD:      1 {{(data|fsdp|context|tensor)}}:2 dit{{[a-z+-]*}} flash OFFLOAD_MATMUL_WITHOUT_BATCH 1
// OFFLOAD:      priced {{[0-9]+}}, ranked {{[1-9][0-9]*}}; not priced: 0 remat policies where NONE fits (recomputing and offloading only add time), 12 that keep more than FULL where FULL does not fit,

// ACCUM:      2 devices (1 host of 2) of offload_memory, device memory 18.0 MB: 132 candidates
// ACCUM:      1 {{(data|fsdp|context|tensor)}}:2 dit{{[a-z+-]*}} flash NONE 2
// ACCUM:      not priced: {{[1-9][0-9]*}} remat policies where NONE fits (recomputing and offloading only add time), {{[0-9]+}} that keep more than FULL where FULL does not fit, {{[1-9][0-9]*}} where NONE already takes longer than the table's last row
// ACCUM-YAML:      per_device_batch_size: 2{{$}}
// ACCUM-YAML-NEXT: gradient_accumulation_steps: 2
// ACCUM-YAML-NEXT: attention: 'flash'
// ACCUM-YAML-NEXT: remat_policy: 'NONE'
// ACCUM-YAML-NEXT: # dit
// ACCUM-YAML-NEXT: logical_axis_rules: [
// ACCUM-YAML-NEXT:   ['batch', ['data', 'fsdp']],
// ACCUM-CONFIG: per_device_batch_size {{ *}}2 ({{.*}}accum.yml:
// ACCUM-CONFIG: gradient_accumulation_steps {{ *}}2 ({{.*}}accum.yml:
// ACCUM-CONFIG: logical_axis_rules {{ *}}12 rules ({{.*}}accum.yml:

// ALL:      priced 42, ranked 20; not priced: {{[0-9]+}} remat policies where NONE fits (recomputing and offloading only add time), {{[0-9]+}} that keep more than FULL where FULL does not fit, 0 where NONE already takes longer than the table's last row

// PER-DEVICE: error: --per-device-batch=0.75 × 2 devices = 1.5 is not a whole, positive global batch of at most 16777216
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
// YAML-NEXT: per_device_batch_size: 4{{$}}
// YAML-NEXT: gradient_accumulation_steps: 1
// YAML-NEXT: attention: '{{(dot_product|flash|ring|ulysses)}}'
// YAML-NEXT: remat_policy: '{{[A-Z_]+}}'
// YAML-NEXT: # dit
// YAML-NEXT: logical_axis_rules: [
// YAML-NOT: # The settings sdopt --plan was given
// CARRIED:      # Run it: sdrun MODEL --config={{.*}}carried-plan.yml --warmup-steps=10{{$}}
// CARRIED:      # The settings sdopt --plan was given.
// CARRIED-NEXT: learning_rate: 3e-05
// CARRIED-NEXT: bucket_cap_mb: 1
// CARRIED-NEXT: weights_dtype: 'bfloat16'
// CARRIED-NEXT: activations_dtype: 'bfloat16'
// CARRIED-NEXT: enable_lora: true
// CARRIED-NEXT: lora_config: {rank: [4], target_modules: ['qkv']}
// CARRIED-NOT:  {{.}}
// QUOTED:      logical_axis_rules: [
// QUOTED-NEXT:   ['batch', ['data', 'fsdp']],
// QUOTED-NEXT:   ['embed', ['fsdp']],
// QUOTED-NEXT:   ['it''s', ['tensor']],
// QUOTED-NEXT: ]
// QUOTED-CONFIG: logical_axis_rules {{ *}}3 rules ({{.*}}quoted-plan.yml:
// CARRIED-CONFIG: learning_rate {{ *}}3e-05 ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: enable_lora {{ *}}True ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: lora_rank {{ *}}4 ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: lora_target_modules {{ *}}[qkv] ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: weights_dtype {{ *}}bfloat16 ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: activations_dtype {{ *}}bfloat16 ({{.*}}carried-plan.yml:
// CARRIED-CONFIG: bucket_cap_mb {{ *}}1 ({{.*}}carried-plan.yml:
// CONFIG: mesh {{ *}}{{(data|fsdp|context|tensor)}}:2 ({{.*}}plan.yml:
// CONFIG: per_device_batch_size {{ *}}4 ({{.*}}plan.yml:
// CONFIG: attention {{ *}}{{(dot_product|flash|ring|ulysses)}} ({{.*}}plan.yml:
// UNWRITABLE: error: cannot write --plan-output file "{{.*}}missing/plan.yml": No such file or directory
