//===- Calibrate.h - sdrun --calibrate: this machine as a profile -*- C++
//-*-===//
//
// Measures the machine sdrun runs on as the step-time model sees it
// (sd/Sharding/Hardware.h): each device's matrix-product rates by size
// class and dtype through sd's own GEMM kernels, its memory bandwidth, and
// the shared-memory transport between the devices of one process; every
// device measures at once, on its own thread team, as in a training step.
// Under mpirun each rank is a host: the ranks measure their devices at
// once, then the MPI transport between them (DCN), and rank 0 writes the
// profile.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_CALIBRATE_H
#define SD_DRIVER_CALIBRATE_H

#include "sd/Config/RunDigest.h"
#include "sd/Config/RunSpec.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Sharding/Hardware.h"

#include "absl/status/statusor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace mlir::sd {

/// The ranks of an MPI job as the hosts of a calibration: this rank, how
/// many there are, and what connects them (sd/Driver/MpiDevices.h makes
/// them; this library links no MPI).
struct CalibrationRanks {
  int64_t rank = 0;
  int64_t size = 1;
  ::sd::rt::TransportFactory transportFactory;
  std::shared_ptr<::sd::rt::ProcessGroup> processGroup;
};

struct CalibrationOptions {
  /// Devices of this process (>= 1), each with `threadsPerDevice` OpenMP
  /// threads (0: the CPUs shared out, as sdrun does).
  int64_t devices = 1;
  int threadsPerDevice = 0;
  /// Each measurement repeats for about this long and keeps its best run.
  double secondsPerMeasurement = 0.3;
  /// Under mpirun (at least two ranks): each rank one host of `devices`
  /// devices, the DCN measured between them.
  std::optional<CalibrationRanks> ranks;
};

/// The profile of this machine's devices (named `name`), each measurement
/// logged to `log` as it is made. Without `options.ranks` the DCN figures,
/// which one process cannot measure, are the built-in `cpu` profile's.
absl::StatusOr<::sd::HardwareProfile>
calibrateMachine(const CalibrationOptions &options, llvm::StringRef name,
                 llvm::raw_ostream &log);

/// The options of sdrun --calibrate=`path` on one of `processes` ranks
/// (1 without mpirun): `values`' --devices over the ranks (default: the
/// CPUs over --threads-per-device, or one device a CPU, a rank);
/// InvalidArgument for a model file, a path that cannot be written (checked
/// where `writesFile`), a --threads-per-device out of range or --devices
/// that the ranks do not divide.
absl::StatusOr<CalibrationOptions>
calibrationOptions(const ::sd::RunSpecFlags &values, const std::string &path,
                   int64_t processes, bool writesFile);

/// What the ranks of a calibration must agree on before they measure
/// together (sd/Driver/RankAgreement.h): the devices, threads and file.
::sd::RunDigest calibrationDigest(const CalibrationOptions &options,
                                  const std::string &path);

/// sdrun --calibrate=`path`: calibrateMachine into the profile file `path`
/// (rank 0's, under mpirun), with what it measured on `log`.
absl::Status calibrateToFile(const CalibrationOptions &options,
                             const std::string &path, llvm::raw_ostream &log);

} // namespace mlir::sd

#endif // SD_DRIVER_CALIBRATE_H
