//===- Passes.td - passes of the OpenMP target -------------*- tablegen -*-===//

#ifndef SD_TARGET_OPENMP_PASSES_TD
#define SD_TARGET_OPENMP_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToOpenMP : Pass<"sd-lower-to-openmp", "::mlir::func::FuncOp"> {
  let summary = "Plan how each op of a per-device program runs as OpenMP code";
  let description = [{
    Decides, for a call-free function with static f32 shapes (the
    per-device training step after `sd-partition`, or a model function), how
    every op executes in the C++ program that `emitOpenMPProgram`
    (sd/Target/OpenMP/OpenMPEmitter.h) writes, and records the plan on each
    op as a typed `sd_omp.plan` attribute:

    * `#sd_omp.kernel<N, KIND>` on the root of kernel N (the op whose result
      it writes; kernels are numbered in program order): `fused` (a loop
      nest of elementwise and index ops), `reduce` (a reduction with its
      producers fused into its input), `alias` (a reshape of a materialized
      value: no code), `library` (a BLAS GEMM or a runtime kernel),
      `collective`, `constant` (a non-splat constant: a static array) or
      `memory` (offload, reload).
    * `#sd_omp.in_kernel<N>` on an op computed inside kernel N.
    * `#sd_omp.kernel_output<N>` on an op computed inside kernel N, which
      also stores it into a buffer of its own for later kernels
      (multi-output fusion).
    * `#sd_omp.inline` on a cheap op (splat constant, iota, or an index op
      such as a broadcast of a materialized value) recomputed inside each
      kernel that reads it instead of being materialized.

    First each `sd.adamw` is decomposed into the elementwise ops it stands
    for (`AdamWOp::decompose`), which then fuse like any others.
    What each op is comes from its `OpenMPLoweringOpInterface` (attached by
    `registerOpenMPLoweringInterfaces`); an op without it is an error.
    Fusion: fusible ops (elementwise, index maps, cheap ops) fuse into their
    consumers' kernel when every user is fused code of that one kernel;
    reductions fuse their producers the same way. An index map read by
    several kernels is recomputed in each. An elementwise value read by
    several kernels, or also by a library call, a collective or the return,
    is materialized once: by the first of its users' fused kernels that
    loops over its shape, as an extra output of that kernel, when every
    other reader runs after it (XLA's multi-output fusion: the input of a
    GELU is computed and stored by the GELU's kernel, Adam's new moments
    by the parameter update's); otherwise by a kernel of its own.
    A kernel holds at most `max-fused-ops` ops: past that, the next producer
    starts a kernel of its own (a chain of 20,000 adds becomes 79 kernels of
    at most 256 ops, which the system compiler builds in linear time, not one
    expression 20,000 deep that takes it minutes).

    ```mlir
    %e = sd.exp %x : tensor<8x16xf32>
    %y = sd.mul %e, %x : tensor<8x16xf32>
    %s = sd.reduce_sum %y dims = [1] : (tensor<8x16xf32>) -> tensor<8xf32>
    // becomes
    %e = sd.exp %x {sd_omp.plan = #sd_omp.in_kernel<0>} : tensor<8x16xf32>
    %y = sd.mul %e, %x {sd_omp.plan = #sd_omp.in_kernel<0>} : tensor<8x16xf32>
    %s = sd.reduce_sum %y dims = [1] {sd_omp.plan = #sd_omp.kernel<0, reduce>} : ...
    ```

    An op that cannot be lowered is an error naming its value: a bf16
    tensor (the OpenMP lowering supports f32 tensors only), a `func.call`
    (inline first), a dynamic shape, or an op without an OpenMP lowering.
  }];
  let options = [
    Option<"fusion", "fusion", "bool", "true",
           "Fuse elementwise and index ops into their consumers (false: "
           "every op is its own kernel)">,
    Option<"maxFusedOps", "max-fused-ops", "int64_t", "256",
           "The most ops one fused kernel computes (at least 1); a producer "
           "past it is materialized by a kernel of its own">,
  ];
  let statistics = [
    Statistic<"numKernels", "num-kernels", "Number of kernels planned">,
    Statistic<"numFused", "num-fused", "Number of ops fused into a consumer">,
    Statistic<"numOutputs", "num-outputs",
              "Number of ops stored as an extra output of a later kernel">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect",
                           "::mlir::sd::openmp::SDOMPDialect"];
}

def EmitOpenMP : Pass<"sd-emit-openmp", "::mlir::ModuleOp"> {
  let summary = "Write a planned function as C++/OpenMP files";
  let description = [{
    A printing pass: it leaves the IR unchanged and writes the function
    `func-name` (empty: `@train_step`, else `@loss`, else the first function
    with a body), planned by `sd-lower-to-openmp`, as the C++ files `sdrun`
    compiles (in LLVM's split-file form: each starts at a `//--- NAME`
    line), to stdout or to the stream `sdopt --emit=openmp` gives it (then
    instead of the IR). They define `sd_program_abi_version` and
    `sd_program_run` against `sd/Runtime/ProgramABI.h`; each distinct fused
    kernel is one function (kernels with the same body share it), every
    other op a call that the op writes itself
    (`OpenMPLoweringOpInterface::emitCall`) in a function of steps.

    ```mlir
    %y = sd.dot_general %x, %w batch = [] x [] contract = [2] x [1]
        {sd_omp.plan = #sd_omp.kernel<0, library>} : ...
    // becomes
    //   api->gemm(dev, 1, 0, 1, 128, 24, 32, a[0], 32, 4096, a[1], 32, 768,
    //             0.0f, b[0], 24, 3072);
    ```

    A function without a plan, or with an op whose call fails (a mesh axis
    the mesh lacks, a collective of rank over 8), is an error on the op.
  }];
  let options = [
    Option<"funcName", "func-name", "std::string", "\"\"",
           "The function to emit (empty: train_step, else loss, else the "
           "first function)">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect",
                           "::mlir::sd::openmp::SDOMPDialect"];
}

#endif // SD_TARGET_OPENMP_PASSES_TD
