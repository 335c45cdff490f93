//===- StepTime.h - A training step's predicted time on a profile -*- C++
//-*-===//
//
// The step-time model: what one device's step takes on the machine a
// hardware profile describes, from the cost model's per-device report.
// Matrix products (dot_general, convolutions, attention) run at the
// profile's rate for the element type they compute in, or at its memory
// bandwidth when their bytes take longer (a roofline per op class); every
// other op is bound by its bytes. Collectives take what the network model
// predicts on the profile's links; those issued asynchronously hide behind
// compute, up to the compute time. Offloads and reloads move their bytes
// over the profile's host link, beside nothing (sd's runtime copies them on
// the device's own threads; an accelerator's DMA would hide part, which the
// model does not credit).
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_STEPTIME_H
#define SD_ANALYSIS_STEPTIME_H

#include "sd/Analysis/CostModel.h"
#include "sd/Sharding/Hardware.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::sd {

struct StepTimePrediction {
  /// The matrix products' time: max(FLOPs at the rates, bytes at the
  /// memory bandwidth).
  double matmulSeconds = 0;
  /// The other ops' time: their bytes at the memory bandwidth.
  double otherSeconds = 0;
  /// Every collective on the profile's links.
  double communicationSeconds = 0;
  /// Of communicationSeconds, each set of mesh axes' collectives (the axes
  /// in mesh order, joined by ","), in the report's order: what the
  /// planner's table shows per axis.
  std::vector<std::pair<std::string, double>> communicationByAxes;
  /// The asynchronous collectives' share that compute hides.
  double hiddenSeconds = 0;
  /// Offloads and reloads over the host link.
  double offloadSeconds = 0;
  /// matmul + other + communication − hidden + offload.
  double stepSeconds = 0;
  /// The device memory the report's total needs, against the profile's.
  int64_t neededBytes = 0;
  /// Of neededBytes, the parameters and their optimizer state: what no
  /// remat policy and no gradient accumulation changes.
  int64_t stateBytes = 0;
  double deviceBytes = 0;

  double computeSeconds() const { return matmulSeconds + otherSeconds; }
  bool fits() const { return double(neededBytes) <= deviceBytes; }
};

/// The step of `report` (a partitioned program's) on `profile`.
StepTimePrediction predictStepTime(const CostReport &report,
                                   const ::sd::HardwareProfile &profile);

} // namespace mlir::sd

#endif // SD_ANALYSIS_STEPTIME_H
