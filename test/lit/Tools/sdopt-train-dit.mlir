// Communication of the DiT-S/2 training step (batch 8) against the ZeRO
// bounds (REFERENCE.md §3), Ψ = 131,460,224 bytes of parameters.
// RUN: sdopt %S/../../../models/dit_s2.mlir --train --mesh=data:8 --batch=8 --report=json | FileCheck %s --check-prefix=DATA

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
