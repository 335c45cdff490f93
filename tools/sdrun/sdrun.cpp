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
//===----------------------------------------------------------------------===//

#include "sd/Config/RunSpec.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/ToolFlags.h"
#include "sd/Driver/TrainModelFile.h"

#include "sd/Checkpoint/Checkpoint.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace {
int fail(const absl::Status &status) {
  llvm::errs() << "sdrun: error: " << std::string(status.message()) << "\n";
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::sd::ToolFlags flags(mlir::sd::Tool::Sdrun);
  // Crash tests (sdrun-checkpoint-kill.test) stop each checkpoint write at
  // this point until they kill the run.
  llvm::cl::opt<sd::ckpt::WritePoint> testCheckpointStall(
      "test-checkpoint-stall", llvm::cl::Hidden,
      llvm::cl::desc("Testing: stop checkpoint writes here until killed"),
      llvm::cl::values(
          clEnumValN(sd::ckpt::WritePoint::Shard, "shard", ""),
          clEnumValN(sd::ckpt::WritePoint::Manifest, "manifest", "")));
  llvm::cl::HideUnrelatedOptions(flags.categories());
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "sdrun: train an sd model on a device mesh\n");

  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(flags.values(), sd::HostInfo::current());
  if (!spec.ok())
    return fail(spec.status());
  for (const std::string &warning : spec->warnings)
    llvm::errs() << "sdrun: warning: " << warning << "\n";
  if (flags.printConfig()) {
    sd::printRunSpec(*spec, llvm::outs());
    return 0;
  }
  mlir::sd::TrainRunHooks hooks;
  if (testCheckpointStall.getNumOccurrences())
    hooks.checkpointWrite.atPoint = sd::ckpt::stallAt(testCheckpointStall);
  mlir::sd::TrainRunOptions options = mlir::sd::trainRunOptions(*spec);
  options.compileOnly = flags.compileOnly();
  absl::Status status = mlir::sd::trainModelFile(options, hooks);
  // Failures the run has shown (compiler diagnostics, verify: FAILED) get
  // no second message.
  if (!status.ok() && !mlir::sd::isReportedFailure(status))
    return fail(status);
  return status.ok() ? 0 : 1;
}
