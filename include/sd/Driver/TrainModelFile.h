//===- TrainModelFile.h - sdrun's training run of a model file --*- C++ -*-===//

#ifndef SD_DRIVER_TRAINMODELFILE_H
#define SD_DRIVER_TRAINMODELFILE_H

#include "sd/Driver/TrainRun.h"

namespace mlir::sd {

/// Parses `options.modelPath` and runs runTraining on it. Errors are printed
/// (as MLIR diagnostics, or `sdrun: error: ...`); returns the process exit
/// code.
int trainModelFile(const TrainRunOptions &options);

} // namespace mlir::sd

#endif // SD_DRIVER_TRAINMODELFILE_H
