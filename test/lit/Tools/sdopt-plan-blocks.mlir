// sdopt --plan prices a model's repeated blocks once: DiT-tiny with 5
// blocks (a chain of calls to @dit_block) is priced from one copy with 3
// blocks, the middle one's ops each further block's price, the program
// without them the 2-block base's (lib/Passes/PlanBlocks.h). The table is the one
// the whole program's pricing gives (--plan-whole-program), to the digit.
// RUN: sdgen --preset=dit-tiny --depth=5 -o %t.mlir
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash > %t.blocks
// RUN: FileCheck %s < %t.blocks
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --plan-whole-program > %t.whole
// RUN: FileCheck %s --check-prefix=WHOLE < %t.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.blocks | diff - %t.whole
// The offload policies: a block's offloads and reloads go with the block
// that reads the offloaded value (the location of its first forward
// reader), so the middle block's transfers are one block's. In 2 and 4
// microbatches the activation peak moves between the 2-block base and the
// 3-block sample; the copies of the middle block's liveness find it
// (SampleLiveness::peaksFor).
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=HIDDEN_STATE_WITH_OFFLOAD --plan-top=0 > %t.offload
// RUN: FileCheck %s --check-prefix=OFFLOAD < %t.offload
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=HIDDEN_STATE_WITH_OFFLOAD --plan-top=0 --plan-whole-program > %t.offload.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.offload | diff - %t.offload.whole
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=OFFLOAD_MATMUL_WITHOUT_BATCH --plan-top=0 > %t.offload2
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --remat=OFFLOAD_MATMUL_WITHOUT_BATCH --plan-top=0 --plan-whole-program > %t.offload2.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.offload2 | diff - %t.offload2.whole
// OFFLOAD: repeated blocks priced once: @dit_block x5
// OFFLOAD-NEXT: shardings propagated
// OFFLOAD: 1 fsdp:2 dit flash HIDDEN_STATE_WITH_OFFLOAD 1 
// In bf16 each parameter's cast from its f32 master copy goes with the
// block whose call first reads it (sd-apply-precision marks it), and so do
// its gradient's widening and its update: the middle block's parameters
// are one block's.
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --weights-dtype=bfloat16 --activations-dtype=bfloat16 --plan-top=0 > %t.bf16
// RUN: FileCheck %s --check-prefix=BF16 < %t.bf16
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --weights-dtype=bfloat16 --activations-dtype=bfloat16 --plan-top=0 --plan-whole-program > %t.bf16.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.bf16 | diff - %t.bf16.whole
// BF16: repeated blocks priced once: @dit_block x5
// Gradient buckets do not line up with the blocks: with them the search
// prices each whole program, and says so, and the table is the reference's.
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --bucket-cap-mb=0.05 > %t.buckets
// RUN: FileCheck %s --check-prefix=BUCKETS < %t.buckets
// RUN: sdopt %t.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash --bucket-cap-mb=0.05 --plan-whole-program > %t.buckets.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.buckets | diff - %t.buckets.whole
// BUCKETS: repeated blocks priced in the whole program: the gradient buckets (--bucket-cap-mb) do not line up with the blocks
// BUCKETS-NOT: repeated blocks priced once
// Flux has two chains (double- and single-stream blocks): one copy with 3
// of each, priced without both middle blocks and with each in turn.
// RUN: sdgen --preset=flux-dev --depth=4 --single-depth=5 --hidden=32 --heads=2 --text-dim=16 --pooled-dim=8 --height=32 --width=32 --text-length=4 --freq-dim=32 -o %t.flux.mlir
// RUN: sdopt %t.flux.mlir --plan --devices=2 --profile=cpu --batch=4 --attention=flash > %t.flux.blocks
// RUN: FileCheck %s --check-prefix=FLUX < %t.flux.blocks
// RUN: sdopt %t.flux.mlir --plan --devices=2 --profile=cpu --batch=4 --attention=flash --plan-whole-program > %t.flux.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.flux.blocks | diff - %t.flux.whole
// Without chains the candidates still share their mesh-free pipeline (the
// training step built and inlined once per attention, remat policy and
// accumulation; buildMeshFreePipeline): every plan that fits, with remat,
// accumulation and rule variants, as the default pipeline prices it.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash --plan-top=0 > %t.tiny.split
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=%sd_src_root/test/data/profiles/offload_memory.yml --batch=8 --attention=flash --plan-top=0 --plan-whole-program > %t.tiny.whole
// RUN: grep -v '^shardings propagated' %t.tiny.split | diff - %t.tiny.whole
// RUN: FileCheck %s --check-prefix=SPLIT < %t.tiny.split
// Across hosts (DCN axes), the same.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=4 --hosts=2 --profile=cpu --batch=8 --attention=ring --plan-top=0 > %t.hosts.split
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=4 --hosts=2 --profile=cpu --batch=8 --attention=ring --plan-top=0 --plan-whole-program > %t.hosts.whole
// RUN: grep -v '^shardings propagated' %t.hosts.split | diff - %t.hosts.whole
// Meshes of the same axes whose sizes the propagation compares alike share
// one propagation (sd-propagate-sharding's record-size-queries): on 8
// devices `data:2,fsdp:4` and `data:4,fsdp:2` may; the tables stay the
// default pipeline's, which propagates every mesh.
// RUN: sdopt %t.mlir --plan --devices=8 --profile=cpu --batch=8 --attention=flash --plan-top=0 > %t.eight
// RUN: sdopt %t.mlir --plan --devices=8 --profile=cpu --batch=8 --attention=flash --plan-top=0 --plan-whole-program > %t.eight.whole
// RUN: grep -v -e '^repeated blocks' -e '^shardings propagated' %t.eight | diff - %t.eight.whole
// RUN: FileCheck %s --check-prefix=EIGHT < %t.eight
// Before any partition, each group's time is bounded from below by its
// matrix products' FLOPs alone (on the propagated shardings), and the
// groups whose bound exceeds the table's last row are not priced: the
// table is the one pricing every group gives, and the search the same on
// one thread as on every core.
// RUN: sdopt %t.mlir --plan --devices=4 --profile=cpu --batch=2 > %t.bound
// RUN: FileCheck %s --check-prefix=BOUND < %t.bound
// RUN: sdopt %t.mlir --plan --devices=4 --profile=cpu --batch=2 --plan-whole-program > %t.bound.whole
// RUN: grep -E '^ +[0-9]+  ' %t.bound > %t.bound.rows
// RUN: grep -E '^ +[0-9]+  ' %t.bound.whole | diff %t.bound.rows -
// RUN: sdopt %t.mlir --plan --devices=4 --profile=cpu --batch=2 --mlir-disable-threading | diff %t.bound -
// A chain too short to gain anything is priced whole.
// RUN: sdopt %sd_src_root/models/dit_tiny.mlir --plan --devices=2 --profile=cpu --batch=8 --attention=flash | FileCheck %s --check-prefix=SHORT

// CHECK:      sd plan: 2 devices
// CHECK-NEXT: repeated blocks priced once: @dit_block x5 (each candidate from one copy with 3 blocks of each chain, the middle ones each further block's price; --plan-whole-program prices the whole)
// CHECK-NEXT: shardings propagated for {{[0-9]+}} of {{[0-9]+}} programs
// CHECK-NEXT: # mesh
// CHECK-NEXT: 1 {{(data|fsdp|context|tensor)}}:2 dit{{[a-z+-]*}} flash NONE 1

// SPLIT: {{FULL|MATMUL_WITHOUT_BATCH|OFFLOAD}}
// SPLIT: priced 42, ranked 20;

// FLUX: repeated blocks priced once: @flux_double_block x4 @flux_single_block x5

// WHOLE-NOT: repeated blocks
// WHOLE-NOT: shardings propagated

// SHORT-NOT: repeated blocks
// SHORT: priced

// EIGHT:      repeated blocks priced once: @dit_block x5
// EIGHT-NEXT: shardings propagated for 36 of 44 programs

// BOUND:      # mesh
// BOUND-NEXT: 1 fsdp:2,tensor:2 dit flash NONE 1
// BOUND:      priced {{[0-9]+}}, ranked {{[0-9]+}}; {{.*}}, {{[1-9][0-9]*}} of groups whose matrix products alone take longer than the table's last row;
