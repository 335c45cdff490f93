// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ring --stage=partitioned | FileCheck %s --check-prefix=RING
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ulysses --stage=partitioned | FileCheck %s --check-prefix=ULYSSES
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ring --report=json | FileCheck %s --check-prefix=RING-BYTES
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ring --emit=openmp | FileCheck %s --check-prefix=RING-EMIT
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ulysses --report=json | FileCheck %s --check-prefix=ULYSSES-BYTES
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=flash --report=json | FileCheck %s --check-prefix=FLASH-BYTES
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=auto --ici-latency=0 --stage=partitioned 2>&1 | FileCheck %s --check-prefix=AUTO4
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=auto --stage=partitioned 2>&1 | FileCheck %s --check-prefix=AUTO4-LATENCY
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:8 --rules=flux --batch=4 --attention=auto --train --report 2>&1 | FileCheck %s --check-prefix=AUTO8
// RUN: not sdopt %sd_src_root/models/self_attention.mlir --mesh=context:8 --rules=flux --batch=4 --attention=ulysses --stage=partitioned 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ulysses_ring --ulysses-shards=2 --stage=partitioned | FileCheck %s --check-prefix=HYBRID
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:8 --rules=flux --batch=4 --attention=ulysses_ring --ulysses-shards=2 --report=json | FileCheck %s --check-prefix=HYBRID-BYTES
// RUN: sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=auto --ulysses-shards=2 --ici-latency=0 --stage=partitioned 2>&1 | FileCheck %s --check-prefix=AUTO-HYBRID
// RUN: not sdopt %sd_src_root/models/self_attention.mlir --mesh=context:4 --rules=flux --batch=4 --attention=ulysses_ring --ulysses-shards=3 --stage=partitioned 2>&1 | FileCheck %s --check-prefix=HYBRID-DIVIDE
// RUN: not sdopt %sd_src_root/models/self_attention.mlir --mesh=context:8 --rules=flux --batch=4 --attention=ulysses_ring --ulysses-shards=8 --stage=partitioned 2>&1 | FileCheck %s --check-prefix=HYBRID-HEADS

// The self-attention block's sequence (64 tokens, batch 4, 4 heads of 8)
// is sharded over context:4 by flux's rules; the forward program.

// Ring: the key and value blocks (local [4, 4, 16, 8]) take P − 1 = 3 hops;
// each hop's permute starts before the tiles of the block at hand and is
// done just before the next block's (double buffering); the partial
// outputs merge by log-sum-exp.
// RING-LABEL: func.func @loss
// RING: %[[PK1:.*]] = sd.collective_permute_start %[[K0:[0-9a-z_]+]] @mesh axes = ["context"] pairs = {{\[\[}}0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4x4x16x8xf32>
// RING: %[[PV1:.*]] = sd.collective_permute_start %[[V0:[0-9a-z_]+]] @mesh axes = ["context"] pairs = {{\[\[}}0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4x4x16x8xf32>
// RING: %[[O0:.*]], %[[L0:.*]] = sd.flash_attention %[[Q:[0-9a-z_]+]], %[[K0]], %[[V0]] scale
// RING-NOT: context_parallel
// RING: %[[K1:.*]] = sd.collective_permute_done %[[PK1]], %[[K0]]
// RING: %[[PK2:.*]] = sd.collective_permute_start %[[K1]]
// RING: %[[V1:.*]] = sd.collective_permute_done %[[PV1]], %[[V0]]
// RING: %[[PV2:.*]] = sd.collective_permute_start %[[V1]]
// RING: %[[O1:.*]], %[[L1:.*]] = sd.flash_attention %[[Q]], %[[K1]], %[[V1]] scale
// RING: %[[TOP:.*]] = sd.max %[[L0]], %[[L1]]
// RING: %[[K2:.*]] = sd.collective_permute_done %[[PK2]], %[[K1]]
// RING: %[[V2:.*]] = sd.collective_permute_done %[[PV2]], %[[V1]]
// RING: sd.flash_attention %[[Q]], %[[K2]], %[[V2]] scale
// RING: sd.flash_attention %[[Q]], %{{.*}}, %{{.*}} scale
// RING-NOT: sd.flash_attention
// RING-NOT: sd.collective_permute_start
// RING-NOT: sd.all_gather

// The emitted program: the start posts K's block into a fresh buffer, the
// block's tiles run, the done completes that buffer, and only then is the
// sent block released (the peer may read it until the done).
// RING-EMIT: api->collective_start(dev, &coll{{[0-9]+}}, [[K0:b\[[0-9]+\]]], [[K1:b\[[0-9]+\]]])
// RING-EMIT: api->flash_attention(dev, {{b\[[0-9]+\]}}, [[K0]],
// RING-EMIT-NOT: api->release(dev, [[K0]])
// RING-EMIT: api->collective_done(dev, &coll{{[0-9]+}}, [[K1]])
// RING-EMIT: api->release(dev, [[K0]])

// Ulysses: q, k and v move from the sequence to the heads ([4, 1, 64, 8]),
// the output moves back.
// ULYSSES-LABEL: func.func @loss
// ULYSSES-COUNT-3: sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 : (tensor<4x4x16x8xf32>) -> tensor<4x1x64x8xf32>
// ULYSSES: sd.flash_attention {{.*}} : (tensor<4x1x64x8xf32>, tensor<4x1x64x8xf32>, tensor<4x1x64x8xf32>) -> (tensor<4x1x64x8xf32>, tensor<4x1x64xf32>)
// ULYSSES: sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 : (tensor<4x1x64x8xf32>) -> tensor<4x4x16x8xf32>
// ULYSSES-NOT: sd.all_gather

// The bytes each device sends per layer forward, as the formulas say, with
// K, V, q and o of 32,768 bytes each globally (8,192 per device) and P = 4:
// ring 2·(P−1)/P of K and V (49,152); Ulysses 4 all-to-alls of (P−1)/P of
// the local q, k, v, o (24,576); flash all-gathers K and V (49,152). The
// all_reduce is the loss's mean.
// RING-BYTES: "bytes_per_device": 49152,
// RING-BYTES-NEXT: "count": 6,
// RING-BYTES-NEXT: "group_size": 4,
// RING-BYTES-NEXT: "kind": "collective_permute"
// ULYSSES-BYTES: "bytes_per_device": 24576,
// ULYSSES-BYTES-NEXT: "count": 4,
// ULYSSES-BYTES-NEXT: "group_size": 4,
// ULYSSES-BYTES-NEXT: "kind": "all_to_all"
// FLASH-BYTES: "bytes_per_device": 49152,
// FLASH-BYTES-NEXT: "count": 2,
// FLASH-BYTES-NEXT: "group_size": 4,
// FLASH-BYTES-NEXT: "kind": "all_gather"

// attention=auto prices the three partitioned programs' collectives with
// the network model and tiles with the fastest. Without latency the time is
// the bytes over the ICI bandwidth (10 GB/s): Ulysses' all-to-alls on
// context:4 (the bytes above) win. With the default 1 µs per ring step,
// Ulysses' four all-to-alls of 3 steps each cost more than flash's two
// all-gathers, and flash wins its tie with ring by coming first. On
// context:8, where Ulysses does not partition (4 heads), ring's training
// step is the fastest (each price includes the loss's 6-byte all_reduce).
// AUTO4: remark: attention=auto chose ulysses (predicted communication per device and step: flash 4.9 µs for 49158 B, ring 4.9 µs for 49158 B, ulysses 2.5 µs for 24582 B)
// AUTO4-NOT: see current operation
// AUTO4: sd.all_to_all
// AUTO4-LATENCY: remark: attention=auto chose flash (predicted communication per device and step: flash 16.9 µs for 49158 B, ring 16.9 µs for 49158 B, ulysses 20.5 µs for 24582 B)
// AUTO4-LATENCY: sd.all_gather
// AUTO8: remark: attention=auto chose ring (predicted communication per device and step: flash {{[0-9.]+}} µs for {{[0-9]+}} B, ring {{[0-9.]+}} µs for {{[0-9]+}} B, ulysses does not partition)
// AUTO8: collective_permute

// Ulysses needs the heads to split over the sequence's devices.
// HEADS: error: 'sd.flash_attention' op cannot use ulysses attention: 4 heads per device are not divisible by the 8 devices that shard the sequence (mesh axes context); use ring attention or a mesh whose context degree divides the heads

// ulysses_ring with ulysses_shards = 2 on context:4: q, k and v move from
// the sequence to the heads within pairs of devices ([4, 2, 32, 8]), then
// the K/V blocks make one hop to the other pair (members i -> i + 2), and
// the output moves back within the pair.
// HYBRID-LABEL: func.func @loss
// HYBRID-COUNT-3: sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 subgroup_size = 2 : (tensor<4x4x16x8xf32>) -> tensor<4x2x32x8xf32>
// HYBRID: sd.collective_permute_start %{{.*}} @mesh axes = ["context"] pairs = {{\[\[}}0, 2], [1, 3], [2, 0], [3, 1]] : tensor<4x2x32x8xf32>
// HYBRID: sd.flash_attention {{.*}} : (tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>) -> (tensor<4x2x32x8xf32>, tensor<4x2x32xf32>)
// HYBRID: sd.flash_attention {{.*}} : (tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>, tensor<4x2x32x8xf32>) -> (tensor<4x2x32x8xf32>, tensor<4x2x32xf32>)
// HYBRID-NOT: sd.flash_attention
// HYBRID: sd.all_to_all %{{.*}} @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 subgroup_size = 2 : (tensor<4x2x32x8xf32>) -> tensor<4x4x16x8xf32>
// HYBRID-NOT: sd.all_gather

// The hybrid's bytes on context:8 (P = 8, U = 2, R = 4 subgroups on the
// ring), local q, k, v, o of 4,096 bytes: 4 all-to-alls of (U−1)/U
// within the pairs (8,192), and K and V each take R − 1 = 3 hops of their
// post-Ulysses block of 4,096 bytes (24,576).
// HYBRID-BYTES: "bytes_per_device": 8192,
// HYBRID-BYTES-NEXT: "count": 4,
// HYBRID-BYTES-NEXT: "group_size": 2,
// HYBRID-BYTES-NEXT: "kind": "all_to_all"
// HYBRID-BYTES: "bytes_per_device": 24576,
// HYBRID-BYTES-NEXT: "count": 6,
// HYBRID-BYTES-NEXT: "group_size": 8,
// HYBRID-BYTES-NEXT: "kind": "collective_permute"

// auto with ulysses_shards prices the hybrid too.
// AUTO-HYBRID: remark: attention=auto chose ulysses (predicted communication per device and step: flash 4.9 µs for 49158 B, ring 4.9 µs for 49158 B, ulysses 2.5 µs for 24582 B, ulysses_ring 3.3 µs for 32774 B)

// HYBRID-DIVIDE: error: 'sd.flash_attention' op cannot use ulysses_ring attention: ulysses_shards 3 does not divide the 4 devices that shard the sequence (mesh axes context)
// HYBRID-HEADS: error: 'sd.flash_attention' op cannot use ulysses_ring attention: 4 heads per device are not divisible by ulysses_shards 8; use a ulysses_shards that divides the heads, or ring attention
