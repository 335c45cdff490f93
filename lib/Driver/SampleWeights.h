//===- SampleWeights.h - sdsample's weights, inside lib/Driver
//-------------===//
//
// The helpers SampleWeights.cpp shares with the sampling run (SampleRun.cpp):
// what selectModelWeights does in steps, for a run that also needs the
// parameters (a LoRA file merged into them).
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_DRIVER_SAMPLEWEIGHTS_H
#define SD_LIB_DRIVER_SAMPLEWEIGHTS_H

#include "sd/Driver/Sample.h"

#include "mlir/IR/BuiltinOps.h"

#include "absl/status/statusor.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sd::detail {

/// The parameters of the module's @denoise: names and shapes, in order.
FailureOr<std::vector<ParameterShape>> denoiseParameters(ModuleOp module);

/// The tensors of `source` that the model computes instead of loading
/// (DiT's pos_embed) must be the model's tables.
absl::Status checkComputedTensorsOf(ModuleOp module,
                                    const WeightSource &source);

/// The weights of `params` from `source`: its EMA copies where `ema` asks
/// for them or, unset, where the source has them (`usedEma` says which);
/// each present, floating, of the model's shape and finite.
absl::StatusOr<std::map<std::string, std::vector<float>>>
selectWeightsOf(const WeightSource &source,
                const std::vector<ParameterShape> &params,
                std::optional<bool> ema, bool &usedEma);

} // namespace mlir::sd::detail

#endif // SD_LIB_DRIVER_SAMPLEWEIGHTS_H
