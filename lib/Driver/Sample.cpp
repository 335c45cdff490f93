//===- Sample.cpp - sdsample's options from its run spec ------------------===//
//
// The sampling settings of a resolved run spec (flags over the config's
// keys, read and checked by the config reader like every other key) and
// sdsample's own flags, as SampleOptions. The samplers are sd/Sampling;
// the model's @denoise on a mesh and sdsample's run are DenoiseProgram.cpp
// and SampleRun.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "absl/strings/str_format.h"

using namespace mlir;
using namespace mlir::sd;

absl::Status mlir::sd::setSamplingOptions(const ::sd::RunSpec &spec,
                                          const ::sd::RunSpecFlags &flags,
                                          SampleOptions &options) {
  options.steps = spec.sampling.steps.value;
  const ::sd::SamplingSettings &sampling = spec.sampling;
  options.guidanceScale = sampling.guidanceScale.value;
  options.guidanceScaleGiven =
      sampling.guidanceScale.source != ::sd::SettingSource::Default;
  if (sampling.flowShift.source != ::sd::SettingSource::Default) {
    options.flowShift = sampling.flowShift.value;
    options.shiftOrigin = "flow_shift " +
                          absl::StrFormat("%g", sampling.flowShift.value) +
                          " (" + sampling.flowShift.origin + ")";
  }
  if (sampling.timeShift.source != ::sd::SettingSource::Default) {
    options.timeShift = sampling.timeShift.value;
    if (sampling.timeShift.value && options.shiftOrigin.empty())
      options.shiftOrigin = "time_shift (" + sampling.timeShift.origin + ")";
  }
  options.baseShift = sampling.baseShift.value;
  options.maxShift = sampling.maxShift.value;
  options.trueCfgScale = flags.trueCfgScale.value_or(1.0);
  options.textStatesPath = flags.textStates.value_or("");
  options.loraPath = flags.loraWeights.value_or("");
  options.loraScale = flags.loraScale.value_or(1.0);
  if (spec.data.predictionType) {
    const std::string &name = spec.data.predictionType->value;
    options.prediction = sampling::parsePrediction(name);
    // The config reader refuses a key with another value; the flag is
    // checked here.
    if (!options.prediction)
      return absl::InvalidArgumentError(
          "unknown --prediction-type '" + name +
          "'; expected epsilon, v_prediction or flow");
  }
  if (flags.sampler) {
    options.sampler = sampling::parseSampler(*flags.sampler);
    if (!options.sampler)
      return absl::InvalidArgumentError("unknown --sampler '" + *flags.sampler +
                                        "'; expected ddpm, ddim or euler");
  }
  bool ema = flags.ema.value_or(false), noEma = flags.noEma.value_or(false);
  if (ema && noEma)
    return absl::InvalidArgumentError("give --ema or --no-ema, not both");
  if (ema || noEma)
    options.ema = ema;
  options.clipX0 = flags.clipX0;
  options.weightsPath = flags.weights.value_or("");
  options.checkpointDir = flags.checkpointDir.value_or("");
  // The config's released weights, unless a flag names others.
  if (options.weightsPath.empty() && options.checkpointDir.empty()) {
    options.pretrained = spec.run.pretrained.value;
    options.pretrainedOrigin = spec.run.pretrained.origin;
  }
  // sdsample's seed is its own flag's: the config's seed is the training
  // run's.
  options.seed = flags.seed.value_or(0);
  options.samplesPerClass = flags.samplesPerClass.value_or(1);
  options.classes = flags.classes.value_or(std::vector<int64_t>());
  options.gridPath = flags.grid.value_or("");
  options.gridZoom = flags.gridScale.value_or(0);
  options.outputPath = flags.output.value_or("");
  options.predictPath = flags.predict.value_or("");
  return absl::OkStatus();
}
