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

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::sd::ToolFlags flags(mlir::sd::Tool::Sdrun);
  llvm::cl::HideUnrelatedOptions(flags.categories());
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "sdrun: train an sd model on a device mesh\n");

  absl::StatusOr<sd::RunSpec> spec =
      sd::resolveRunSpec(flags.values(), sd::HostInfo::current());
  if (!spec.ok()) {
    llvm::errs() << "sdrun: error: " << std::string(spec.status().message())
                 << "\n";
    return 1;
  }
  for (const std::string &warning : spec->warnings)
    llvm::errs() << "sdrun: warning: " << warning << "\n";
  if (flags.printConfig()) {
    sd::printRunSpec(*spec, llvm::outs());
    return 0;
  }
  return mlir::sd::trainModelFile(mlir::sd::trainRunOptions(*spec));
}
