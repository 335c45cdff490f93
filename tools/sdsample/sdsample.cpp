//===- sdsample.cpp - Samples images from a trained sd model --------------===//
//
//   sdsample MODEL.mlir --weights=ema.safetensors --grid=grid.png
//   sdsample MODEL.mlir --checkpoint-dir=DIR --mesh=data:2 --sampler=ddpm
//            --num-inference-steps=100 --guidance-scale=2 --samples-per-class=8
//            --output=samples.safetensors
//
// Parses the flags (sd/Driver/ToolFlags.h: the mesh, batch, attention and
// device ones as sdrun's, and the sampling ones), resolves them with a
// --config file as sdrun does (its ici_*/dcn_* keys, per_device_batch_size,
// logical_axis_rules and attention keys, and its sampling keys) and runs the
// sampler (sd/Driver/Sample.h). See docs/sampling.md.
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
/// The run's options: the mesh, batch, rules and devices from `spec`, the
/// sampling from `spec` and the flags.
absl::StatusOr<mlir::sd::SampleOptions>
sampleOptions(const sd::RunSpec &spec, const sd::RunSpecFlags &flags) {
  mlir::sd::SampleOptions options;
  options.modelPath = spec.run.modelPath;
  options.pipeline = mlir::sd::pipelineOptions(spec);
  // A config that trains LoRA adapters (enable_lora) samples the base
  // model's @denoise: --lora merges the adapters into its weights.
  options.pipeline.lora.reset();
  options.device = mlir::sd::deviceSettings(spec);
  if (absl::Status s = mlir::sd::setSamplingOptions(spec, flags, options);
      !s.ok())
    return s;
  return options;
}

/// The run's options for the command line, as one rank of `process.mpi`
/// if set (which it advances past the ranks' handshake).
absl::StatusOr<mlir::sd::SampleOptions>
sampleOptions(const mlir::sd::ToolFlags &toolFlags,
              mlir::sd::ToolProcess &process) {
  sd::RunSpecFlags values = toolFlags.values();
  mlir::sd::setMpiProcesses(values, process.mpi);
  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(values, sd::HostInfo::current());
  if (spec.ok())
    for (const std::string &warning : spec->warnings)
      llvm::errs() << "sdsample: warning: " << warning << "\n";
  absl::StatusOr<mlir::sd::SampleOptions> options =
      spec.ok() ? sampleOptions(*spec, values)
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
  cl::HideUnrelatedOptions(toolFlags.categories());
  cl::ParseCommandLineOptions(
      argc, argv, "sdsample: sample images from a trained sd model\n");

  absl::StatusOr<mlir::sd::SampleOptions> options =
      sampleOptions(toolFlags, process);
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
