// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"block_q": 32, "block_kv": 64}' | FileCheck %s --check-prefix=FLASH
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=dot_product | FileCheck %s --check-prefix=DOT --implicit-check-not=sd.flash_attention
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"block_q": 32}' --train | FileCheck %s --check-prefix=TRAIN
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"block_q": 16}' --train --report=json | FileCheck %s --check-prefix=RECOMPUTE
// RUN: sdopt %S/Inputs/attention_model.mlir --train --report=json | FileCheck %s --check-prefix=UNTILED
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"use_fused_bwd_kernel": true}' --train --emit=openmp | FileCheck %s --check-prefix=FUSED
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"use_fused_bwd_kernel": true}' --train --report=json | FileCheck %s --check-prefix=FUSED-FLOPS
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=ulysses_ring 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=ring --ulysses-shards=2 2>&1 | FileCheck %s --check-prefix=SHARDS-KIND
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=ulysses_ring --ulysses-shards=0 2>&1 | FileCheck %s --check-prefix=SHARDS-ZERO
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=tokamax_ring 2>&1 | FileCheck %s --check-prefix=UNAVAILABLE
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=flashy 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"block_q": -3}' 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-block-sizes='{"blok_q": 3}' 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-min-seq-length=33 | FileCheck %s --check-prefix=MINSEQ-ABOVE --implicit-check-not=sd.flash_attention
// RUN: sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-min-seq-length=32 | FileCheck %s --check-prefix=MINSEQ-AT
// RUN: not sdopt %S/Inputs/attention_model.mlir --attention=flash --flash-min-seq-length=-3 2>&1 | FileCheck %s --check-prefix=MINSEQ-NEGATIVE

// --flash-min-seq-length (flash_min_seq_length): the model's 32-token
// attention stays untiled under a threshold of 33 and is tiled at 32.
// MINSEQ-ABOVE: sd.attention {{.*}} {sd.name = "attn_output"}
// MINSEQ-AT: sd.flash_attention
// MINSEQ-NEGATIVE: error: --flash-min-seq-length must not be negative, not -3

// --attention=flash tiles attention with the given block sizes (the others
// 512, backward sizes following forward ones); dot_product keeps it.
// FLASH-LABEL: func.func @loss
// FLASH: sd.flash_attention {{.*}} scale = 2.500000e-01 blocks = <block_q = 32, block_kv = 64, block_q_dkv = 32, block_kv_dkv = 64, block_q_dq = 32, block_kv_dq = 64> {sd.name = "attn_output"}
// DOT-LABEL: func.func @loss
// DOT: sd.attention

// The training step's backward is the tiled backward, from the saved
// output and log-sum-exp.
// TRAIN: %[[O:.*]], %[[LSE:.*]] = sd.flash_attention
// TRAIN: sd.flash_attention_dkv {{.*}}, %[[O]], %[[LSE]], %{{.*}} scale = 2.500000e-01 blocks = <block_q = 32, block_q_dkv = 32, block_q_dq = 32>
// TRAIN: sd.flash_attention_dq {{.*}}, %[[O]], %[[LSE]], %{{.*}} scale = 2.500000e-01 blocks = <block_q = 32, block_q_dkv = 32, block_q_dq = 32>

// The report prices the tiled backward's recomputation: scores and
// probabilities (2·D + 2 = 34 FLOPs per score) for 2·4·32·32 scores, in
// the dQ and the dK/dV op (given sizes: the separate dQ pass); the untiled
// step recomputes nothing by itself.
// RECOMPUTE: "recompute_flops": 557056,
// UNTILED: "recompute_flops": 0,

// With use_fused_bwd_kernel the dK/dV op's runtime call also computes dQ
// (its buffer is the fourth-from-last pointer); the dQ op emits nothing.
// Its recomputation is then the dK/dV op's alone: 8192 scores × 34.
// FUSED: api->flash_attention_backward(dev, {{[^,]*}}, {{[^,]*}}, {{[^,]*}}, nullptr, 1, 1, {{[^,]*}}, {{[^,]*}}, {{[^,]*}}, b[{{[0-9]+}}], b[{{[0-9]+}}], b[{{[0-9]+}}], 2, 4, 32, 32, 16, 16,
// FUSED-NEXT: api->trace_end(dev);
// FUSED: // computed with the fused dK/dV pass
// FUSED-NOT: api->flash_attention_backward(
// FUSED-FLOPS: "recompute_flops": 278528,

// HYBRID: error: --attention: attention ulysses_ring needs ulysses_shards (--ulysses-shards), the devices per Ulysses group
// SHARDS-KIND: error: --ulysses-shards: ulysses_shards 2 is for attention ulysses_ring (or auto), not ring
// SHARDS-ZERO: error: --ulysses-shards must be at least 1, not 0
// UNAVAILABLE: error: --attention: attention 'tokamax_ring' is not available in sd; sd runs dot_product, flash, ring, ulysses, ulysses_ring and auto
// UNKNOWN: error: --attention: attention 'flashy' is unknown; sd runs dot_product, flash, ring, ulysses, ulysses_ring and auto
// NEGATIVE: error: --flash-block-sizes: block_q: '-3' must be positive
// FIELD: error: --flash-block-sizes: unknown field "blok_q"; expected one of block_q, block_kv_compute, block_kv, block_q_dkv, block_kv_dkv, block_kv_dkv_compute, block_q_dq, block_kv_dq, use_fused_bwd_kernel
