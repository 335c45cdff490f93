//===- TrainModelFile.h - sdrun's training run of a model file --*- C++ -*-===//

#ifndef SD_DRIVER_TRAINMODELFILE_H
#define SD_DRIVER_TRAINMODELFILE_H

#include "sd/Config/RunSpec.h"
#include "sd/Driver/TrainRun.h"

namespace mlir::sd {

/// Parses `options.modelPath` and runs runTraining on it. Parse errors are
/// printed as MLIR diagnostics and come back as a reportedFailure; other
/// errors as runTraining returns them.
absl::Status trainModelFile(const TrainRunOptions &options,
                            const TrainRunHooks &hooks = {});

/// Parses the model file `path` (sd's dialects registered, diagnostics
/// printed with source excerpts, the nesting depth checked first) and
/// calls `fn` on it. Parse errors come back as a reportedFailure (the
/// diagnostics are the message); a missing file as NotFound.
absl::Status withModelFile(const std::string &path,
                           llvm::function_ref<absl::Status(ModuleOp)> fn);

/// sdrun --mesh=auto: when `values` asks for it, plans the model's
/// training step for --devices in one process, or over mpirun's ranks as
/// hosts, on --profile (`cpu` without it) with sd-plan's search
/// (choosePlan), over the attention strategies and remat policies or only
/// those --attention and --remat name, and sets the meshes, attention and
/// remat policy to the best plan's, saying so on `log`. Bad flags are
/// InvalidArgument; a model that fits no plan is a reportedFailure (the error
/// is printed).
absl::Status planAutoMesh(::sd::RunSpecFlags &values, llvm::raw_ostream &log);

/// Fails when the directory `path` would be written into does not exist
/// or `path` is a directory, naming `flag`, so that a bad output path is
/// reported before a run rather than after it. "" passes.
absl::Status checkOutputPath(const std::string &path, llvm::StringRef flag);

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINMODELFILE_H
