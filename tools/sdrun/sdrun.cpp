//===- sdrun.cpp - Runs training steps of an sd model on a device mesh ----===//
//
//   sdrun MODEL.mlir --mesh=data:2 --batch=8 --steps=20 [--verify]
//   sdrun MODEL.mlir --config=run.yml [key=value ...] [--checkpoint-dir=DIR
//         [--resume]] [--trace=FILE.json]
//
// Parses the flags (sd/Driver/ToolFlags.h), resolves them with a
// MaxDiffusion-style config file into a RunSpec (sd/Config/RunSpec.h) and
// runs the training it describes (sd/Driver/TrainModelFile.h). See the
// README.
//
// Under mpirun (`mpirun -np P sdrun MODEL --mesh=... --dcn-mesh=...`) each
// rank runs the devices of one process of the mesh, whose DCN part must
// have exactly P processes, over the MPI transport; only rank 0 prints
// anything but errors and writes the run's files.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunSpec.h"
#include "sd/Driver/Calibrate.h"
#include "sd/Driver/MpiDevices.h"
#include "sd/Driver/RankAgreement.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/ToolFlags.h"
#include "sd/Driver/ToolMain.h"
#include "sd/Driver/TrainModelFile.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Runtime/MpiTransport.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace {
/// Where rank `rank` writes its trace: FILE.rankR.json beside FILE.json.
std::string rankTracePath(const std::string &path, int rank) {
  llvm::StringRef stem = path;
  stem.consume_back(".json");
  return (stem + ".rank" + llvm::Twine(rank) + ".json").str();
}

/// sdrun --calibrate=`path`, alone or as one rank (a host) of an MPI job:
/// the ranks agree on the calibration, measure their devices at once and
/// the MPI transport between them, and rank 0 writes the profile.
absl::Status calibrate(const sd::RunSpecFlags &values, const std::string &path,
                       mlir::sd::ToolProcess &process) {
  int64_t ranks = process.mpi ? process.mpi->size : 1;
  bool writes = !process.mpi || process.mpi->rank == 0;
  absl::StatusOr<mlir::sd::CalibrationOptions> options =
      mlir::sd::calibrationOptions(values, path, ranks, writes);
  if (!options.ok())
    return options.status();
  if (process.mpi) {
    mlir::sd::StartupCheck check;
    check.digest = mlir::sd::calibrationDigest(*options, path);
    if (values.collectiveTimeout)
      check.timeoutSeconds = *values.collectiveTimeout;
    process.stage = mlir::sd::MpiStage::Handshaken;
    if (absl::Status agreed = mlir::sd::agreeAcrossRanks(check); !agreed.ok())
      return agreed;
    process.stage = mlir::sd::MpiStage::Running;
    if (ranks > 1) {
      absl::StatusOr<sd::rt::MpiConnections> connections =
          mlir::sd::connectRanks(values.collectiveTimeout);
      if (!connections.ok())
        return connections.status();
      options->ranks = mlir::sd::CalibrationRanks{
          process.mpi->rank, ranks, std::move(connections->transportFactory),
          std::move(connections->processGroup)};
    }
  }
  return mlir::sd::calibrateToFile(*options, path, llvm::outs());
}

absl::Status runSdrun(int argc, char **argv, mlir::sd::ToolProcess &process) {
  mlir::sd::ToolFlags flags(mlir::sd::Tool::Sdrun);
  // Crash tests (sdrun-checkpoint-kill.test) stop each checkpoint write at
  // this point until they kill the run.
  llvm::cl::opt<sd::ckpt::WritePoint> testCheckpointStall(
      "test-checkpoint-stall", llvm::cl::Hidden,
      llvm::cl::desc("Testing: stop checkpoint writes here until killed"),
      llvm::cl::values(
          clEnumValN(sd::ckpt::WritePoint::Shard, "shard", ""),
          clEnumValN(sd::ckpt::WritePoint::Manifest, "manifest", "")));
  // Start-up tests (sdrun-mpi-startup.test) make one rank arrive late at
  // the ranks' handshake.
  llvm::cl::opt<double> testStartupDelay(
      "test-startup-delay", llvm::cl::Hidden,
      llvm::cl::desc("Testing: sleep this many seconds before the ranks' "
                     "start-up handshake"),
      llvm::cl::init(0));
  llvm::cl::HideUnrelatedOptions(flags.categories());
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "sdrun: train an sd model on a device mesh\n");

  sd::RunSpecFlags values = flags.values();
  if (std::string path = flags.calibratePath(); !path.empty())
    return calibrate(values, path, process);
  if (!flags.modelGiven())
    return absl::InvalidArgumentError(
        "no model file: sdrun MODEL.mlir [config.yml] [key=value ...] (or "
        "sdrun --calibrate=profile.yml)");
  mlir::sd::setMpiProcesses(values, process.mpi);
  if (absl::Status planned = mlir::sd::planAutoMesh(values, llvm::outs());
      !planned.ok())
    return planned;
  // A bad flag is an error on each rank given it; the others learn of it
  // in the start-up handshake.
  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(values, sd::HostInfo::current());
  if (!spec.ok())
    return spec.status();
  for (const std::string &warning : spec->warnings)
    llvm::errs() << "sdrun: warning: " << warning << "\n";
  if (flags.printConfig()) {
    sd::printRunSpec(*spec, llvm::outs());
    return absl::OkStatus();
  }
  mlir::sd::TrainRunHooks hooks;
  if (testCheckpointStall.getNumOccurrences())
    hooks.checkpointWrite.atPoint = sd::ckpt::stallAt(testCheckpointStall);
  mlir::sd::TrainRunOptions options = mlir::sd::trainRunOptions(*spec);
  options.compileOnly = flags.compileOnly();
  if (process.mpi) {
    // Before the process group, whose creation waits for every rank.
    mlir::sd::StartupCheck check =
        mlir::sd::trainingStartupCheck(*spec, options.compileOnly);
    check.testDelaySeconds = testStartupDelay;
    process.stage = mlir::sd::MpiStage::Handshaken;
    if (absl::Status agreed = mlir::sd::agreeAcrossRanks(check); !agreed.ok())
      return agreed;
    process.stage = mlir::sd::MpiStage::Running;
    if (absl::Status joined =
            mlir::sd::joinMpiDevices(options.device, *process.mpi, spec->run);
        !joined.ok())
      return joined;
    // Rank 0 writes the run's files and its devices' trace; the others
    // their own trace with --trace-all-ranks.
    if (process.mpi->rank != 0) {
      options.metricsPath.clear();
      options.runDir.clear();
      if (values.traceAllRanks.value_or(false) && !options.tracePath.empty())
        options.tracePath = rankTracePath(options.tracePath, process.mpi->rank);
      else
        options.tracePath.clear();
    }
  }
  absl::Status status = mlir::sd::trainModelFile(options, hooks);
  // The group's communicator is freed before MPI is finalized.
  options.device.processGroup.reset();
  return status;
}
} // namespace

int main(int argc, char **argv) {
  return mlir::sd::runMpiToolMain("sdrun", argc, argv,
                                  [&](mlir::sd::ToolProcess &process) {
                                    return runSdrun(argc, argv, process);
                                  });
}
