// Communication of the DiT-S/2 training step (batch 8) against the ZeRO
// bounds (REFERENCE.md §3), Ψ = 131,460,224 bytes of parameters.
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --train --mesh=data:8 --batch=8 --report=json | FileCheck %s --check-prefix=DATA

// Data parallel: the gradients' all_reduce, 2Ψ(N−1)/N = 230,055,392 bytes,
// plus the scalar loss (14 bytes); nothing else. One all_reduce per
// parameter (131) and the loss.
// DATA:      "collectives": [
// DATA-NEXT:   {
// DATA-NEXT:     "axes": [
// DATA-NEXT:       "data"
// DATA-NEXT:     ],
// DATA-NEXT:     "bytes_per_device": 230055406,
// DATA-NEXT:     "count": 132,
// DATA-NEXT:     "group_size": 8,
// DATA-NEXT:     "kind": "all_reduce",
// DATA-NEXT:     "tensor_bytes": 131460228
// DATA-NEXT:   }
// DATA-NEXT: ],

// fsdp:8: ZeRO-3 — parameters gathered for the forward pass and again for
// the backward pass (the backward pass makes its own reshards), weight
// gradients reduce-scattered. Every sharded parameter is gathered at most
// twice, and the step sends at most 3Ψs(N−1)/N (Ψs = 131,215,872 B of
// sharded parameters: 344,441,664 B). It sends less, 225,656,998 B,
// because it is not pure ZeRO-3 where a weight only meets per-sample
// vectors: the class table, the timestep MLP's second layer and the 13
// adaLN modulations (45,775,872 B) are never gathered — their [8, ·]
// inputs move instead, and their gradients are computed where the shards
// are — and the biases and x_embedder's weight (its input, the latents,
// needs no gradient) are gathered only for the forward pass. Replicated parameters (39 tensors, 244 kB) are
// all-reduced (with the loss, 40 all_reduces), and updated where they are
// replicated.
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --train --mesh=fsdp:8 --batch=8 --report=json | FileCheck %s --check-prefix=FSDP
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --train --mesh=fsdp:8 --batch=8 --report=json | %python -c "import json, sys; r = json.load(sys.stdin); g = r['parameter_gathers']; n = g['group_size']; total = sum(c['bytes_per_device'] for c in r['collectives']); sys.exit(any(e['gathers'] > 2 for e in g['exceptions']) or total > 3 * g['sharded_bytes'] * (n - 1) // n)"
// FSDP: "bytes_per_device": 150004792,
// FSDP-NEXT: "count": 143,
// FSDP-NEXT: "group_size": 8,
// FSDP-NEXT: "kind": "all_gather",
// FSDP: "bytes_per_device": 427630,
// FSDP-NEXT: "count": 40,
// FSDP-NEXT: "group_size": 8,
// FSDP-NEXT: "kind": "all_reduce",
// FSDP: "bytes_per_device": 2240,
// FSDP-NEXT: "count": 2,
// FSDP-NEXT: "group_size": 8,
// FSDP-NEXT: "kind": "all_to_all",
// FSDP: "bytes_per_device": 75222336,
// FSDP-NEXT: "count": 89,
// FSDP-NEXT: "group_size": 8,
// FSDP-NEXT: "kind": "reduce_scatter",
// FSDP: "gathered_more_than_once": 49,
// FSDP-NEXT: "gathered_once": 27,
// FSDP-NEXT: "group_size": 8,
// FSDP-NEXT: "never_gathered": 16,
