// sdopt --train: the training step of a one-projection model, sharded.
// RUN: sdopt %S/Inputs/small_model.mlir --train --mesh=data:2 --report | FileCheck %s --check-prefix=DATA
// RUN: sdopt %S/Inputs/small_model.mlir --train --mesh=fsdp:2 --batch=64 --report | FileCheck %s --check-prefix=FSDP
// RUN: sdopt %S/Inputs/small_model.mlir --train --mesh=data:2 --batch=8 --grad-accum=2 | FileCheck %s --check-prefix=ACCUM
// RUN: sdopt %S/Inputs/small_model.mlir --train --mesh=data:2 --batch=8 --grad-accum=2 --report | FileCheck %s --check-prefix=ACCUM-REPORT
// RUN: sdopt %S/Inputs/small_model.mlir --train --grad-accum=2 2>&1 | FileCheck %s --check-prefix=NOBATCH
// RUN: not sdopt %S/Inputs/small_model.mlir --train --batch=8 --grad-accum=3 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not sdopt %S/Inputs/small_model.mlir --train --remat=SOMETIMES 2>&1 | FileCheck %s --check-prefix=POLICY

// Data parallel: the gradient (16×32 f32 = 2 kB) is all-reduced, 2S(N−1)/N
// = 2048 B per device, plus the 4-byte loss.
// DATA: sd report: @train_step, mesh @mesh data:2 (2 devices)
// DATA: optimizer state           4.1 kB   2 tensors (AdamW moments)
// DATA: activations (peak)        4.1 kB   at sd.all_reduce
// DATA: total                    {{.*}}   parameters + optimizer state + inputs + activation peak
// DATA: all_reduce          data                2       2       2.1 kB

// Fully sharded, batch 64: the weight (2 kB) is gathered for the forward
// pass (its gradient needs no weight, so it is not gathered again), and its
// gradient, a partial sum over the batch, is reduce-scattered rather than
// the larger activations gathered: S(N−1)/N = 1 kB each way per device; the
// moments are sharded like the weight.
// FSDP: parameters                1.0 kB   1 tensor, 256 elements
// FSDP: optimizer state           2.0 kB   2 tensors (AdamW moments)
// FSDP: all_gather          fsdp                2       1       1.0 kB
// FSDP: reduce_scatter      fsdp                2       1       1.0 kB

// Two microbatches of 4 from the batch of 8: [8, 16] → [4, 2, 16] → one
// column → [4, 16], for each of the two inputs, per microbatch.
// ACCUM-LABEL: func.func @train_step
// ACCUM-COUNT-4: sd.slice
// ACCUM-NOT: sd.slice
// ACCUM: return

// The gradient of the first microbatch is held while the second runs: the
// accumulator (the weight's 2 kB f32 gradient) is part of the activation
// peak, shown apart; without microbatches the peak is the 4.1 kB alone
// (the second microbatch's gradient and its sum over the devices).
// ACCUM-REPORT: activations (peak)        6.2 kB   at sd.all_reduce
// ACCUM-REPORT-NEXT: accumulator             2.0 kB   of the peak: the gradients summed over microbatches (activations alone: 4.1 kB)

// Without a batch, a microbatch is the model's default batch (8): the step
// takes two of them.
// NOBATCH-LABEL: func.func @train_step
// NOBATCH-SAME: tensor<16x16xf32> {{.*}}sd.role = #sd.input<latents>
// SPLIT: error: global batch 8 (--batch) does not split into 3 microbatches (--grad-accum)
// POLICY: error: unknown remat policy 'SOMETIMES'; expected one of NONE, FULL, MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM
