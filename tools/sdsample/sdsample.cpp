//===- sdsample.cpp - Samples images from a trained sd model --------------===//
//
//   sdsample MODEL.mlir --weights=ema.safetensors --grid=grid.png
//   sdsample MODEL.mlir --checkpoint-dir=DIR --mesh=data:2 --sampler=ddpm
//            --num-inference-steps=100 --guidance-scale=2 --samples-per-class=8
//            --output=samples.safetensors
//
// Parses the flags (the mesh, batch, attention and device ones are sdrun's,
// from sd/Driver/ToolFlags.h; the sampling ones its own), resolves them with
// a --config file as sdrun does (its ici_*/dcn_* keys,
// per_device_batch_size, logical_axis_rules and attention keys, and its
// sampling keys) and runs the sampler (sd/Driver/Sample.h). See
// docs/sampling.md.
//
// Under mpirun each rank runs the devices of one process of the mesh, as
// sdrun's do; only rank 0 prints and writes.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunSpec.h"
#include "sd/Driver/MpiDevices.h"
#include "sd/Driver/RankAgreement.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/Sample.h"
#include "sd/Driver/ToolFlags.h"
#include "sd/Driver/ToolMain.h"
#include "sd/Driver/TrainRun.h"
#include "sd/Runtime/MpiTransport.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
/// The sampling flags (the others: ToolFlags); they live as long as main's
/// frame.
struct SampleFlags {
  cl::OptionCategory sampleCat{"sdsample options"};

  cl::opt<std::string> weights{
      "weights",
      cl::desc("The parameters, by name, from a safetensors file (sdrun "
               "--export or --export-ema)"),
      cl::value_desc("file.safetensors"), cl::cat(sampleCat)};
  cl::opt<std::string> checkpointDir{
      "checkpoint-dir",
      cl::desc("The parameters from the latest complete checkpoint here"),
      cl::value_desc("dir"), cl::cat(sampleCat)};
  cl::opt<bool> ema{"ema",
                    cl::desc("Use the EMA weights (\"ema NAME\" tensors); the "
                             "default when there are any"),
                    cl::cat(sampleCat)};
  cl::opt<bool> noEma{"no-ema", cl::desc("Use the raw parameters"),
                      cl::cat(sampleCat)};
  cl::opt<std::string> sampler{
      "sampler",
      cl::desc("ddpm, ddim (default for epsilon and v_prediction) or euler "
               "(flow)"),
      cl::cat(sampleCat)};
  cl::opt<std::string> predictionType{
      "prediction-type",
      cl::desc("epsilon, v_prediction or flow, when the model does not "
               "record it (default epsilon)"),
      cl::cat(sampleCat)};
  cl::opt<int64_t> steps{
      "num-inference-steps",
      cl::desc("Sampler steps (num_inference_steps; default 50)"),
      cl::cat(sampleCat)};
  cl::opt<double> guidanceScale{
      "guidance-scale",
      cl::desc("Classifier-free guidance scale (guidance_scale; default 1: "
               "none)"),
      cl::cat(sampleCat)};
  cl::opt<uint64_t> seed{"seed", cl::desc("Seed of the noise (default 0)"),
                         cl::init(0), cl::cat(sampleCat)};
  cl::opt<int64_t> samplesPerClass{
      "samples-per-class",
      cl::desc("Samples of each class: the grid's columns (default 1)"),
      cl::init(1), cl::cat(sampleCat)};
  cl::list<int64_t> classes{
      "classes", cl::CommaSeparated,
      cl::desc("The classes to sample, a grid row each (default: all)"),
      cl::cat(sampleCat)};
  cl::opt<bool> clipX0{
      "clip-x0",
      cl::desc("Clip each x0 estimate to [-1, 1] (ddpm, ddim; default on, "
               "--clip-x0=false turns it off)"),
      cl::cat(sampleCat)};
  cl::opt<std::string> grid{"grid",
                            cl::desc("Write the samples as a PNG grid, a row "
                                     "per class"),
                            cl::value_desc("file.png"), cl::cat(sampleCat)};
  cl::opt<int64_t> gridScale{
      "grid-scale",
      cl::desc("Pixels per sample pixel in the grid (default: cells of at "
               "least 32 pixels)"),
      cl::init(0), cl::cat(sampleCat)};
  cl::opt<std::string> output{
      "output",
      cl::desc("Write the samples [n, H, W, C] and labels [n] as "
               "safetensors"),
      cl::value_desc("file.safetensors"), cl::cat(sampleCat)};
};

/// The run's options: the mesh, batch, rules and devices from `spec`, the
/// sampling from `flags` over the config's sampling keys.
absl::StatusOr<mlir::sd::SampleOptions>
sampleOptions(const sd::RunSpec &spec, const SampleFlags &flags) {
  auto given = [](const auto &option) {
    return option.getNumOccurrences() > 0;
  };
  mlir::sd::SampleOptions options;
  options.modelPath = spec.run.modelPath;
  options.pipeline = mlir::sd::pipelineOptions(spec);
  options.device = mlir::sd::deviceSettings(spec);

  // The config's sampling keys, under the flags.
  mlir::sd::SamplingConfig file;
  if (!spec.configFile.empty()) {
    absl::StatusOr<mlir::sd::SamplingConfig> read =
        mlir::sd::readSamplingConfig(spec.configFile);
    if (!read.ok())
      return read.status();
    file = *read;
  }
  options.steps = given(flags.steps) ? flags.steps : file.steps.value_or(50);
  options.guidanceScale = given(flags.guidanceScale)
                              ? flags.guidanceScale
                              : file.guidanceScale.value_or(1.0);
  options.prediction = file.prediction;
  if (given(flags.predictionType)) {
    options.prediction =
        mlir::sd::sampling::parsePrediction(flags.predictionType);
    if (!options.prediction)
      return absl::InvalidArgumentError(
          "unknown --prediction-type '" + flags.predictionType +
          "'; expected epsilon, v_prediction or flow");
  }
  if (given(flags.sampler)) {
    options.sampler = mlir::sd::sampling::parseSampler(flags.sampler);
    if (!options.sampler)
      return absl::InvalidArgumentError("unknown --sampler '" + flags.sampler +
                                        "'; expected ddpm, ddim or euler");
  }
  if (flags.ema && flags.noEma)
    return absl::InvalidArgumentError("give --ema or --no-ema, not both");
  if (flags.ema || flags.noEma)
    options.ema = flags.ema.getValue();
  if (given(flags.clipX0))
    options.clipX0 = flags.clipX0.getValue();
  options.weightsPath = flags.weights;
  options.checkpointDir = flags.checkpointDir;
  options.seed = flags.seed;
  options.samplesPerClass = flags.samplesPerClass;
  options.classes.assign(flags.classes.begin(), flags.classes.end());
  options.gridPath = flags.grid;
  options.gridZoom = flags.gridScale;
  options.outputPath = flags.output;
  return options;
}

/// The run's options for the command line, as one rank of `process.mpi`
/// if set (which it advances past the ranks' handshake).
absl::StatusOr<mlir::sd::SampleOptions>
sampleOptions(const mlir::sd::ToolFlags &toolFlags, const SampleFlags &flags,
              mlir::sd::ToolProcess &process) {
  sd::RunSpecFlags values = toolFlags.values();
  mlir::sd::setMpiProcesses(values, process.mpi);
  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(values, sd::HostInfo::current());
  if (spec.ok())
    for (const std::string &warning : spec->warnings)
      llvm::errs() << "sdsample: warning: " << warning << "\n";
  absl::StatusOr<mlir::sd::SampleOptions> options =
      spec.ok() ? sampleOptions(*spec, flags)
                : absl::StatusOr<mlir::sd::SampleOptions>(spec.status());
  // A bad flag is an error on each rank given it; the others learn of it
  // in the start-up handshake.
  if (!process.mpi || !options.ok())
    return options;
  // Before the process group, whose creation waits for every rank.
  process.stage = mlir::sd::MpiStage::Handshaken;
  if (absl::Status agreed = mlir::sd::agreeAcrossRanks(
          mlir::sd::samplingStartupCheck(*spec, *options));
      !agreed.ok())
    return agreed;
  process.stage = mlir::sd::MpiStage::Running;
  if (absl::Status joined =
          mlir::sd::joinMpiDevices(options->device, *process.mpi, spec->run);
      !joined.ok())
    return joined;
  return options;
}

absl::Status runSdsample(int argc, char **argv,
                         mlir::sd::ToolProcess &process) {
  mlir::sd::ToolFlags toolFlags(mlir::sd::Tool::Sdsample);
  SampleFlags flags;
  std::vector<const cl::OptionCategory *> categories(
      toolFlags.categories().begin(), toolFlags.categories().end());
  categories.push_back(&flags.sampleCat);
  cl::HideUnrelatedOptions(categories);
  cl::ParseCommandLineOptions(
      argc, argv, "sdsample: sample images from a trained sd model\n");

  absl::StatusOr<mlir::sd::SampleOptions> options =
      sampleOptions(toolFlags, flags, process);
  if (!options.ok())
    return options.status();
  absl::Status status = mlir::sd::sampleModelFile(*options);
  // The group's communicator is freed before MPI is finalized.
  options->device.processGroup.reset();
  return status;
}
} // namespace

int main(int argc, char **argv) {
  return mlir::sd::runMpiToolMain("sdsample", argc, argv,
                                  [&](mlir::sd::ToolProcess &process) {
                                    return runSdsample(argc, argv, process);
                                  });
}
