//===- TrainModelFile.cpp - sdrun's training run of a model file ----------===//

#include "sd/Driver/TrainModelFile.h"
#include "sd/Driver/Diagnostics.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Passes/Passes.h"
#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sd;

absl::Status
mlir::sd::withModelFile(const std::string &path,
                        llvm::function_ref<absl::Status(ModuleOp)> fn) {
  DialectRegistry registry;
  registry.insert<SDDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  registerAllSDExtensions(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // An error names its value and points at its line; the whole operation
  // printed after it (a model's function is thousands of lines) would bury
  // it. sdopt, the compiler's own tool, keeps MLIR's default.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  ReadableDiagnosticHandler diagnostics(sourceMgr, &context);
  bool sawError = false;
  ScopedDiagnosticHandler noteErrors(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      sawError = true;
    return failure();
  });
  // A regular file of bounded size (or "-", standard input), NUL-terminated
  // for MLIR's lexer.
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      ::sd::readRegularFileOrStdin(path, "model file",
                                   ::sd::kMaxProgramFileBytes,
                                   /*nullTerminated=*/true);
  if (!file.ok())
    return file.status();
  // MLIR's parser recurses per nesting level: refuse what would overflow
  // its stack.
  if (absl::Status nesting = ::sd::checkNestingDepth(
          std::string_view((*file)->getBuffer()), path);
      !nesting.ok())
    return nesting;
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  if (!module) {
    // The parser's diagnostics are the message; without one, say what failed.
    if (sawError)
      return reportedFailure("could not parse '" + path + "'");
    return absl::InvalidArgumentError("could not parse '" + path + "'");
  }
  return fn(*module);
}

absl::Status mlir::sd::trainModelFile(const TrainRunOptions &options,
                                      const TrainRunHooks &hooks) {
  return withModelFile(options.modelPath, [&](ModuleOp module) {
    return runTraining(module, options, hooks);
  });
}

absl::Status mlir::sd::planAutoMesh(::sd::RunSpecFlags &values,
                                    llvm::raw_ostream &log) {
  if (values.mesh.value_or("") != "auto")
    return absl::OkStatus();
  if (!values.devices)
    return absl::InvalidArgumentError(
        "--mesh=auto needs --devices, the devices to plan for");
  if (values.dcnMesh)
    return absl::InvalidArgumentError(
        "--mesh=auto chooses the DCN mesh too: leave out --dcn-mesh");
  // Under mpirun the ranks are the hosts; every rank plans alike (the
  // search is deterministic) and the start-up handshake checks that they
  // agree.
  int64_t hosts = 1;
  if (values.processes) {
    if (!values.processesFromMpi)
      return absl::InvalidArgumentError(
          "--mesh=auto plans the devices of one process, or of mpirun's "
          "ranks: leave out --processes");
    hosts = *values.processes;
  }
  absl::StatusOr<std::optional<::sd::HardwareProfile>> profile =
      ::sd::resolveProfile(values);
  if (!profile.ok())
    return profile.status();
  ::sd::HardwareProfile hardware =
      *profile ? **profile : *::sd::builtinProfile("cpu");
  absl::StatusOr<PlanningBase> planning = planningBase(values);
  if (!planning.ok())
    return planning.status();
  const PipelineOptions &base = planning->pipeline;
  PlanOptions plan = planning->plan;
  plan.devices = *values.devices;
  plan.hosts = hosts;
  plan.profile = hardware;
  std::optional<PlanChoice> choice;
  absl::Status status =
      withModelFile(values.modelPath, [&](ModuleOp module) -> absl::Status {
        FailureOr<PlanChoice> best = choosePlan(module, base, plan);
        if (failed(best))
          return reportedFailure("--mesh=auto found no plan");
        choice = *best;
        return absl::OkStatus();
      });
  if (!status.ok())
    return status;
  values.mesh = choice->mesh;
  if (!choice->dcnMesh.empty())
    values.dcnMesh = choice->dcnMesh;
  values.remat = std::string(::sd::rematPolicyName(choice->remat));
  values.attention = std::string(::sd::attentionKindName(choice->attention));
  values.rules = choice->rules;
  if (choice->accum > 1 && !values.gradAccum) {
    values.gradAccum = choice->accum;
    // The global batch stays the one planned: a per-device batch is a
    // microbatch's. (A --grad-accum the search kept to made it one
    // already.)
    if (values.perDeviceBatch)
      *values.perDeviceBatch /= double(choice->accum);
  }
  log << "sdrun: --mesh=auto chose mesh " << choice->mesh
      << (choice->dcnMesh.empty() ? "" : " | " + choice->dcnMesh) << ", rules "
      << choice->rules << ", attention "
      << ::sd::attentionKindName(choice->attention) << ", remat "
      << ::sd::rematPolicyName(choice->remat) << ", " << choice->accum
      << (choice->accum == 1 ? " microbatch" : " microbatches")
      << ", the best of " << choice->candidates << " plans on " << hardware.name
      << " (predicted " << ::sd::formatSeconds(choice->time.stepSeconds)
      << " a step, " << formatBytes(choice->time.neededBytes)
      << " per device; sdopt --plan prints the table)\n";
  return absl::OkStatus();
}

absl::Status mlir::sd::checkOutputPath(const std::string &path,
                                       llvm::StringRef flag) {
  if (path.empty())
    return absl::OkStatus();
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (llvm::sys::fs::is_directory(path))
    return absl::InvalidArgumentError(
        (flag + "='" + path + "' is a directory").str());
  if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
    return absl::InvalidArgumentError(
        (flag + "='" + path + "': directory '" + parent + "' does not exist")
            .str());
  return absl::OkStatus();
}
