//===- OpenMPEmitter.h - The per-device program as C++/OpenMP ---*- C++ -*-===//
//
// `sd-lower-to-openmp` plans how each op of a per-device function runs
// (which ops fuse into one loop nest, which become runtime library calls)
// and records the plan as `sd.kernel` / `sd.kernel_kind` attributes;
// `emitOpenMPProgram` then writes the function as one self-contained C++
// translation unit against the runtime's ABI (sd/Runtime/ProgramABI.h).
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_OPENMPEMITTER_H
#define SD_PASSES_OPENMPEMITTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::sd {

/// How the OpenMP lowering treats an op.
enum class OpenMPOpClass {
  /// Elementwise arithmetic, compare, select, convert: fusible.
  Elementwise,
  /// Ops that read their operand at a mapped index (broadcast_in_dim,
  /// reshape, slice, pad, concat, upsample_nearest): fusible.
  IndexMap,
  /// Splat constants and iota: recomputed wherever read.
  Cheap,
  /// Non-splat constants: static arrays in the program.
  DenseConstant,
  /// reduce_sum/max/mean, mse_loss: fuse their producers into their input.
  Reduction,
  /// dot_general, transpose, norms, softmax, attention, conv2d, rng: calls
  /// into the runtime's kernels.
  Library,
  /// Collectives and axis_index.
  Collective,
  /// sd.offload / sd.reload.
  Memory,
  /// func.return.
  Return,
  /// Anything else: not lowerable.
  Unsupported,
};

OpenMPOpClass classifyForOpenMP(Operation *op);

/// Attribute names of the plan (declared with the dialect).
constexpr llvm::StringLiteral kKernelAttrName = "sd.kernel";
constexpr llvm::StringLiteral kKernelKindAttrName = "sd.kernel_kind";
/// The `sd.kernel` of ops recomputed in every kernel that reads them.
constexpr llvm::StringLiteral kInlineKernel = "inline";

/// Writes `func`, planned by sd-lower-to-openmp, as one C++ translation unit
/// defining `sd_program_run` and `sd_program_abi_version`. Errors (a missing
/// plan, an op the emitter cannot write) are reported on the op.
LogicalResult emitOpenMPProgram(func::FuncOp func, llvm::raw_ostream &os);

/// Runs sd-lower-to-openmp on `module` (which it annotates) and emits the
/// function named `funcName`; diagnostics go to the context's handler.
FailureOr<std::string> lowerToOpenMP(ModuleOp module, StringRef funcName);

/// A module pass that emits function `funcName` (empty: `train_step`, else
/// `loss`, else the first function) of an already planned module to `os`;
/// sdopt's --emit=openmp.
std::unique_ptr<Pass> createEmitOpenMP(llvm::raw_ostream &os,
                                       std::string funcName = "");

} // namespace mlir::sd

#endif // SD_PASSES_OPENMPEMITTER_H
