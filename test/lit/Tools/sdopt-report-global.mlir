// A global program (not partitioned) is costed per device from its
// shardings: arguments from the logical axis rules, op results once
// sd-propagate-sharding ran (--stage=sharded). Values and ops without a
// sharding count whole, and the report says how many.
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --stage=rules --report | FileCheck %s --check-prefix=RULES
// RUN: sdopt %S/Inputs/small_model.mlir --mesh=data:2,fsdp:2,tensor:2 --stage=sharded --report | FileCheck %s --check-prefix=SHARDED
// RUN: sdopt %S/Inputs/small_model.mlir --batch=8 --report | FileCheck %s --check-prefix=NOMESH

// Arguments (from the dit rules):
//   proj.weight 16x32 [{"fsdp"}, {"tensor"}] → 8x16 f32 = 512 B;
//   latents 8x16 [{"data", "fsdp"}, {}] → 2x16 = 128 B;
//   noise 8x32 [{"data", "fsdp"}, {"tensor"}] → 2x16 = 128 B.
// Without propagation the ops count whole: dot 2·8·32·16 = 8192 FLOPs,
// mse_loss 3·256 = 768; peak at the loss, 8x32 f32 (1024 B) + 4 B.
// RULES-LABEL: sd report: @loss, mesh @mesh data:2,fsdp:2,tensor:2 (8 devices)
// RULES-NEXT:  program: global (not partitioned); per-device numbers follow the shardings
// RULES:       2 of 2 values and 2 ops with FLOPs have none and count whole
// RULES:       parameters 512 B 1 tensor, 128 elements
// RULES-NEXT:  inputs 256 B 2 tensors
// RULES-NEXT:  activations (peak) 1.0 kB at sd.mse_loss
// RULES:       FLOPs 9.0 kFLOP
// RULES:       collectives per device: none yet (sd-partition turns 0 sd.reshard ops and any partial sums into collectives)

// Propagated: the weight is resharded to [{}, {"tensor"}] (16x16 = 1024 B),
// the dot's result is [{"data", "fsdp"}, {"tensor"}] (2x16 = 128 B): peak
// 1152 B at the dot. FLOPs: the dot's 8192 over 2·2·2 devices = 1024; the
// loss is a partial sum over all 8 (unreduced axes), 768 / 8 = 96; 1120.
// SHARDED-LABEL: sd report: @loss
// SHARDED:       every value has one
// SHARDED:       parameters 512 B 1 tensor, 128 elements
// SHARDED:       activations (peak) 1.2 kB at sd.dot_general "ffn_activation"
// SHARDED:       FLOPs 1.1 kFLOP
// SHARDED:       none yet (sd-partition turns 2 sd.reshard ops and any partial sums into collectives)

// Without a mesh one device runs everything: 16x32 + 8x16 + 8x32 f32.
// NOMESH-LABEL: sd report: @loss, no mesh (1 device)
// NOMESH-NEXT:  program: not sharded; every device runs the whole program
// NOMESH:       parameters 2.0 kB 1 tensor, 512 elements
// NOMESH-NEXT:  inputs 1.5 kB 2 tensors
// NOMESH:       collectives per device: none{{$}}
