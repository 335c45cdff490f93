//===- sdopt.cpp - the sd optimizer driver --------------------------------===//
//
// mlir-opt for sd: every sd-* pass runs alone (lit tests), and --mesh (with
// --dcn-mesh, --devices, --rules, --batch) runs the default pipeline, which
// prints the program with its mesh and a sharding on every argument.
// --report and --show-sharding print a report or a picture instead. The
// mesh, batch and training-step flags are sdrun's (sd/Driver/ToolFlags.h),
// resolved into a RunSpec the same way.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Diagnostics.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/ToolFlags.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Passes/Passes.h"
#include "sd/Support/Debug.h"
#include "sd/Support/InputLimits.h"
#include "sd/Target/OpenMP/OpenMPEmitter.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

namespace {

/// How far the default pipeline goes.
enum class Stage { Rules, Sharded, Partitioned };

/// What to print instead of the IR.
enum class EmitKind { MLIR, OpenMP };

/// sdopt's own flags: how far the default pipeline goes and what is printed
/// after the passes. Constructed in main, before the command line is parsed.
struct SdoptFlags {
  cl::OptionCategory category{"sdopt options"};
  cl::opt<Stage> stage{
      "stage", cl::desc("Where the default pipeline stops"),
      cl::values(clEnumValN(Stage::Rules, "rules",
                            "arguments sharded by the logical axis rules"),
                 clEnumValN(Stage::Sharded, "sharded",
                            "block functions inlined and every value sharded "
                            "by sd-propagate-sharding (global program)"),
                 clEnumValN(Stage::Partitioned, "partitioned",
                            "the per-device program with collectives "
                            "(sd-partition, sd-optimize-collectives)")),
      cl::init(Stage::Partitioned), cl::cat(category)};
  cl::opt<bool> train{
      "train",
      cl::desc("Build the training step (forward, backward, AdamW) from "
               "@loss before sharding it"),
      cl::init(false), cl::cat(category)};
  cl::opt<std::string> explain{
      "explain",
      cl::desc("Explain, as remarks, where the sharding of the named value "
               "(parameter name, input kind or sd.name) comes from; implies "
               "--stage=sharded"),
      cl::value_desc("name"), cl::cat(category)};
  // --report and --show-sharding print what they say instead of the IR.
  cl::opt<mlir::sd::ReportFormat> report{
      "report",
      cl::ValueOptional,
      cl::desc("After the passes, print the per-device report of @loss "
               "(memory, FLOPs, collectives) instead of the IR"),
      cl::values(clEnumValN(mlir::sd::ReportFormat::Text, "text",
                            "a table with human units (the default)"),
                 clEnumValN(mlir::sd::ReportFormat::Json, "json",
                            "JSON with exact numbers"),
                 clEnumValN(mlir::sd::ReportFormat::Text, "", "")),
      cl::init(mlir::sd::ReportFormat::Text),
      cl::cat(category)};
  cl::opt<std::string> showSharding{
      "show-sharding",
      cl::desc("After the passes, draw which device holds which block of the "
               "named value (parameter name, input kind or sd.name) instead "
               "of printing the IR"),
      cl::value_desc("name"), cl::cat(category)};
  cl::opt<EmitKind> emit{
      "emit", cl::desc("What to print after the passes"),
      cl::values(clEnumValN(EmitKind::MLIR, "mlir", "the IR (the default)"),
                 clEnumValN(EmitKind::OpenMP, "openmp",
                            "the C++/OpenMP program (files in split-file "
                            "form) of the training step (--train) or the "
                            "model function, after inlining and "
                            "sd-lower-to-openmp")),
      cl::init(EmitKind::MLIR), cl::cat(category)};

  /// Whether the default pipeline runs: a flag that sets the mesh, the
  /// batch or the stage was given.
  bool usePipeline(const ::sd::RunSpecFlags &values) const {
    return !values.mesh.value_or("").empty() || values.batch ||
           values.perDeviceBatch || !explain.empty() ||
           stage.getNumOccurrences() > 0 || train;
  }

  /// Whether a pass prints instead of the IR.
  bool printInstead() const {
    return report.getNumOccurrences() > 0 || !showSharding.empty() ||
           emit == EmitKind::OpenMP;
  }
};

/// The default pipeline's options from the resolved flags; an error for
/// flags that do not go together.
FailureOr<mlir::sd::PipelineOptions>
defaultPipelineOptions(const SdoptFlags &flags,
                       const ::sd::RunSpecFlags &values) {
  bool shard = !values.mesh.value_or("").empty();
  if (!shard && (!flags.explain.empty() || flags.stage.getNumOccurrences())) {
    llvm::errs() << "error: --stage and --explain need --mesh\n";
    return failure();
  }
  absl::StatusOr<::sd::RunSpec> spec =
      ::sd::resolveRunSpec(values, ::sd::HostInfo::current());
  if (!spec.ok()) {
    llvm::errs() << "error: " << std::string(spec.status().message()) << "\n";
    return failure();
  }
  mlir::sd::PipelineOptions options = mlir::sd::pipelineOptions(*spec);
  options.train = flags.train;
  // Without a mesh there is nothing to shard: the pipeline only fixes the
  // batch, whatever the stage.
  bool explain = !flags.explain.empty();
  options.propagate = (shard && flags.stage != Stage::Rules) || explain;
  options.partition = shard && flags.stage == Stage::Partitioned && !explain;
  options.recordProvenance = explain;
  options.explain = flags.explain;
  return options;
}

/// Adds the passes that print (the report, the sharding picture, the
/// OpenMP code) to `os` after those `config` sets up.
void printAfterPasses(MlirOptMainConfig &config, const SdoptFlags &flags,
                      llvm::raw_ostream &os) {
  MlirOptMainConfig passes = config;
  config.setPassPipelineSetupFn([passes, &flags, &os](PassManager &pm) {
    if (failed(passes.setupPassPipeline(pm)))
      return failure();
    if (flags.report.getNumOccurrences() > 0) {
      mlir::sd::PrintReportOptions report;
      report.format = flags.report;
      pm.addPass(mlir::sd::createPrintReport(os, report));
    }
    if (!flags.showSharding.empty()) {
      mlir::sd::ShowShardingOptions show;
      show.value = flags.showSharding;
      pm.addPass(mlir::sd::createShowSharding(os, show));
    }
    if (flags.emit == EmitKind::OpenMP) {
      // The lowering needs one call-free function.
      pm.addPass(createInlinerPass());
      pm.addNestedPass<func::FuncOp>(mlir::sd::createLowerToOpenMP());
      pm.addPass(
          mlir::sd::createEmitOpenMP(os, flags.train ? "train_step" : ""));
    }
    return success();
  });
}

} // namespace

/// The dialects, interfaces and passes sdopt knows.
static void registerAll(DialectRegistry &registry) {
  registry.insert<mlir::sd::SDDialect, func::FuncDialect>();
  // Lets --inline inline calls of block functions.
  func::registerInlinerExtension(registry);
  // The compiler's external models (VJPs, partitioning, costs) and the
  // OpenMP target's plan attributes and lowering models.
  mlir::sd::registerAllSDExtensions(registry);
  mlir::sd::registerOpenMPLoweringInterfaces(registry);
  mlir::sd::registerSDPipelines();
  mlir::sd::registerSDOpenMPPasses();
  ::sd::registerDebugOptions();
  registerTransformsPasses();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registerAll(registry);

  mlir::sd::ToolFlags specFlags(mlir::sd::Tool::Sdopt);
  SdoptFlags flags;
  std::string helpHeader = registerCLIOptions(
      "sd optimizer driver\n\nThe sd-* passes, mlir-opt's options and LLVM's "
      "are accepted and listed by --help-hidden.\n",
      registry);
  // --help lists sd's options only, as sdgen's and sdrun's do; the others
  // stay accepted and listed by --help-hidden (cl::HideUnrelatedOptions
  // would hide them from it too).
  SmallVector<const cl::OptionCategory *> categories(specFlags.categories());
  categories.push_back(&flags.category);
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    // --help and --version are LLVM's "Generic Options".
    if (llvm::none_of(option->Categories,
                      [&](cl::OptionCategory *category) {
                        return llvm::is_contained(categories, category) ||
                               category->getName() == "Generic Options";
                      }) &&
        option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
  auto [inputFilename, outputFilename] =
      parseCLIOptions(argc, argv, helpHeader);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // The parser verifies the input and the pass manager the IR after each
  // pass, so the printer need not verify the whole program once more (a
  // twentieth of a large training step's time).
  if (config.shouldVerifyOnParsing() && config.shouldVerifyPasses())
    if (cl::Option *assumeVerified =
            cl::getRegisteredOptions().lookup("mlir-print-assume-verified");
        assumeVerified && !assumeVerified->getNumOccurrences())
      (void)assumeVerified->addOccurrence(0, assumeVerified->ArgStr, "true");

  ::sd::RunSpecFlags values = specFlags.values();
  if (flags.usePipeline(values)) {
    FailureOr<mlir::sd::PipelineOptions> options =
        defaultPipelineOptions(flags, values);
    if (failed(options))
      return 1;
    // The default pipeline runs first, then any passes named on the command
    // line (e.g. `--mesh=... --inline`).
    MlirOptMainConfig explicitPasses = config;
    config.setPassPipelineSetupFn(
        [options = *options, explicitPasses](PassManager &pm) {
          mlir::sd::buildDefaultPipeline(pm, options);
          return explicitPasses.setupPassPipeline(pm);
        });
  }

  std::string errorMessage;
  auto input = openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << "error: " << errorMessage << "\n";
    return 1;
  }
  // MLIR's parser recurses per nesting level: refuse what would overflow
  // its stack.
  if (absl::Status nesting = ::sd::checkNestingDepth(
          std::string_view(input->getBuffer()), inputFilename);
      !nesting.ok()) {
    llvm::errs() << "error: " << std::string(nesting.message()) << "\n";
    return 1;
  }
  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << "error: " << errorMessage << "\n";
    return 1;
  }
  // The printing passes run last and write to the output file; the IR goes
  // nowhere.
  bool printInstead = flags.printInstead();
  if (printInstead)
    printAfterPasses(config, flags, output->os());
  // The passes' diagnostics, with readable source excerpts (the handler
  // reads the input file again for them); not under -verify-diagnostics,
  // whose handler must see them, nor -split-input-file, whose lines are a
  // chunk's.
  // MlirOptMain's context dies before main returns, and the handler must
  // not unregister itself from it then: it is never destroyed (one per
  // run, reachable from here).
  // It is installed when MlirOptMain's context loads the func dialect (as
  // the parser meets the first `func.func`), so that the parser's errors
  // are trimmed too.
  static llvm::SourceMgr diagnosticSources;
  if (!config.shouldVerifyDiagnostics() && config.inputSplitMarker().empty())
    registry.addExtension(+[](MLIRContext *context, func::FuncDialect *) {
      static mlir::sd::ReadableDiagnosticHandler *readable = nullptr;
      if (!readable)
        readable = new mlir::sd::ReadableDiagnosticHandler(diagnosticSources,
                                                           context);
    });
  if (failed(MlirOptMain(printInstead ? llvm::nulls() : output->os(),
                         std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
