//===- TrainModelFile.h - sdrun's training run of a model file --*- C++ -*-===//

#ifndef SD_DRIVER_TRAINMODELFILE_H
#define SD_DRIVER_TRAINMODELFILE_H

#include "sd/Driver/TrainRun.h"

namespace mlir::sd {

/// Parses `options.modelPath` and runs runTraining on it. Parse errors are
/// printed as MLIR diagnostics and come back as a reportedFailure; other
/// errors as runTraining returns them.
absl::Status trainModelFile(const TrainRunOptions &options,
                            const TrainRunHooks &hooks = {});

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINMODELFILE_H
