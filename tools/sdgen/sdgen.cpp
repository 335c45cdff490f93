//===- sdgen.cpp - write diffusion-model programs -------------------------===//
//
// `sdgen --preset=dit-s2 [overrides] [-o file]` writes the model's @loss
// (and, with --with-denoise, @denoise) program in the sd dialect and a one-line
// summary (parameters, ops) to stderr. All logic lives in SDModelGen.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Diagnostics.h"
#include "sd/InitAll.h"
#include "sd/ModelGen/ModelGen.h"
#include "sd/Support/ToolMain.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

/// sdgen's own flags; --help lists only these.
static cl::OptionCategory sdgenCategory("sdgen options");

static cl::opt<std::string>
    presetFlag("preset",
               cl::desc("Model: dit-tiny, dit-digits, dit-s2, dit-b2, "
                        "dit-xl2, wan2.1-14b, wan2.1-1.3b, wan-long, "
                        "flux-dev, sd2-base, sdxl, unet-tiny, sdxl-tiny"),
               cl::value_desc("name"), cl::cat(sdgenCategory));
static cl::opt<int64_t>
    depthFlag("depth",
              cl::desc("Layers (Flux: double blocks; single = 2 × depth)"),
              cl::cat(sdgenCategory));
static cl::opt<int64_t> hiddenFlag("hidden", cl::desc("Model width"),
                                   cl::cat(sdgenCategory));
static cl::opt<int64_t> headsFlag("heads", cl::desc("Attention heads"),
                                  cl::cat(sdgenCategory));
static cl::opt<double> mlpRatioFlag("mlp-ratio",
                                    cl::desc("FFN width / model width"),
                                    cl::cat(sdgenCategory));
static cl::opt<int64_t>
    ffnDimFlag("ffn-dim", cl::desc("FFN width (instead of --mlp-ratio)"),
               cl::cat(sdgenCategory));
static cl::opt<int64_t>
    singleDepthFlag("single-depth",
                    cl::desc("Single-stream blocks (Flux; default twice "
                             "--depth)"),
                    cl::cat(sdgenCategory));
static cl::opt<int64_t>
    textDimFlag("text-dim",
                cl::desc("Width of the text states (Wan, Flux; 4096)"),
                cl::cat(sdgenCategory));
static cl::opt<int64_t> pooledDimFlag(
    "pooled-dim",
    cl::desc("Width of the pooled text vector (Flux 768, SDXL 1280)"),
    cl::cat(sdgenCategory));
static cl::opt<int64_t>
    freqDimFlag("freq-dim",
                cl::desc("Width of the sinusoidal timestep embedding (256)"),
                cl::cat(sdgenCategory));
static cl::opt<int64_t>
    batchFlag("batch",
              cl::desc("Default batch (sd.default_batch; DiT 8, Wan/Flux 1)"),
              cl::cat(sdgenCategory));
static cl::opt<int64_t>
    latentSizeFlag("latent-size", cl::desc("Latent height = width (DiT, Flux)"),
                   cl::cat(sdgenCategory));
static cl::opt<int64_t> channelsFlag(
    "channels",
    cl::desc("Channels of a latent or pixel (DiT: 1 for grayscale, 3 for RGB "
             "images; Wan and Flux latents: 16)"),
    cl::cat(sdgenCategory));
static cl::opt<int64_t> classesFlag(
    "classes",
    cl::desc("Classes of the labels (DiT; one more label column is the null "
             "class)"),
    cl::cat(sdgenCategory));
static cl::opt<int64_t> framesFlag("frames",
                                   cl::desc("Video frames, 4k+1 (Wan)"),
                                   cl::cat(sdgenCategory));
static cl::opt<int64_t>
    heightFlag("height", cl::desc("Pixel height (Wan, Flux; VAE factor 8)"),
               cl::cat(sdgenCategory));
static cl::opt<int64_t>
    widthFlag("width", cl::desc("Pixel width (Wan, Flux; VAE factor 8)"),
              cl::cat(sdgenCategory));
static cl::opt<int64_t>
    textLengthFlag("text-length", cl::desc("Text tokens (Wan, Flux, UNets)"),
                   cl::cat(sdgenCategory));
static cl::list<int64_t> blockChannelsFlag(
    "block-channels",
    cl::desc("UNet: channels of each level (diffusers' block_out_channels)"),
    cl::CommaSeparated, cl::cat(sdgenCategory));
static cl::list<int64_t> attentionHeadsFlag(
    "attention-heads",
    cl::desc("UNet: attention heads of each level (diffusers' "
             "attention_head_dim)"),
    cl::CommaSeparated, cl::cat(sdgenCategory));
static cl::list<int64_t>
    transformerLayersFlag("transformer-layers",
                          cl::desc("UNet: transformer blocks of each level "
                                   "(transformer_layers_per_block)"),
                          cl::CommaSeparated, cl::cat(sdgenCategory));
static cl::opt<int64_t> layersPerBlockFlag(
    "layers-per-block",
    cl::desc("UNet: ResNet blocks per down block (up blocks: one more)"),
    cl::cat(sdgenCategory));
static cl::opt<int64_t> normGroupsFlag("norm-groups",
                                       cl::desc("UNet: group-norm groups (32)"),
                                       cl::cat(sdgenCategory));
static cl::opt<std::string>
    dtypeFlag("dtype", cl::desc("Parameters and activations: f32 or bf16"),
              cl::value_desc("type"), cl::cat(sdgenCategory));
static cl::opt<std::string> predictionTypeFlag(
    "prediction-type",
    cl::desc("What the network predicts: epsilon, v_prediction or flow "
             "(default: the preset's)"),
    cl::value_desc("type"), cl::cat(sdgenCategory));
static cl::alias lossAlias("loss", cl::desc("Alias for --prediction-type"),
                           cl::aliasopt(predictionTypeFlag),
                           cl::cat(sdgenCategory));
static cl::opt<bool> withDenoiseFlag(
    "with-denoise",
    cl::desc("Also write @denoise, the network's prediction for noised "
             "latents (dit-digits always does)"),
    cl::cat(sdgenCategory));
static cl::opt<bool>
    staticBatchFlag("static-batch",
                    cl::desc("Write the batch statically instead of '?'"),
                    cl::cat(sdgenCategory));
static cl::opt<std::string> outputFlag("o", cl::desc("Output file"),
                                       cl::value_desc("filename"),
                                       cl::init("-"), cl::cat(sdgenCategory));

/// The flag's value when it was given on the command line.
template <typename T> static std::optional<T> given(const cl::opt<T> &flag) {
  if (flag.getNumOccurrences() == 0)
    return std::nullopt;
  return flag.getValue();
}

/// The list flag's values when it was given on the command line.
static std::optional<std::vector<int64_t>>
givenList(const cl::list<int64_t> &flag) {
  if (flag.getNumOccurrences() == 0)
    return std::nullopt;
  return std::vector<int64_t>(flag.begin(), flag.end());
}

/// The arguments that shaped the program (all but the output file).
static std::string commandLine(int argc, char **argv) {
  std::string text;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg == "-o" || arg == "--o") {
      ++i;
      continue;
    }
    if (arg.starts_with("-o=") || arg.starts_with("--o=") ||
        (arg.starts_with("-o") && !arg.starts_with("--")))
      continue;
    text += " " + arg.str();
  }
  return text;
}

/// Writes the model the flags describe.
static absl::Status runSdgen(int argc, char **argv) {
  cl::HideUnrelatedOptions(sdgenCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "sdgen: write a diffusion-model program\n");
  if (presetFlag.empty())
    return absl::InvalidArgumentError(
        "give --preset=NAME (" + llvm::join(mlir::sd::getPresetNames(), ", ") +
        ")");
  mlir::sd::ModelOverrides overrides;
  overrides.depth = given(depthFlag);
  overrides.hidden = given(hiddenFlag);
  overrides.heads = given(headsFlag);
  overrides.mlpRatio = given(mlpRatioFlag);
  overrides.ffnDim = given(ffnDimFlag);
  overrides.singleDepth = given(singleDepthFlag);
  overrides.textDim = given(textDimFlag);
  overrides.pooledDim = given(pooledDimFlag);
  overrides.freqDim = given(freqDimFlag);
  overrides.batch = given(batchFlag);
  overrides.latentSize = given(latentSizeFlag);
  overrides.channels = given(channelsFlag);
  overrides.classes = given(classesFlag);
  overrides.frames = given(framesFlag);
  overrides.height = given(heightFlag);
  overrides.width = given(widthFlag);
  overrides.textLength = given(textLengthFlag);
  overrides.dtype = given(dtypeFlag);
  overrides.predictionType = given(predictionTypeFlag);
  overrides.levelChannels = givenList(blockChannelsFlag);
  overrides.levelHeads = givenList(attentionHeadsFlag);
  overrides.levelTransformerLayers = givenList(transformerLayersFlag);
  overrides.layersPerBlock = given(layersPerBlockFlag);
  overrides.normGroups = given(normGroupsFlag);
  overrides.staticBatch = staticBatchFlag;
  overrides.withDenoise = withDenoiseFlag;

  absl::StatusOr<mlir::sd::ModelConfig> config =
      mlir::sd::makeModelConfig(presetFlag, overrides);
  if (!config.ok())
    return config.status();

  DialectRegistry registry;
  mlir::sd::registerAllSDExtensions(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::sd::ReadableDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = mlir::sd::generateModel(context, *config);
  // (The generator's diagnostics are printed.)
  if (!module)
    return ::sd::reportedFailure("could not generate the model");

  std::string errorMessage;
  auto output = openOutputFile(outputFlag, &errorMessage);
  if (!output)
    return absl::InvalidArgumentError(errorMessage);
  // A header that says how to regenerate the file.
  output->os() << "// sdgen" << commandLine(argc, argv) << "\n";
  module->print(output->os());
  output->keep();
  llvm::errs() << "sdgen: "
               << mlir::sd::formatModelSummary(
                      *config, mlir::sd::computeModelStats(*module))
               << "\n";
  return absl::OkStatus();
}

int main(int argc, char **argv) {
  return ::sd::runToolMain("sdgen", argc, argv,
                           [&] { return runSdgen(argc, argv); });
}
