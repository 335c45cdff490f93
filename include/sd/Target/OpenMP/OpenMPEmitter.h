//===- OpenMPEmitter.h - The per-device program as C++/OpenMP ---*- C++ -*-===//
//
// `sd-lower-to-openmp` (Passes.h) plans how each op of a per-device
// function runs (which ops fuse into one loop nest, which write calls of
// their own) and records the plan as typed `sd_omp.plan` attributes;
// `emitOpenMPProgram` then writes the function as a few self-contained C++
// files against the runtime's ABI (sd/Runtime/ProgramABI.h).
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_OPENMPEMITTER_H
#define SD_TARGET_OPENMP_OPENMPEMITTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::sd {

/// What the emitted program allocates itself, at its peak: every value it
/// stores (fused kernels keep the others in registers), its results and its
/// temporaries, each from its allocation to its release, in the order the
/// program runs. The arguments (held by the runtime) and the runtime's own
/// scratch are not included.
struct ProgramMemory {
  int64_t devicePeakBytes = 0;
  int64_t hostPeakBytes = 0;
  /// A buffer live at the device peak: what it holds, and its bytes.
  struct Buffer {
    std::string name;
    int64_t bytes = 0;
  };
  /// The largest buffers live at the device peak, largest first (at most
  /// kPeakBuffers), so that a run that does not fit can say what to shrink.
  std::vector<Buffer> devicePeakBuffers;
  static constexpr size_t kPeakBuffers = 5;
};

/// Writes `func`, planned by sd-lower-to-openmp, as C++ files in LLVM's
/// split-file form (a header, `program.cpp` defining `sd_program_run` and
/// `sd_program_abi_version`, and `kernels_N.cpp` files) that
/// sd::rt::compileProgram compiles in parallel. Errors (a missing plan, an
/// op the emitter cannot write) are reported on the op.
LogicalResult emitOpenMPProgram(func::FuncOp func, llvm::raw_ostream &os,
                                ProgramMemory *memory = nullptr);

/// Runs sd-lower-to-openmp on `module` (which it annotates) and emits the
/// function named `funcName`; diagnostics go to the context's handler.
/// With `memory`, also what the program allocates at its peak.
FailureOr<std::string> lowerToOpenMP(ModuleOp module, StringRef funcName,
                                     ProgramMemory *memory = nullptr);

/// A module pass that emits function `funcName` (empty: `train_step`, else
/// `loss`, else the first function) of an already planned module to `os`;
/// sdopt's --emit=openmp.
std::unique_ptr<Pass> createEmitOpenMP(llvm::raw_ostream &os,
                                       std::string funcName = "");

} // namespace mlir::sd

#endif // SD_TARGET_OPENMP_OPENMPEMITTER_H
