// The forward pass of DiT-S/2 (batch 8) sends what its layout needs and no
// more: on fsdp each weight is gathered at most once (ZeRO-3's bound), on
// data only the loss is reduced, on tensor each block all-reduces twice
// (Megatron). Every number is derived below.

// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 --report=json | FileCheck %s --check-prefix=FSDP
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 --report=json | %python -c "import json, sys; [print(e['name'], e['gathers'], e['bytes']) for e in json.load(sys.stdin)['parameter_gathers']['exceptions']]" | FileCheck %s --check-prefix=FSDP-NEVER
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 --report=json | %python -c "import json, sys; g = json.load(sys.stdin)['parameter_gathers']; n = g['group_size']; kept = sum(e['bytes'] for e in g['exceptions'] if e['gathers'] == 0); sys.exit(g['gathered_more_than_once'] != 0 or g['all_gather_bytes'] != (g['sharded_bytes'] - kept) * (n - 1) // n)"
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 | FileCheck %s --check-prefix=FSDP-IR
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 | grep 'sd.all_gather %arg' | count 77
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=fsdp:8 --batch=8 | grep -E 'sd\.(all_|reduce_scatter|collective_permute)' | grep -v 'sd.all_gather %arg' | count 15
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=data:8 --batch=8 --report=json | FileCheck %s --check-prefix=DATA
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=tensor:2 --batch=8 --report=json | FileCheck %s --check-prefix=TENSOR
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=tensor:2 --batch=8 | FileCheck %s --check-prefix=TENSOR-IR
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=tensor:6 --batch=8 --report=json | FileCheck %s --check-prefix=TENSOR6
// RUN: sdopt %sd_src_root/models/dit_s2.mlir --mesh=tensor:4 --batch=8 --report=json | FileCheck %s --check-prefix=TENSOR4

// fsdp:8. 92 of the 131 parameters are sharded (those with an `embed`
// dimension), Ψ = 131,215,872 B; gathering each once would send
// Ψ·7/8 = 114,813,888 B. No parameter is gathered twice (the third RUN
// line checks that, and that the parameter all_gathers send exactly
// (Ψ − the bytes never gathered)·7/8, whichever parameters those are).
// 76 are gathered exactly once. The 16 applied to per-sample vectors
// [8, ·] only are never gathered, since moving the small vector is cheaper
// than gathering the weight: the class table (1001x384, 1,537,536 B), the
// timestep embedder's second layer (384x384 and its bias, 589,824 +
// 1,536 B) and the 13 adaLN modulations (12 of 384x6x384, 3,538,944 B,
// and the final 384x2x384, 1,179,648 B), 45,775,872 B in all. Parameter
// all_gathers: (Ψ − 45,775,872)·7/8 = 74,760,000 B.
// What moves instead: the modulations' partial products [8, 6, 384] ×12
// and [8, 2, 384], reduce-scattered onto the batch split (13
// reduce_scatters of 12·73,728 + 24,576 = 909,312 B, sending 795,648 B),
// and two vectors gathered onto every device: the SiLU of the timestep
// embedding (8x384 f32, 12,288 B) and the one-hot labels (8x1001, 32,032
// B). All all_gathers: 76 + 2 = 78, 74,760,000 + 44,320·7/8 = 74,798,780
// B. The loss is one all_reduce (4 B: 2·7 chunks of 1 B).
// FSDP:      "collectives": [
// FSDP-NEXT:   {
// FSDP-NEXT:     "axes": [
// FSDP-NEXT:       "fsdp"
// FSDP-NEXT:     ],
// FSDP-NEXT:     "bytes_per_device": 74798780,
// FSDP-NEXT:     "count": 78,
// FSDP-NEXT:     "group_size": 8,
// FSDP-NEXT:     "kind": "all_gather",
// FSDP-NEXT:     "tensor_bytes": 85484320
// FSDP-NEXT:   },
// FSDP-NEXT:   {
// FSDP-NEXT:     "axes": [
// FSDP-NEXT:       "fsdp"
// FSDP-NEXT:     ],
// FSDP-NEXT:     "bytes_per_device": 14,
// FSDP-NEXT:     "count": 1,
// FSDP-NEXT:     "group_size": 8,
// FSDP-NEXT:     "kind": "all_reduce",
// FSDP-NEXT:     "tensor_bytes": 4
// FSDP-NEXT:   },
// FSDP-NEXT:   {
// FSDP-NEXT:     "axes": [
// FSDP-NEXT:       "fsdp"
// FSDP-NEXT:     ],
// FSDP-NEXT:     "bytes_per_device": 795648,
// FSDP-NEXT:     "count": 13,
// FSDP-NEXT:     "group_size": 8,
// FSDP-NEXT:     "kind": "reduce_scatter",
// FSDP-NEXT:     "tensor_bytes": 909312
// FSDP-NEXT:   }
// FSDP-NEXT: ],
// FSDP:      "parameter_gathers": {
// FSDP-NEXT:   "all_gather_bytes": 74760000,
// FSDP-NEXT:   "all_gathers": 76,
// FSDP:        "gathered_more_than_once": 0,
// FSDP-NEXT:   "gathered_once": 76,
// FSDP-NEXT:   "group_size": 8,
// FSDP-NEXT:   "never_gathered": 16,
// FSDP-NEXT:   "parameters": 131,
// FSDP-NEXT:   "sharded": 92,
// FSDP-NEXT:   "sharded_bytes": 131215872,
// FSDP-NEXT:   "zero_bound_bytes": 114813888
// FSDP-NEXT: },

// The 16 sharded parameters not gathered exactly once: name, gathers,
// bytes.
// FSDP-NEVER:      t_embedder.mlp.2.weight 0 589824
// FSDP-NEVER-NEXT: t_embedder.mlp.2.bias 0 1536
// FSDP-NEVER-NEXT: y_embedder.embedding_table.weight 0 1537536
// FSDP-NEVER-COUNT-12: adaLN_modulation.1.weight 0 3538944
// FSDP-NEVER-NEXT: final_layer.adaLN_modulation.1.weight 0 1179648

// The collectives that are not gathers of arguments (15 in all), in order.
// FSDP-IR-LABEL: func.func @loss
// FSDP-IR:       sd.all_gather %{{[0-9]+}} @mesh [{"fsdp"}, {}] : (tensor<1x384xf32>) -> tensor<8x384xf32>
// FSDP-IR-COUNT-12: sd.reduce_scatter {{.*}} : (tensor<8x6x384xf32>) -> tensor<1x6x384xf32>
// FSDP-IR:       sd.reduce_scatter {{.*}} : (tensor<8x2x384xf32>) -> tensor<1x2x384xf32>
// FSDP-IR:       sd.all_reduce {{.*}} : tensor<f32>

// data:8: the parameters are replicated; the only collective is the
// all_reduce of the f32 loss.
// DATA:      "collectives": [
// DATA-NEXT:   {
// DATA-NEXT:     "axes": [
// DATA-NEXT:       "data"
// DATA-NEXT:     ],
// DATA-NEXT:     "bytes_per_device": 14,
// DATA-NEXT:     "count": 1,
// DATA-NEXT:     "group_size": 8,
// DATA-NEXT:     "kind": "all_reduce",
// DATA-NEXT:     "tensor_bytes": 4
// DATA-NEXT:   }
// DATA-NEXT: ],
// DATA:      "parameter_gathers": {
// DATA:        "sharded": 0,

// tensor:2 (Megatron): heads and the MLP width split over tensor. Each of
// the 12 blocks all-reduces the attention output projection and the
// second MLP layer, [8, 256, 384] f32 = 3,145,728 B each; the timestep
// embedder's MLP ([256, mlp] then [mlp, 384]) one [8, 384] (12,288 B):
// 25 all_reduces of 24·3,145,728 + 12,288 = 75,509,760 B, each device
// sending 2S(N−1)/N = S. Nothing is gathered, and the loss needs no
// reduction: with no batch split every device computes all of it.
// TENSOR:      "collectives": [
// TENSOR-NEXT:   {
// TENSOR-NEXT:     "axes": [
// TENSOR-NEXT:       "tensor"
// TENSOR-NEXT:     ],
// TENSOR-NEXT:     "bytes_per_device": 75509760,
// TENSOR-NEXT:     "count": 25,
// TENSOR-NEXT:     "group_size": 2,
// TENSOR-NEXT:     "kind": "all_reduce",
// TENSOR-NEXT:     "tensor_bytes": 75509760
// TENSOR-NEXT:   }
// TENSOR-NEXT: ],
// TENSOR:      "parameter_gathers": {
// TENSOR-NEXT:   "all_gather_bytes": 0,
// TENSOR-NEXT:   "all_gathers": 0,
// TENSOR-IR-LABEL: func.func @loss
// TENSOR-IR:       sd.all_reduce %{{.*}} @mesh axes = ["tensor"] : tensor<8x384xf32>
// TENSOR-IR-COUNT-24: sd.all_reduce %{{.*}} @mesh axes = ["tensor"] : tensor<8x256x384xf32>
// TENSOR-IR-NOT:   sd.all_
// TENSOR-IR:       sd.mse_loss

// tensor:6, one head per device: the same 25 all_reduces, each device
// sending 2S(N−1)/N = 5S/3 of 75,509,760 B = 125,849,600 B.
// TENSOR6:      "collectives": [
// TENSOR6-NEXT:   {
// TENSOR6-NEXT:     "axes": [
// TENSOR6-NEXT:       "tensor"
// TENSOR6-NEXT:     ],
// TENSOR6-NEXT:     "bytes_per_device": 125849600,
// TENSOR6-NEXT:     "count": 25,
// TENSOR6-NEXT:     "group_size": 6,
// TENSOR6-NEXT:     "kind": "all_reduce",
// TENSOR6-NEXT:     "tensor_bytes": 75509760
// TENSOR6-NEXT:   }
// TENSOR6-NEXT: ],

// tensor:4 does not divide DiT-S/2's 6 heads: attention runs on heads
// padded to 8, two per device. The projections' [8, 256, 384] outputs split
// evenly (96 features, one and a half heads), which is not a block of
// heads: each block gathers q, k and v and its attention output (48
// all_gathers of activations) and slices q, k and v into padded heads and
// the output back to the projection's row block (48 all_slices). The 25
// all_reduces are those of tensor:2, and no parameter is gathered.
// TENSOR4:      "collectives": [
// TENSOR4:        "count": 48,
// TENSOR4-NEXT:   "group_size": 4,
// TENSOR4-NEXT:   "kind": "all_gather",
// TENSOR4:        "count": 25,
// TENSOR4-NEXT:   "group_size": 4,
// TENSOR4-NEXT:   "kind": "all_reduce",
// TENSOR4:        "count": 48,
// TENSOR4-NEXT:   "group_size": 4,
// TENSOR4-NEXT:   "kind": "all_slice",
// TENSOR4:      "parameter_gathers": {
// TENSOR4-NEXT:   "all_gather_bytes": 0,
// TENSOR4-NEXT:   "all_gathers": 0,
