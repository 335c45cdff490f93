//===- Calibrate.h - sdrun --calibrate: this machine as a profile -*- C++
//-*-===//
//
// Measures the machine sdrun runs on as the step-time model sees it
// (sd/Sharding/Hardware.h): each device's matrix-product rates by size
// class and dtype through sd's own GEMM kernels, its memory bandwidth, and
// the shared-memory transport between the devices of one process; every
// device measures at once, on its own thread team, as in a training step.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_CALIBRATE_H
#define SD_DRIVER_CALIBRATE_H

#include "sd/Config/RunSpec.h"
#include "sd/Sharding/Hardware.h"

#include "absl/status/statusor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace mlir::sd {

struct CalibrationOptions {
  /// Devices of this process (>= 1), each with `threadsPerDevice` OpenMP
  /// threads (0: the CPUs shared out, as sdrun does).
  int64_t devices = 1;
  int threadsPerDevice = 0;
  /// Each measurement repeats for about this long and keeps its best run.
  double secondsPerMeasurement = 0.3;
};

/// The profile of this machine's devices (named `name`), each measurement
/// logged to `log` as it is made. The DCN figures, which one process cannot
/// measure, are the built-in `cpu` profile's.
absl::StatusOr<::sd::HardwareProfile>
calibrateMachine(const CalibrationOptions &options, llvm::StringRef name,
                 llvm::raw_ostream &log);

/// sdrun --calibrate=`path`: calibrateMachine for `values`' --devices
/// (default: the CPUs over --threads-per-device, or one device a CPU) into
/// the profile file `path`, with what it measured on `log`. InvalidArgument
/// under mpirun (one process measures its own devices) or for a path that
/// cannot be written.
absl::Status calibrateToFile(const ::sd::RunSpecFlags &values,
                             const std::string &path, bool underMpi,
                             llvm::raw_ostream &log);

} // namespace mlir::sd

#endif // SD_DRIVER_CALIBRATE_H
