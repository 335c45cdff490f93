//===- sdsample.cpp - Samples images from a trained sd model --------------===//
//
//   sdsample MODEL.mlir --weights=ema.safetensors --grid=grid.png
//   sdsample MODEL.mlir --checkpoint-dir=DIR --mesh=data:2 --sampler=ddpm
//            --num-inference-steps=100 --guidance-scale=2 --samples-per-class=8
//            --output=samples.safetensors
//
// Parses the flags, resolves the mesh, batch and rules as sdrun does (a
// --config file's ici_*/dcn_* keys, per_device_batch_size and
// logical_axis_rules, and its sampling keys) and runs the sampler
// (sd/Driver/Sample.h). See docs/sampling.md.
//
// Under mpirun each rank runs the devices of one process of the mesh, as
// sdrun's do; only rank 0 prints and writes.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunSpec.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/Sample.h"
#include "sd/Driver/TrainRun.h"
#include "sd/Runtime/MpiTransport.h"

#include "absl/strings/str_format.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace cl = llvm::cl;
using mlir::sd::sampling::Prediction;
using mlir::sd::sampling::Sampler;

namespace {
int fail(const absl::Status &status) {
  // One write, so that the lines of an MPI job's ranks do not interleave.
  llvm::errs() << "sdsample: error: " + std::string(status.message()) + "\n";
  return 1;
}

/// The flags; they live as long as main's frame.
struct Flags {
  cl::OptionCategory meshCat{"sdsample mesh options"};
  cl::OptionCategory sampleCat{"sdsample options"};

  cl::opt<std::string> model{cl::Positional, cl::Required,
                             cl::desc("<model.mlir>")};
  cl::opt<std::string> config{
      "config",
      cl::desc("A MaxDiffusion-style YAML config: the mesh (ici_*/dcn_*), "
               "per_device_batch_size and logical_axis_rules as sdrun reads "
               "them, and num_inference_steps, guidance_scale, "
               "prediction_type"),
      cl::value_desc("file.yml"), cl::cat(sampleCat)};

  cl::opt<std::string> mesh{
      "mesh", cl::desc("Device mesh (ICI), e.g. data:2 (default: one device)"),
      cl::cat(meshCat)};
  cl::opt<std::string> dcnMesh{
      "dcn-mesh",
      cl::desc("Mesh part across processes (one MPI rank per process)"),
      cl::cat(meshCat)};
  cl::opt<int64_t> devices{"devices",
                           cl::desc("Device count (fills a -1 mesh axis)"),
                           cl::cat(meshCat)};
  cl::opt<std::string> rules{
      "rules",
      cl::desc("Logical axis rules: dit (default), sdxl, flux, wan, or a "
               "YAML file"),
      cl::cat(meshCat)};
  cl::opt<int64_t> batch{
      "batch",
      cl::desc("Rows of one call of the device program (default: the "
               "model's; guidance uses two a sample)"),
      cl::cat(meshCat)};
  cl::opt<double> perDeviceBatch{
      "per-device-batch", cl::desc("Batch per device (batch = this × devices)"),
      cl::cat(meshCat)};
  cl::opt<std::string> attention{
      "attention",
      cl::desc("Attention kernel as for sdrun: dot_product (default), flash, "
               "ring, ulysses, ulysses_ring, auto"),
      cl::cat(meshCat)};
  cl::opt<int64_t> threadsPerDevice{
      "threads-per-device",
      cl::desc("OpenMP threads per device (default: cores / devices)"),
      cl::cat(meshCat)};
  cl::opt<std::string> deviceMemory{
      "device-memory", cl::desc("Device memory budget per device, e.g. 512MiB"),
      cl::cat(meshCat)};
  cl::opt<std::string> cacheDir{"cache-dir",
                                cl::desc("Where compiled programs are cached"),
                                cl::cat(meshCat)};

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

/// The run's options from the flags: the mesh, batch and rules through the
/// run spec (as sdrun resolves them), the rest as given.
absl::StatusOr<mlir::sd::SampleOptions>
sampleOptions(const Flags &flags, const std::optional<sd::rt::MpiJob> &mpi) {
  sd::RunSpecFlags values;
  auto given = [](const auto &option) {
    return option.getNumOccurrences() > 0;
  };
  if (given(flags.config))
    values.config = flags.config;
  if (given(flags.mesh))
    values.mesh = flags.mesh;
  if (given(flags.dcnMesh))
    values.dcnMesh = flags.dcnMesh;
  if (given(flags.devices))
    values.devices = flags.devices;
  if (given(flags.rules))
    values.rules = flags.rules;
  if (given(flags.batch))
    values.batch = flags.batch;
  if (given(flags.perDeviceBatch))
    values.perDeviceBatch = flags.perDeviceBatch;
  if (given(flags.attention))
    values.attention = flags.attention;
  if (given(flags.threadsPerDevice))
    values.threadsPerDevice = flags.threadsPerDevice;
  if (given(flags.deviceMemory))
    values.deviceMemory = flags.deviceMemory;
  if (given(flags.cacheDir))
    values.cacheDir = flags.cacheDir;
  values.modelPath = flags.model;
  if (mpi) {
    values.processes = mpi->size;
    values.processesFromMpi = true;
  }
  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(values, sd::HostInfo::current());
  if (!spec.ok())
    return spec.status();
  if (mpi && spec->mesh.mesh.numProcesses() != mpi->size)
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh %s has %d process%s but mpirun started %d (give the DCN part "
        "with --dcn-mesh)",
        spec->mesh.mesh.toString(), spec->mesh.mesh.numProcesses(),
        spec->mesh.mesh.numProcesses() == 1 ? "" : "es", mpi->size));

  mlir::sd::SampleOptions options;
  options.modelPath = flags.model;
  options.pipeline = mlir::sd::pipelineOptions(*spec);
  options.device.threadsPerDevice = spec->run.threadsPerDevice;
  options.device.deviceMemoryBudget = spec->run.deviceMemoryBudget;
  options.device.cacheDir = spec->run.cacheDir;

  // The config's sampling keys, under the flags.
  mlir::sd::SamplingConfig file;
  if (given(flags.config)) {
    absl::StatusOr<mlir::sd::SamplingConfig> read =
        mlir::sd::readSamplingConfig(flags.config);
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
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  absl::StatusOr<std::optional<sd::rt::MpiJob>> mpi =
      sd::rt::joinMpiJob(argc, argv);
  if (!mpi.ok())
    return fail(mpi.status());
  if (*mpi && (*mpi)->rank != 0) {
    // Ranks other than 0 print nothing but errors (stderr).
    llvm::outs().flush();
    sd::rt::discardStdout();
  }
  Flags flags;
  cl::HideUnrelatedOptions({&flags.sampleCat, &flags.meshCat});
  cl::ParseCommandLineOptions(
      argc, argv, "sdsample: sample images from a trained sd model\n");

  absl::StatusOr<mlir::sd::SampleOptions> options = sampleOptions(flags, *mpi);
  if (options.ok() && *mpi) {
    options->device.process = (*mpi)->rank;
    options->device.transportFactory = [](const sd::MeshSpec &mesh) {
      return sd::rt::createMpiTransport(mesh, {});
    };
    absl::StatusOr<std::unique_ptr<sd::rt::ProcessGroup>> group =
        sd::rt::createMpiProcessGroup({});
    if (!group.ok())
      return fail(group.status());
    options->device.processGroup = std::move(*group);
  }
  if (!options.ok()) {
    if (*mpi)
      sd::rt::finalizeMpi();
    return fail(options.status());
  }
  absl::Status status = mlir::sd::sampleModelFile(*options);
  // The group's communicator is freed before MPI is finalized; a failed
  // rank leaves MPI unfinalized, so that mpirun ends the others.
  options->device.processGroup.reset();
  if (*mpi && status.ok())
    sd::rt::finalizeMpi();
  if (!status.ok() && !mlir::sd::isReportedFailure(status))
    return fail(status);
  return status.ok() ? 0 : 1;
}
