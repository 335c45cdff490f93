//===- SdoptMain.cpp - sdopt's command line around MlirOptMain ------------===//
//
// sdopt's own flags (stage, training step, what is printed), the default
// pipeline they and the run-specification flags select, the printing passes
// after it, and the settings of MlirOptMain sdopt changes: --help, the
// printer's verification and the diagnostic handler.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/SdoptMain.h"

#include "sd/Config/ConfigWriter.h"
#include "sd/Config/Settings.h"
#include "sd/Driver/Diagnostics.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Passes/Passes.h"
#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"
#include "sd/Target/OpenMP/OpenMPEmitter.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace mlir::sd;
namespace cl = llvm::cl;

namespace {

/// How far the default pipeline goes.
enum class Stage { Rules, Sharded, Partitioned };

/// What to print instead of the IR.
enum class EmitKind { MLIR, OpenMP };

} // namespace

/// sdopt's own flags: how far the default pipeline goes and what is printed
/// after the passes.
struct SdoptCommandLine::Flags {
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
  cl::opt<ReportFormat> report{
      "report",
      cl::ValueOptional,
      cl::desc("After the passes, print the per-device report of @loss "
               "(memory, FLOPs, collectives) instead of the IR"),
      cl::values(
          clEnumValN(ReportFormat::Text, "text",
                     "a table with human units (the default)"),
          clEnumValN(ReportFormat::Json, "json", "JSON with exact numbers"),
          clEnumValN(ReportFormat::Text, "", "")),
      cl::init(ReportFormat::Text),
      cl::cat(category)};
  cl::opt<std::string> showSharding{
      "show-sharding",
      cl::desc("After the passes, draw which device holds which block of the "
               "named value (parameter name, input kind or sd.name) instead "
               "of printing the IR"),
      cl::value_desc("name"), cl::cat(category)};
  cl::opt<bool> plan{
      "plan",
      cl::desc("Search the meshes of --devices (over --hosts), the attention "
               "strategies and the remat policies for the training step, "
               "price each on --profile with the step-time model, and print "
               "the best plans instead of the IR (docs/planner.md)"),
      cl::init(false), cl::cat(category)};
  cl::opt<std::string> planOutput{
      "plan-output",
      cl::desc("With --plan: write the best plan to this file as a "
               "MaxDiffusion-style run config (sdrun --config)"),
      cl::value_desc("plan.yml"), cl::cat(category)};
  cl::opt<bool> planWholeProgram{
      "plan-whole-program",
      cl::desc("With --plan: price each candidate's whole program instead of "
               "its repeated blocks once (slower; the reference for the "
               "extrapolation)"),
      cl::init(false), cl::cat(category)};
  cl::opt<unsigned> planTop{
      "plan-top",
      cl::desc("With --plan: rows of the table (default 5; 0: every plan "
               "that fits, and no plan left unpriced for being slower than "
               "the last row)"),
      cl::init(5), cl::cat(category)};
  cl::opt<int64_t> hosts{
      "hosts", cl::desc("With --plan: hosts the devices are spread over"),
      cl::init(1), cl::cat(category)};
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
  /// batch, the attention kernel or the stage was given.
  bool usePipeline(const ::sd::RunSpecFlags &values) const {
    return !values.mesh.value_or("").empty() || values.batch ||
           values.perDeviceBatch || values.attention ||
           values.flashBlockSizes || values.flashMinSeqLength ||
           !explain.empty() || stage.getNumOccurrences() > 0 || train;
  }

  /// Whether a pass prints instead of the IR.
  bool printInstead() const {
    return report.getNumOccurrences() > 0 || !showSharding.empty() ||
           emit == EmitKind::OpenMP || plan;
  }
};

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Hides from --help every option outside `categories`, so that it lists
/// sd's options only, as sdgen's and sdrun's do; the others stay accepted
/// and listed by --help-hidden (cl::HideUnrelatedOptions would hide them
/// from it too).
static void
hideOtherOptionsFromHelp(ArrayRef<const cl::OptionCategory *> categories) {
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
}

/// The parser verifies the input and the pass manager the IR after each
/// pass, so the printer need not verify the whole program once more (a
/// twentieth of a large training step's time): sets
/// --mlir-print-assume-verified unless it was given.
static void assumeVerifiedWhenPrinting(const MlirOptMainConfig &config) {
  if (!config.shouldVerifyOnParsing() || !config.shouldVerifyPasses())
    return;
  if (cl::Option *assumeVerified =
          cl::getRegisteredOptions().lookup("mlir-print-assume-verified");
      assumeVerified && !assumeVerified->getNumOccurrences())
    (void)assumeVerified->addOccurrence(0, assumeVerified->ArgStr, "true");
}

/// The default pipeline's options from the resolved flags; an error for
/// flags that do not go together.
static FailureOr<PipelineOptions>
defaultPipelineOptions(const SdoptCommandLine::Flags &flags,
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
  PipelineOptions options = pipelineOptions(*spec);
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

/// Runs the default pipeline first, then any passes named on the command
/// line (e.g. `--mesh=... --inline`).
static void runDefaultPipelineFirst(MlirOptMainConfig &config,
                                    const PipelineOptions &options) {
  MlirOptMainConfig explicitPasses = config;
  config.setPassPipelineSetupFn([options, explicitPasses](PassManager &pm) {
    buildDefaultPipeline(pm, options);
    return explicitPasses.setupPassPipeline(pm);
  });
}

/// Adds the passes that print (the report, the sharding picture, the
/// OpenMP code) to `os` after those `config` sets up.
static void
printAfterPasses(MlirOptMainConfig &config,
                 const SdoptCommandLine::Flags &flags,
                 const ::sd::NetworkModel &network,
                 const std::optional<::sd::HardwareProfile> &profile,
                 llvm::raw_ostream &os) {
  MlirOptMainConfig passes = config;
  config.setPassPipelineSetupFn(
      [passes, &flags, network, profile, &os](PassManager &pm) {
        if (failed(passes.setupPassPipeline(pm)))
          return failure();
        if (flags.report.getNumOccurrences() > 0) {
          PrintReportOptions report;
          report.format = flags.report;
          pm.addPass(createPrintReport(os, report, network, profile));
        }
        if (!flags.showSharding.empty()) {
          ShowShardingOptions show;
          show.value = flags.showSharding;
          pm.addPass(createShowSharding(os, show));
        }
        if (flags.emit == EmitKind::OpenMP) {
          // The lowering needs one call-free function.
          pm.addPass(createInlinerPass());
          pm.addNestedPass<func::FuncOp>(createLowerToOpenMP());
          pm.addPass(createEmitOpenMP(os, flags.train ? "train_step" : ""));
        }
        return success();
      });
}

/// Opens the input and the output; an error for a file that cannot be
/// opened and for an input nested too deeply for MLIR's parser, which
/// recurses per nesting level and would overflow its stack.
static LogicalResult openFiles(SdoptInvocation &invocation,
                               StringRef inputFilename,
                               StringRef outputFilename) {
  std::string errorMessage;
  // A regular file of bounded size (or "-", standard input), NUL-terminated
  // for MLIR's lexer.
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> input =
      ::sd::readRegularFileOrStdin(std::string_view(inputFilename),
                                   "input file", ::sd::kMaxProgramFileBytes,
                                   /*nullTerminated=*/true);
  if (!input.ok()) {
    llvm::errs() << "error: " << std::string(input.status().message()) << "\n";
    return failure();
  }
  invocation.input = std::move(*input);
  if (absl::Status nesting = ::sd::checkNestingDepth(
          std::string_view(invocation.input->getBuffer()),
          std::string_view(inputFilename));
      !nesting.ok()) {
    llvm::errs() << "error: " << std::string(nesting.message()) << "\n";
    return failure();
  }
  invocation.output = openOutputFile(outputFilename, &errorMessage);
  if (!invocation.output) {
    llvm::errs() << "error: " << errorMessage << "\n";
    return failure();
  }
  return success();
}

/// Prints the passes' diagnostics with readable source excerpts (the
/// handler reads the input file again for them); not under
/// -verify-diagnostics, whose handler must see them, nor -split-input-file,
/// whose lines are a chunk's.
static void useReadableDiagnostics(DialectRegistry &registry,
                                   const MlirOptMainConfig &config) {
  if (config.shouldVerifyDiagnostics() || !config.inputSplitMarker().empty())
    return;
  // MlirOptMain's context dies before main returns, and the handler must
  // not unregister itself from it then: it is never destroyed (one per
  // run, reachable from here).
  // It is installed when MlirOptMain's context loads the func dialect (as
  // the parser meets the first `func.func`), so that the parser's errors
  // are trimmed too.
  static llvm::SourceMgr diagnosticSources;
  registry.addExtension(+[](MLIRContext *context, func::FuncDialect *) {
    static ReadableDiagnosticHandler *readable = nullptr;
    if (!readable)
      readable = new ReadableDiagnosticHandler(diagnosticSources, context);
  });
}

//===----------------------------------------------------------------------===//
// SdoptCommandLine
//===----------------------------------------------------------------------===//

SdoptCommandLine::SdoptCommandLine(DialectRegistry &registry)
    : registry(registry), specFlags(Tool::Sdopt),
      flags(std::make_unique<Flags>()) {}

SdoptCommandLine::~SdoptCommandLine() = default;

void SdoptCommandLine::parse(int argc, char **argv) {
  std::string helpHeader = registerCLIOptions(
      "sd optimizer driver\n\nThe sd-* passes, mlir-opt's options and LLVM's "
      "are accepted and listed by --help-hidden.\n",
      registry);
  SmallVector<const cl::OptionCategory *> categories(specFlags.categories());
  categories.push_back(&flags->category);
  hideOtherOptionsFromHelp(categories);
  std::tie(inputFilename, outputFilename) =
      parseCLIOptions(argc, argv, helpHeader);
}

FailureOr<SdoptInvocation> SdoptCommandLine::resolve() {
  SdoptInvocation invocation;
  invocation.config = MlirOptMainConfig::createFromCLOptions();
  assumeVerifiedWhenPrinting(invocation.config);

  ::sd::RunSpecFlags values = specFlags.values();
  if (flags->plan)
    return resolvePlan(invocation, values);
  if (values.deviceMemory) {
    llvm::errs() << "error: --device-memory is the memory --plan plans for "
                    "(sdrun's budget); sdopt uses it only with --plan\n";
    return failure();
  }
  if (flags->usePipeline(values)) {
    FailureOr<PipelineOptions> options = defaultPipelineOptions(*flags, values);
    if (failed(options))
      return failure();
    runDefaultPipelineFirst(invocation.config, *options);
  }
  if (failed(openFiles(invocation, inputFilename, outputFilename)))
    return failure();
  // The printing passes run last and write to the output file.
  invocation.printInstead = flags->printInstead();
  absl::StatusOr<::sd::NetworkModel> network = ::sd::resolveNetwork(values);
  if (!network.ok()) {
    llvm::errs() << "error: " << std::string(network.status().message())
                 << "\n";
    return failure();
  }
  absl::StatusOr<std::optional<::sd::HardwareProfile>> profile =
      ::sd::resolveProfile(values);
  if (!profile.ok()) {
    llvm::errs() << "error: " << std::string(profile.status().message())
                 << "\n";
    return failure();
  }
  if (invocation.printInstead)
    printAfterPasses(invocation.config, *flags, *network, *profile,
                     invocation.output->os());
  useReadableDiagnostics(registry, invocation.config);
  return invocation;
}

FailureOr<SdoptInvocation>
SdoptCommandLine::resolvePlan(SdoptInvocation &invocation,
                              const ::sd::RunSpecFlags &values) {
  auto fail = [](const std::string &message) {
    llvm::errs() << "error: " << message << "\n";
    return failure();
  };
  if (!values.mesh.value_or("").empty() || values.dcnMesh)
    return fail("--plan chooses the mesh: leave out --mesh and --dcn-mesh");
  if (!values.devices)
    return fail("--plan needs --devices, the devices to plan for");
  if (!values.profile)
    return fail("--plan needs --profile, the hardware to price on (cpu, "
                "tpu-v5p, tpu-v6e, h100-sxm or a profile file)");
  if (flags->hosts <= 0 || *values.devices % flags->hosts != 0)
    return fail("--hosts=" + std::to_string(flags->hosts) +
                " must be positive and divide --devices=" +
                std::to_string(*values.devices));
  if (flags->report.getNumOccurrences() > 0 || !flags->showSharding.empty() ||
      flags->emit == EmitKind::OpenMP || flags->stage.getNumOccurrences() > 0)
    return fail("--plan prints its own table: leave out --report, "
                "--show-sharding, --emit and --stage");
  absl::StatusOr<std::optional<::sd::HardwareProfile>> profile =
      ::sd::resolveProfile(values);
  if (!profile.ok())
    return fail(std::string(profile.status().message()));
  absl::StatusOr<PlanningBase> planning = planningBase(values);
  if (!planning.ok())
    return fail(std::string(planning.status().message()));
  PipelineOptions base = planning->pipeline;
  PlanOptions plan = planning->plan;
  plan.devices = *values.devices;
  plan.hosts = flags->hosts;
  plan.profile = **profile;
  plan.outputPath = flags->planOutput;
  // The config carries the rest of the run the search priced; the plan
  // writes its own choices, and the machine is sdrun's to describe.
  ::sd::CarriedSettings carried = ::sd::carrySettings(
      values, ::sd::kSdopt,
      {"mesh", "dcn-mesh", "devices", "processes", "per-device-batch", "batch",
       "grad-accum", "attention", "remat", "rules", "profile", "ici-bandwidth",
       "dcn-bandwidth", "ici-latency", "dcn-latency", "device-memory"});
  plan.configLines = std::move(carried.lines);
  plan.flagsOnly = std::move(carried.flagsOnly);
  plan.wholeProgram = flags->planWholeProgram;
  plan.top = flags->planTop;
  if (failed(openFiles(invocation, inputFilename, outputFilename)))
    return failure();
  invocation.printInstead = true;
  llvm::raw_ostream &os = invocation.output->os();
  invocation.config.setPassPipelineSetupFn([base, plan, &os](PassManager &pm) {
    pm.addPass(createPlan(base, plan, os));
    return success();
  });
  useReadableDiagnostics(registry, invocation.config);
  return std::move(invocation);
}

int mlir::sd::sdoptExitCode(LogicalResult result, SdoptInvocation &invocation) {
  if (failed(result))
    return 1;
  invocation.output->keep();
  return 0;
}
