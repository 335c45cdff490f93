//===- sdopt.cpp - the sd optimizer driver --------------------------------===//
//
// mlir-opt for sd: every sd-* pass runs alone (lit tests), and --mesh (with
// --dcn-mesh, --devices, --rules, --batch) runs the default pipeline, which
// prints the program with its mesh and a sharding on every argument.
// --report and --show-sharding print a report or a picture instead.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Passes/OpenMPEmitter.h"
#include "sd/Passes/Passes.h"
#include "sd/Sharding/Mesh.h"
#include "sd/Support/Debug.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory sdCategory("sd pipeline options");
static cl::opt<std::string>
    meshFlag("mesh", cl::desc("Device mesh (ICI), e.g. data:8,fsdp:4; -1 "
                              "fills from --devices. Runs the default "
                              "pipeline"),
             cl::cat(sdCategory));
static cl::opt<std::string>
    dcnMeshFlag("dcn-mesh",
                cl::desc("Mesh part across processes/hosts, e.g. data:2"),
                cl::cat(sdCategory));
static cl::opt<int64_t>
    devicesFlag("devices", cl::desc("Total device count (fills a -1 axis)"),
                cl::init(0), cl::cat(sdCategory));
static cl::opt<int64_t>
    processesFlag("processes",
                  cl::desc("Process count (fills a -1 DCN axis)"),
                  cl::init(0), cl::cat(sdCategory));
static cl::opt<std::string>
    rulesFlag("rules",
              cl::desc("Logical axis rules: dit (default), sdxl, flux, wan, "
                       "or a MaxDiffusion YAML file"),
              cl::init("dit"), cl::cat(sdCategory));
static cl::opt<int64_t> batchFlag("batch", cl::desc("Global batch size"),
                                  cl::init(0), cl::cat(sdCategory));
static cl::opt<double> perDeviceBatchFlag(
    "per-device-batch",
    cl::desc("MaxDiffusion's per_device_batch_size (may be fractional); "
             "global batch = this × devices"),
    cl::init(0.0), cl::cat(sdCategory));

/// How far the default pipeline goes.
enum class Stage { Rules, Sharded, Partitioned };
static cl::opt<Stage> stageFlag(
    "stage", cl::desc("Where the default pipeline stops"),
    cl::values(clEnumValN(Stage::Rules, "rules",
                          "arguments sharded by the logical axis rules"),
               clEnumValN(Stage::Sharded, "sharded",
                          "block functions inlined and every value sharded "
                          "by sd-propagate-sharding (global program)"),
               clEnumValN(Stage::Partitioned, "partitioned",
                          "the per-device program with collectives "
                          "(sd-partition, sd-optimize-collectives)")),
    cl::init(Stage::Partitioned), cl::cat(sdCategory));
static cl::OptionCategory trainCategory("sd training-step options");
static cl::opt<bool> trainFlag(
    "train",
    cl::desc("Build the training step (forward, backward, AdamW) from @loss "
             "before sharding it"),
    cl::init(false), cl::cat(trainCategory));
static cl::opt<std::string>
    rematFlag("remat",
              cl::desc("Remat policy: NONE (default), FULL, "
                       "MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
                       "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM"),
              cl::init("NONE"), cl::cat(trainCategory));
static cl::list<std::string> namesSavedFlag(
    "names-saved", cl::CommaSeparated,
    cl::desc("CUSTOM: names_which_can_be_saved (comma-separated sd.names)"),
    cl::cat(trainCategory));
static cl::list<std::string> namesOffloadedFlag(
    "names-offloaded", cl::CommaSeparated,
    cl::desc("CUSTOM: names_which_can_be_offloaded (comma-separated)"),
    cl::cat(trainCategory));
static cl::opt<double> lrFlag("lr", cl::desc("Peak learning rate"),
                              cl::init(1e-4), cl::cat(trainCategory));
static cl::opt<int64_t> warmupFlag("warmup-steps",
                                   cl::desc("Linear warm-up steps"),
                                   cl::init(0), cl::cat(trainCategory));
static cl::opt<double> weightDecayFlag("weight-decay",
                                       cl::desc("AdamW weight decay"),
                                       cl::init(1e-2), cl::cat(trainCategory));
static cl::opt<double>
    maxGradNormFlag("max-grad-norm",
                    cl::desc("Clip gradients to this global norm (0: off)"),
                    cl::init(0.0), cl::cat(trainCategory));
static cl::opt<int64_t>
    gradAccumFlag("grad-accum",
                  cl::desc("Microbatches accumulated per training step"),
                  cl::init(1), cl::cat(trainCategory));

static cl::opt<std::string> explainFlag(
    "explain",
    cl::desc("Explain, as remarks, where the sharding of the named value "
             "(parameter name, input kind or sd.name) comes from; implies "
             "--stage=sharded"),
    cl::value_desc("name"), cl::cat(sdCategory));

// --report and --show-sharding print what they say instead of the IR.
static cl::opt<mlir::sd::ReportFormat> reportFlag(
    "report", cl::ValueOptional,
    cl::desc("After the passes, print the per-device report of @loss "
             "(memory, FLOPs, collectives) instead of the IR"),
    cl::values(clEnumValN(mlir::sd::ReportFormat::Text, "text",
                          "a table with human units (the default)"),
               clEnumValN(mlir::sd::ReportFormat::Json, "json",
                          "JSON with exact numbers"),
               clEnumValN(mlir::sd::ReportFormat::Text, "", "")),
    cl::init(mlir::sd::ReportFormat::Text), cl::cat(sdCategory));
static cl::opt<std::string> showShardingFlag(
    "show-sharding",
    cl::desc("After the passes, draw which device holds which block of the "
             "named value (parameter name, input kind or sd.name) instead "
             "of printing the IR"),
    cl::value_desc("name"), cl::cat(sdCategory));

/// What to print instead of the IR.
enum class EmitKind { MLIR, OpenMP };
static cl::opt<EmitKind> emitFlag(
    "emit", cl::desc("What to print after the passes"),
    cl::values(clEnumValN(EmitKind::MLIR, "mlir", "the IR (the default)"),
               clEnumValN(EmitKind::OpenMP, "openmp",
                          "the C++/OpenMP translation unit of the training "
                          "step (--train) or the model function, after "
                          "inlining and sd-lower-to-openmp")),
    cl::init(EmitKind::MLIR), cl::cat(sdCategory));

int main(int argc, char **argv) {
  DialectRegistry registry;
  registry.insert<mlir::sd::SDDialect, func::FuncDialect>();
  // Lets --inline inline calls of block functions.
  func::registerInlinerExtension(registry);
  mlir::sd::registerAllSDExtensions(registry);
  mlir::sd::registerSDPipelines();
  ::sd::registerDebugOptions();
  registerTransformsPasses();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "sd optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  bool usePipeline = !meshFlag.empty() || batchFlag != 0 ||
                     perDeviceBatchFlag != 0.0 || !explainFlag.empty() ||
                     stageFlag.getNumOccurrences() > 0 || trainFlag;
  if (usePipeline) {
    mlir::sd::PipelineOptions options;
    options.mesh = meshFlag;
    options.dcnMesh = dcnMeshFlag;
    options.devices = devicesFlag;
    options.processes = processesFlag;
    options.rules = rulesFlag;
    options.batch = batchFlag;
    // Without a mesh there is nothing to shard: the pipeline only fixes the
    // batch, whatever the stage.
    bool shard = !meshFlag.empty();
    options.propagate = (shard && stageFlag != Stage::Rules) ||
                        !explainFlag.empty();
    options.partition = shard && stageFlag == Stage::Partitioned &&
                        explainFlag.empty();
    options.recordProvenance = !explainFlag.empty();
    options.explain = explainFlag;
    if (options.mesh.empty() && (!explainFlag.empty() ||
                                 stageFlag.getNumOccurrences() > 0)) {
      llvm::errs() << "error: --stage and --explain need --mesh\n";
      return 1;
    }
    if (perDeviceBatchFlag != 0.0) {
      if (batchFlag != 0) {
        llvm::errs() << "error: give --batch or --per-device-batch, not both\n";
        return 1;
      }
      int64_t devices = devicesFlag;
      if (devices <= 0) {
        ::sd::MeshOptions meshOptions;
        if (processesFlag > 0)
          meshOptions.processes = processesFlag;
        auto spec = ::sd::parseMesh(meshFlag, dcnMeshFlag, meshOptions);
        if (!spec.ok()) {
          llvm::errs() << "error: --per-device-batch needs the device count: "
                       << std::string(spec.status().message()) << "\n";
          return 1;
        }
        devices = spec->numDevices();
      }
      double global = perDeviceBatchFlag * static_cast<double>(devices);
      if (!(global >= 1.0) || std::fabs(global - std::round(global)) > 1e-9) {
        llvm::errs() << "error: --per-device-batch="
                     << llvm::format("%g", perDeviceBatchFlag.getValue())
                     << " × " << devices
                     << " devices = " << llvm::format("%g", global)
                     << " is not a whole, positive global batch\n";
        return 1;
      }
      options.batch = static_cast<int64_t>(std::llround(global));
    }
    options.train = trainFlag;
    mlir::sd::DifferentiateOptions &train = options.differentiate;
    train.remat = rematFlag;
    train.namesSaved.assign(namesSavedFlag.begin(), namesSavedFlag.end());
    train.namesOffloaded.assign(namesOffloadedFlag.begin(),
                                namesOffloadedFlag.end());
    train.learningRate = lrFlag;
    train.warmupSteps = warmupFlag;
    train.weightDecay = weightDecayFlag;
    train.maxGradNorm = maxGradNormFlag;
    train.gradAccum = gradAccumFlag;
    if (gradAccumFlag < 1) {
      llvm::errs() << "error: --grad-accum must be at least 1, not "
                   << gradAccumFlag << "\n";
      return 1;
    }
    if (gradAccumFlag > 1 && options.batch == 0) {
      llvm::errs() << "error: --grad-accum needs the global batch "
                      "(--batch or --per-device-batch)\n";
      return 1;
    }
    if (options.batch % gradAccumFlag != 0) {
      llvm::errs() << "error: global batch " << options.batch
                   << " does not split into --grad-accum=" << gradAccumFlag
                   << " microbatches\n";
      return 1;
    }
    // The default pipeline runs first, then any passes named on the command
    // line (e.g. `--mesh=... --inline`).
    MlirOptMainConfig explicitPasses = config;
    config.setPassPipelineSetupFn([options, explicitPasses](PassManager &pm) {
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
  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << "error: " << errorMessage << "\n";
    return 1;
  }
  // The printing passes run last and write to the output file; the IR goes
  // nowhere.
  bool emitOpenMP = emitFlag == EmitKind::OpenMP;
  bool printInstead = reportFlag.getNumOccurrences() > 0 ||
                      !showShardingFlag.empty() || emitOpenMP;
  if (printInstead) {
    MlirOptMainConfig passes = config;
    llvm::raw_ostream *os = &output->os();
    config.setPassPipelineSetupFn([passes, os, emitOpenMP](PassManager &pm) {
      if (failed(passes.setupPassPipeline(pm)))
        return failure();
      if (reportFlag.getNumOccurrences() > 0) {
        mlir::sd::PrintReportOptions report;
        report.format = reportFlag;
        pm.addPass(mlir::sd::createPrintReport(*os, report));
      }
      if (!showShardingFlag.empty()) {
        mlir::sd::ShowShardingOptions show;
        show.value = showShardingFlag;
        pm.addPass(mlir::sd::createShowSharding(*os, show));
      }
      if (emitOpenMP) {
        // The lowering needs one call-free function.
        pm.addPass(createInlinerPass());
        pm.addNestedPass<func::FuncOp>(mlir::sd::createLowerToOpenMP());
        pm.addPass(mlir::sd::createEmitOpenMP(
            *os, trainFlag ? "train_step" : ""));
      }
      return success();
    });
  }
  if (failed(MlirOptMain(printInstead ? llvm::nulls() : output->os(),
                         std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
