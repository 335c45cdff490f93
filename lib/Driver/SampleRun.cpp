//===- SampleRun.cpp - sdsample: @denoise on a mesh in a sampler loop ----===//
//
// sdsample's run in phases. The weights it reads are SampleWeights.cpp's,
// @denoise on a mesh (DenoiseProgram) and the guided prediction
// DenoiseProgram.cpp's, the sampler math Sample.cpp's.
//
//===----------------------------------------------------------------------===//

#include "SampleWeights.h"

#include "sd/Driver/MemoryPlan.h"
#include "sd/Driver/RunSpecOptions.h"
#include "sd/Driver/Sample.h"
#include "sd/Driver/TrainModelFile.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"
#include "sd/Driver/Diagnostics.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Driver/TrainRun.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Runtime/Program.h"
#include "sd/Sharding/YamlDiagnostics.h"
#include "sd/Support/InputLimits.h"
#include "sd/Telemetry/LossPlot.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <chrono>
#include <cmath>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::detail;
using namespace mlir::sd::sampling;
using llvm::format;
using llvm::outs;

namespace rt = ::sd::rt;
namespace ckpt = ::sd::ckpt;

//===----------------------------------------------------------------------===//
// sdsample
//===----------------------------------------------------------------------===//

namespace {

/// The options' checks that need no model.
absl::Status checkOptions(const SampleOptions &options) {
  if (absl::Status status = checkWeightOptions(options); !status.ok())
    return status;
  if (options.steps < 1 || options.steps > kMaxSamplingSteps)
    return absl::InvalidArgumentError(
        absl::StrFormat("--num-inference-steps must be in [1, %d], not %d",
                        kMaxSamplingSteps, options.steps));
  if (!std::isfinite(options.guidanceScale))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--guidance-scale must be finite, not %g", options.guidanceScale));
  if (!std::isfinite(options.trueCfgScale))
    return absl::InvalidArgumentError(absl::StrFormat(
        "--true-cfg-scale must be finite, not %g", options.trueCfgScale));
  for (auto [value, key] : {std::pair{options.baseShift, "base_shift"},
                            std::pair{options.maxShift, "max_shift"}})
    if (!std::isfinite(value) || std::abs(value) > 20)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s must be in [-20, 20], not %g", key, value));
  if (options.flowShift && options.timeShift && *options.timeShift)
    return absl::InvalidArgumentError(
        "give flow_shift (a fixed shift) or time_shift (Flux's "
        "resolution-dependent one), not both");
  if (options.samplesPerClass < 1 || options.samplesPerClass > kMaxSamples)
    return absl::InvalidArgumentError(
        absl::StrFormat("--samples-per-class must be in [1, %d], not %d",
                        kMaxSamples, options.samplesPerClass));
  if (options.gridZoom < 0 || options.gridZoom > 256)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--grid-scale must be in [1, 256] (0: automatic), not %d",
        options.gridZoom));
  if (options.gridPath.empty() && options.outputPath.empty())
    return absl::InvalidArgumentError(
        "nothing to write: give --grid=FILE.png and/or "
        "--output=FILE.safetensors");
  for (auto [path, flag] : {std::pair<const std::string &, llvm::StringRef>{
                                options.gridPath, "--grid"},
                            {options.outputPath, "--output"}})
    if (absl::Status status = checkOutputPath(path, flag); !status.ok())
      return status;
  return absl::OkStatus();
}

/// What @denoise is conditioned on: the classes its labels input has room
/// for, its text inputs, whether it takes a distilled guidance, and the
/// latents' sample shape.
struct DenoiseConditions {
  int64_t numClasses = 0;
  std::vector<ConditionInput> textInputs;
  std::vector<int64_t> latents;
  bool guidanceInput = false;
};

DenoiseConditions conditionsOf(func::FuncOp denoise) {
  DenoiseConditions conditions;
  for (unsigned i = 0; i < denoise.getNumArguments(); ++i) {
    auto input =
        denoise.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    auto type = dyn_cast<RankedTensorType>(denoise.getArgument(i).getType());
    // The batch may be dynamic; the sample's dimensions are not.
    if (!input || !type || type.getRank() == 0 ||
        llvm::any_of(type.getShape().drop_front(), ShapedType::isDynamic))
      continue;
    std::vector<int64_t> sample(type.getShape().begin() + 1,
                                type.getShape().end());
    switch (input.getKind()) {
    case InputKind::latents:
      conditions.latents = std::move(sample);
      break;
    case InputKind::labels:
      if (type.getRank() == 2)
        conditions.numClasses = type.getDimSize(1) - 1;
      break;
    case InputKind::context:
    case InputKind::pooled:
      conditions.textInputs.push_back({input.getKind() == InputKind::pooled
                                           ? rt::InputRole::Pooled
                                           : rt::InputRole::Context,
                                       std::move(sample)});
      break;
    case InputKind::guidance:
      conditions.guidanceInput = true;
      break;
    default:
      break;
    }
  }
  return conditions;
}

/// One sdsample run; run() does it in order.
class SampleRun {
public:
  SampleRun(ModuleOp module, const SampleOptions &options)
      : module(module), options(options),
        diagnostics(module.getContext(), [this](Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
            compilerReported = true;
          return failure();
        }) {}

  absl::Status run();

private:
  /// The model's prediction type, the sampler, the classes and the
  /// weights, before anything compiles.
  absl::Status resolve();
  absl::Status compile();
  absl::Status sampleAll();
  absl::Status writeOutputs();

  absl::Status compilerFailure(llvm::StringRef message) const {
    if (compilerReported)
      return reportedFailure(message.str());
    return absl::InvalidArgumentError(message.str());
  }
  bool writes() const { return options.device.process <= 0; }

  ModuleOp module;
  const SampleOptions &options;
  bool compilerReported = false;
  ScopedDiagnosticHandler diagnostics;

  /// The classes, the prompts, the guidance and the time shift, in that
  /// order's phases below.
  absl::Status resolveConditions(func::FuncOp denoise);
  absl::Status resolveGuidance(func::FuncOp denoise, bool guidanceInput);
  absl::Status resolveRows(const DenoiseConditions &conditions);
  absl::Status resolveTimeShift(const DenoiseConditions &conditions);

  SamplerOptions sampler;
  std::string predictionSource;
  /// A grid row each: the classes, or the prompts of a text-conditioned
  /// model (whose states are `prompts`).
  std::vector<int64_t> classes;
  std::optional<PromptStates> prompts;
  /// Classifier-free guidance, and a guidance input's value.
  double cfgScale = 1.0;
  std::optional<double> distilledGuidance;
  /// How the sampler line describes the time shift ("" for none).
  std::string shiftText;
  WeightSource source;
  std::map<std::string, std::vector<float>> weights;
  /// What --lora merged, as printed.
  std::string loraLine;
  bool usedEma = false;
  std::unique_ptr<DenoiseProgram> program;
  /// Class-major: classes[r]'s samples are rows r·K .. r·K + K − 1.
  std::vector<float> samples;
  double seconds = 0;
};

absl::Status SampleRun::run() {
  for (absl::Status (SampleRun::*phase)() :
       {&SampleRun::resolve, &SampleRun::compile, &SampleRun::sampleAll,
        &SampleRun::writeOutputs})
    if (absl::Status status = (this->*phase)(); !status.ok())
      return status;
  return absl::OkStatus();
}

absl::Status SampleRun::resolve() {
  if (absl::Status status = checkOptions(options); !status.ok())
    return status;
  auto denoise = module.lookupSymbol<func::FuncOp>("denoise");
  if (!denoise)
    return absl::InvalidArgumentError(
        "the model has no @denoise (sdgen writes it with --with-denoise)");
  absl::StatusOr<std::optional<Prediction>> recorded = modelPrediction(module);
  if (!recorded.ok())
    return recorded.status();
  if (*recorded && options.prediction && **recorded != *options.prediction)
    return absl::InvalidArgumentError(absl::StrFormat(
        "prediction type %s was asked for, but the model predicts %s "
        "(sd.prediction_type)",
        predictionName(*options.prediction).str(),
        predictionName(**recorded).str()));
  if (*recorded) {
    sampler.prediction = **recorded;
    predictionSource = "the model's";
  } else if (options.prediction) {
    sampler.prediction = *options.prediction;
    predictionSource = "as given";
  } else {
    sampler.prediction = Prediction::Epsilon;
    predictionSource = "assumed: the model does not record it; "
                       "--prediction-type sets it";
  }
  sampler.sampler =
      options.sampler.value_or(defaultSampler(sampler.prediction));
  if (absl::Status status = checkSampler(sampler.sampler, sampler.prediction);
      !status.ok())
    return status;
  if (options.clipX0 && *options.clipX0 && sampler.sampler == Sampler::Euler)
    return absl::InvalidArgumentError(
        "--clip-x0 applies to the ddpm and ddim samplers, not euler");
  sampler.clipX0 = options.clipX0.value_or(sampler.sampler != Sampler::Euler);
  sampler.seed = options.seed;

  if (absl::Status status = resolveConditions(denoise); !status.ok())
    return status;
  int64_t total = static_cast<int64_t>(classes.size());
  if (total > kMaxSamples / options.samplesPerClass)
    return absl::InvalidArgumentError(
        absl::StrFormat("%d classes × %d samples is more than %d samples",
                        total, options.samplesPerClass, kMaxSamples));

  // The weights, checked against the parameters before compiling.
  absl::StatusOr<WeightSource> read = readSampleWeights(module, options);
  if (!read.ok())
    return read.status();
  source = std::move(*read);
  FailureOr<std::vector<ParameterShape>> params = denoiseParameters(module);
  if (failed(params))
    return compilerFailure("could not read @denoise's parameters");
  absl::StatusOr<std::map<std::string, std::vector<float>>> selected =
      selectWeightsOf(source, *params, options.ema, usedEma);
  if (!selected.ok())
    return selected.status();
  if (absl::Status status = checkComputedTensorsOf(module, source);
      !status.ok())
    return status;
  weights = std::move(*selected);
  if (!options.loraPath.empty()) {
    absl::StatusOr<std::string> merged =
        mergeLoraFile(options.loraPath, options.loraScale, *params, weights);
    if (!merged.ok())
      return merged.status();
    loraLine = *merged;
  }
  return absl::OkStatus();
}

absl::Status SampleRun::resolveConditions(func::FuncOp denoise) {
  DenoiseConditions conditions = conditionsOf(denoise);
  if (conditions.latents.empty())
    return absl::InvalidArgumentError(
        "@denoise has no latents input of static sample shape");
  if (absl::Status status = resolveGuidance(denoise, conditions.guidanceInput);
      !status.ok())
    return status;
  if (absl::Status status = resolveRows(conditions); !status.ok())
    return status;
  return resolveTimeShift(conditions);
}

absl::Status SampleRun::resolveGuidance(func::FuncOp denoise,
                                        bool guidanceInput) {
  // Classifier-free guidance, and a distilled guidance input's value.
  cfgScale = guidanceInput ? options.trueCfgScale : options.guidanceScale;
  if (!guidanceInput && options.trueCfgScale != 1.0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--true-cfg-scale=%g is for a model with a distilled guidance input "
        "(Flux.1-dev); this model's classifier-free guidance is "
        "--guidance-scale",
        options.trueCfgScale));
  if (!guidanceInput)
    return absl::OkStatus();
  auto recorded =
      denoise->getAttrOfType<FloatAttr>(SDDialect::kGuidanceAttrName);
  if (!options.guidanceScaleGiven && !recorded)
    return absl::InvalidArgumentError(
        "@denoise takes a distilled guidance strength but records none "
        "(sd.guidance): give it with --guidance-scale");
  distilledGuidance = options.guidanceScaleGiven ? options.guidanceScale
                                                 : recorded.getValueAsDouble();
  return absl::OkStatus();
}

absl::Status SampleRun::resolveRows(const DenoiseConditions &conditions) {
  const std::vector<ConditionInput> &textInputs = conditions.textInputs;
  int64_t numClasses = conditions.numClasses;
  if (!textInputs.empty()) {
    if (!options.classes.empty())
      return absl::InvalidArgumentError(
          "--classes needs a class-conditional model; this one is "
          "conditioned on text, a grid row per prompt of --text-states");
    if (options.textStatesPath.empty()) {
      // The text states' input (else the first text input) names the shape.
      auto states = llvm::find_if(textInputs, [](const ConditionInput &input) {
        return input.role == rt::InputRole::Context;
      });
      if (states == textInputs.end())
        states = textInputs.begin();
      return absl::InvalidArgumentError(
          "@denoise is conditioned on text: give the prompts' text-encoder "
          "outputs with --text-states=FILE.safetensors (prompt_embeds " +
          shapeString(states->shape).insert(1, "N, ") +
          (textInputs.size() > 1 ? ", pooled_prompt_embeds" : "") +
          "), or run it on given inputs with --predict");
    }
    absl::StatusOr<PromptStates> read =
        readPromptStates(options.textStatesPath, textInputs);
    if (!read.ok())
      return read.status();
    prompts = std::move(*read);
    if (cfgScale != 1.0 && prompts->negatives == 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s=%g needs a negative prompt's states in %s "
          "(negative_prompt_embeds%s; an empty prompt's for plain "
          "classifier-free guidance)",
          conditions.guidanceInput ? "--true-cfg-scale" : "--guidance-scale",
          cfgScale, options.textStatesPath,
          textInputs.size() > 1 ? " and negative_pooled_prompt_embeds" : ""));
    for (int64_t p = 0; p < prompts->prompts; ++p)
      classes.push_back(p);
  } else if (!options.textStatesPath.empty()) {
    return absl::InvalidArgumentError(
        "--text-states needs a text-conditioned model; @denoise has no text "
        "input");
  } else if (numClasses <= 0) {
    if (!options.classes.empty())
      return absl::InvalidArgumentError(
          "--classes needs a class-conditional model; @denoise has no labels "
          "input");
    if (cfgScale != 1.0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "--guidance-scale=%g needs a class-conditional model; @denoise has "
          "no labels input (leave it at 1)",
          cfgScale));
    classes = {0};
  } else if (options.classes.empty()) {
    for (int64_t c = 0; c < numClasses; ++c)
      classes.push_back(c);
  } else {
    for (int64_t c : options.classes)
      if (c < 0 || c >= numClasses)
        return absl::InvalidArgumentError(absl::StrFormat(
            "--classes: class %d is not one of the model's %d classes "
            "(0 to %d)",
            c, numClasses, numClasses - 1));
    classes = options.classes;
  }
  return absl::OkStatus();
}

absl::Status SampleRun::resolveTimeShift(const DenoiseConditions &conditions) {
  // flow_shift as given; time_shift (on by default for a flow model with
  // a pooled text input, Flux, unless flow_shift is given; SDXL's pooled
  // text feeds an epsilon model) from the image's tokens, a 2×2 patch of
  // the latent each.
  bool pooled =
      llvm::any_of(conditions.textInputs, [](const ConditionInput &input) {
        return input.role == rt::InputRole::Pooled;
      });
  bool flow = sampler.prediction == Prediction::Flow;
  bool resolution =
      options.timeShift.value_or(pooled && flow && !options.flowShift);
  double shift = options.flowShift.value_or(1.0);
  if (resolution) {
    // [(F,) H, W, C]: the tokens of (F ×) H/2 × W/2.
    int64_t tokens = 1;
    for (int64_t d : ArrayRef<int64_t>(conditions.latents).drop_back())
      tokens *= d;
    tokens /= 4;
    shift =
        sampling::resolutionShift(tokens, options.baseShift, options.maxShift);
    shiftText = absl::StrFormat(
        "time shift %.4g (e^mu for %d image tokens, base_shift %g, max_shift "
        "%g)",
        shift, tokens, options.baseShift, options.maxShift);
  } else if (shift != 1.0) {
    shiftText = absl::StrFormat("flow shift %g", shift);
  }
  if (shift != 1.0 && sampler.sampler != Sampler::Euler)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s shifts the flow sampler's times; the %s sampler of this %s model "
        "has none",
        options.shiftOrigin.empty() ? "time_shift" : options.shiftOrigin,
        samplerName(sampler.sampler).str(),
        predictionName(sampler.prediction).str()));
  sampler.timeShift = shift;
  return absl::OkStatus();
}

absl::Status SampleRun::compile() {
  absl::StatusOr<std::unique_ptr<DenoiseProgram>> created =
      DenoiseProgram::create(module, options.pipeline, options.device);
  if (!created.ok())
    return compilerReported
               ? reportedFailure(std::string(created.status().message()))
               : created.status();
  program = std::move(*created);
  if (absl::Status status = program->setWeights(weights); !status.ok())
    return status;
  weights.clear();
  if (samplesPerCall(*program, cfgScale) < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "a batch of %d has no room for guidance's two rows a sample; give "
        "--batch of at least 2",
        program->batch()));

  rt::MeshRuntime &runtime = program->session().runtime();
  outs() << "sdsample: " << options.modelPath << ", "
         << program->parameterCount() << " parameters, batch "
         << program->batch() << ", mesh " << program->mesh().toString() << " (";
  if (runtime.process() >= 0)
    outs() << program->mesh().numProcesses() << " processes × ";
  outs() << runtime.numDevices()
         << (runtime.numDevices() == 1 ? " device × " : " devices × ")
         << runtime.threadsPerDevice()
         << (runtime.threadsPerDevice() == 1 ? " thread)\n" : " threads)\n");
  outs() << "weights: " << source.description << (usedEma ? ", EMA" : "")
         << "\n";
  if (!loraLine.empty())
    outs() << loraLine << "\n";
  if (std::string precision =
          describePrecision(options.pipeline, /*training=*/false);
      !precision.empty())
    outs() << precision << "\n";
  outs() << "sampler: " << samplerName(sampler.sampler) << ", " << options.steps
         << (options.steps == 1 ? " step" : " steps") << ", "
         << predictionName(sampler.prediction) << " prediction ("
         << predictionSource << ")";
  if (sampler.sampler != Sampler::Euler)
    outs() << (sampler.clipX0 ? ", x0 clipped to [-1, 1]" : ", x0 not clipped");
  if (!shiftText.empty())
    outs() << ", " << shiftText;
  if (program->numClasses() > 0 || prompts)
    outs() << ", guidance scale " << format("%g", cfgScale);
  if (distilledGuidance)
    outs() << ", distilled guidance " << format("%g", *distilledGuidance);
  outs() << ", seed " << options.seed << "\n";
  return absl::OkStatus();
}

absl::Status SampleRun::sampleAll() {
  int64_t perClass = options.samplesPerClass;
  int64_t elements = program->sampleElements();
  int64_t total = static_cast<int64_t>(classes.size()) * perClass;
  int64_t chunk = samplesPerCall(*program, cfgScale);
  int64_t chunks = (total + chunk - 1) / chunk;
  outs() << "sampling " << total << (total == 1 ? " sample" : " samples");
  if (program->numClasses() > 0 || prompts)
    outs() << " (" << classes.size() << (prompts ? " prompt" : " class")
           << (classes.size() == 1 ? ""
               : prompts           ? "s"
                                   : "es")
           << " × " << perClass << ")";
  outs() << " in " << chunks << (chunks == 1 ? " chunk" : " chunks")
         << " of up to " << chunk << "\n";
  outs().flush();
  samples.assign(static_cast<size_t>(total * elements), 0.0f);
  auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0, c = 0; first < total; first += chunk, ++c) {
    int64_t n = std::min(chunk, total - first);
    // Sample k of class y is sample id y·kMaxSamples + k whatever else is
    // sampled: its noise comes out the same in any run.
    std::vector<int64_t> ids, chunkClasses;
    for (int64_t i = first; i < first + n; ++i) {
      int64_t klass = classes[i / perClass];
      ids.push_back(klass * kMaxSamples + i % perClass);
      chunkClasses.push_back(klass);
    }
    auto chunkStart = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<float>> x = sampling::sample(
        sampler, options.steps, ids, elements,
        guidedDenoiser(*program, {chunkClasses, prompts ? &*prompts : nullptr,
                                  cfgScale, distilledGuidance.value_or(0.0)}));
    if (!x.ok())
      return x.status();
    std::copy(x->begin(), x->end(), samples.begin() + first * elements);
    double chunkSeconds = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - chunkStart)
                              .count();
    outs() << "chunk " << c + 1 << "/" << chunks << ": " << n
           << (n == 1 ? " sample, " : " samples, ") << options.steps
           << (options.steps == 1 ? " step in " : " steps in ")
           << format("%.2f", chunkSeconds) << " s ("
           << format("%.1f", 1e3 * chunkSeconds / options.steps)
           << " ms a step)\n";
    outs().flush();
  }
  seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (float v : samples)
    if (!std::isfinite(v))
      return absl::InternalError(
          "the samples are not finite (the network's predictions grew "
          "without bound)");
  return absl::OkStatus();
}

absl::Status SampleRun::writeOutputs() {
  int64_t perClass = options.samplesPerClass;
  int64_t total =
      static_cast<int64_t>(samples.size()) / program->sampleElements();
  const std::vector<int64_t> &shape = program->sampleShape();
  outs() << "done: " << total << (total == 1 ? " sample" : " samples") << " in "
         << format("%.2f", seconds) << " s\n";
  if (!writes())
    return absl::OkStatus();
  // A video's grid cell is its first frame.
  size_t rank = shape.size();
  int64_t height = shape[rank - 3], width = shape[rank - 2],
          channels = shape[rank - 1];
  const char *row = prompts ? "prompt" : "class";
  if (!options.gridPath.empty()) {
    int64_t zoom =
        options.gridZoom > 0 ? options.gridZoom : defaultZoom(height, width);
    // A grid of more than 2^28 pixels is refused, as sddata's sheet is.
    int64_t rows = static_cast<int64_t>(classes.size());
    double pixels = double(rows * (height * zoom + 2) + 2) *
                    double(perClass * (width * zoom + 2) + 2);
    if (pixels > double(int64_t(1) << 28))
      return absl::InvalidArgumentError(absl::StrFormat(
          "a grid of %.0f pixels is too large; lower --grid-scale or "
          "--samples-per-class",
          pixels));
    // The first frames, when the samples are videos.
    std::vector<float> frames;
    int64_t frame = height * width * channels;
    for (int64_t n = 0; n < total; ++n)
      frames.insert(frames.end(),
                    samples.begin() + n * program->sampleElements(),
                    samples.begin() + n * program->sampleElements() + frame);
    Image image =
        sampleGrid(frames, rows, perClass, height, width, channels, zoom);
    std::string png;
    if (absl::Status status = ::sd::telemetry::encodePng(
            static_cast<int>(image.width), static_cast<int>(image.height),
            image.rgb, png);
        !status.ok())
      return status;
    if (absl::Status status = ckpt::writeFileAtomically(options.gridPath, png);
        !status.ok())
      return status;
    outs() << "wrote " << options.gridPath << ": " << image.width << "x"
           << image.height << " pixels, a row per " << row
           << (rank == 4 ? " (first frames), " : ", ") << perClass
           << (perClass == 1 ? " sample" : " samples") << " a row\n";
  }
  if (!options.outputPath.empty()) {
    std::vector<int64_t> sampleShape = {total};
    sampleShape.insert(sampleShape.end(), shape.begin(), shape.end());
    bool conditioned = program->numClasses() > 0 || prompts;
    std::string rowTensor = prompts ? "prompts" : "labels";
    std::vector<float> labels;
    for (int64_t klass : classes)
      labels.insert(labels.end(), static_cast<size_t>(perClass),
                    static_cast<float>(klass));
    std::vector<ckpt::SafetensorsTensorView> tensors = {
        {"samples", sampleShape, samples.data()}};
    if (conditioned)
      tensors.push_back({rowTensor, {total}, labels.data()});
    std::map<std::string, std::string> metadata = {
        {"format", "pt"},
        {"model", llvm::sys::path::filename(options.modelPath).str()},
        {"weights", source.description + (usedEma ? " (EMA)" : "")},
        {"sampler", samplerName(sampler.sampler).str()},
        {"prediction_type", predictionName(sampler.prediction).str()},
        {"num_inference_steps", std::to_string(options.steps)},
        {"guidance_scale", absl::StrFormat("%g", cfgScale)},
        {"seed", std::to_string(options.seed)}};
    if (distilledGuidance)
      metadata["distilled_guidance"] =
          absl::StrFormat("%g", *distilledGuidance);
    if (sampler.timeShift != 1.0)
      metadata["time_shift"] = absl::StrFormat("%.17g", sampler.timeShift);
    if (prompts)
      metadata["text_states"] = options.textStatesPath;
    absl::StatusOr<ckpt::WrittenFile> written =
        ckpt::writeSafetensors(options.outputPath, tensors, metadata);
    if (!written.ok())
      return written.status();
    outs() << "wrote " << options.outputPath << ": samples "
           << shapeString(sampleShape);
    if (conditioned)
      outs() << ", " << rowTensor << " [" << total << "]";
    outs() << "\n";
  }
  return absl::OkStatus();
}

} // namespace

absl::Status mlir::sd::runSampling(ModuleOp module,
                                   const SampleOptions &options) {
  if (!options.predictPath.empty()) {
    absl::Status status = runPrediction(module, options);
    outs().flush();
    return status;
  }
  SampleRun run(module, options);
  absl::Status status = run.run();
  outs().flush();
  return status;
}

absl::Status mlir::sd::sampleModelFile(const SampleOptions &options) {
  return withModelFile(options.modelPath, [&](ModuleOp module) {
    return runSampling(module, options);
  });
}
