//===- PredictRun.cpp - sdsample --predict: the network on given inputs ---===//
//
// One call of the model's @forward (or @denoise) on a mesh, on inputs named
// and laid out as the reference implementation's forward() takes them, the
// output `out` written in the reference's layout. sd's models take
// channel-last latents and timesteps t in [0, 1] (embedded as t·1000); the
// inputs are converted on the host:
//
// * DiT (facebookresearch/DiT's forward(x, t, y)): x [B, C, H, W]
//   (transposed to NHWC), t [B] in [0, 1000) (divided by 1000), y [B] I64
//   labels, num_classes the null class (one-hot rows); out [B, C', H, W],
//   C' = 2C with the learned sigma (@forward).
// * Wan (diffusers' WanTransformer3DModel.forward): hidden_states
//   [B, C, F, H, W], timestep [B] in [0, 1000), encoder_hidden_states
//   [B, L, D]; out [B, C, F, H, W].
// * Flux (diffusers' FluxTransformer2DModel.forward, Flux.1-dev):
//   hidden_states [B, (H/2)·(W/2), 4C] (the pipeline's 2×2 packing,
//   unpacked here), encoder_hidden_states [B, T, D], pooled_projections
//   [B, P], timestep [B] in [0, 1], img_ids [(H/2)·(W/2), 3] (0, row,
//   column), txt_ids [T, 3] (zeros), guidance [B] (the strength the program
//   embeds, sd.guidance); out [B, (H/2)·(W/2), 4C], packed again. sd
//   computes RoPE from the grid, so ids other than these are refused.
// * UNet (diffusers' UNet2DConditionModel.forward, SD 2 and SDXL): sample
//   [B, C, H, W], timestep [B] in [0, 1000), encoder_hidden_states
//   [B, L, D]; SDXL's added_cond_kwargs too: text_embeds [B, P] and
//   time_ids [B, 6]; out [B, C, H, W].
//
// Every input is checked before anything compiles: one error naming the
// tensor, its shape or dtype and what the model takes.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Driver/TrainModelFile.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/Runtime/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace ckpt = ::sd::ckpt;

namespace {

enum class Family { DiT, Wan, Flux, UNet };

/// A batch dimension in a TensorRule's shape.
constexpr int64_t kBatch = -1;

/// One tensor of the reference's forward() inputs.
struct TensorRule {
  std::string name;
  /// kBatch where the inputs' batch goes.
  std::vector<int64_t> shape;
  /// I64 class labels (else a floating tensor).
  bool labels = false;
};

/// The reference's forward() for the model function, and what sd's
/// function takes.
struct Forward {
  Family family = Family::DiT;
  /// "DiT's forward(x, t, y)" and its shapes, for errors.
  std::string name, shapes;
  std::vector<TensorRule> inputs;
  /// sd's latents without the batch: [H, W, C] or [F, H, W, C].
  std::vector<int64_t> latents;
  int64_t labelColumns = 0;
  /// The text states and the pooled text vector without the batch.
  std::vector<std::vector<int64_t>> contexts, pooled;
  /// Whether the function takes a guidance per sample (Flux.1-dev), SDXL's
  /// size and crop ids.
  bool guidance = false, timeIds = false;
};

std::string ruleShape(const std::vector<int64_t> &shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape)
    dims.push_back(d == kBatch ? "B" : std::to_string(d));
  return "[" + absl::StrJoin(dims, ", ") + "]";
}

/// Which reference forward() the model function is, from its inputs.
absl::StatusOr<Forward> forwardOf(func::FuncOp func) {
  Forward fw;
  std::string fn = "@" + func.getName().str();
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto input = func.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    if (!input)
      continue;
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(func.getArgument(i).getType()).getShape();
    std::vector<int64_t> sample(shape.begin() + 1, shape.end());
    switch (input.getKind()) {
    case InputKind::latents:
      fw.latents = sample;
      break;
    case InputKind::labels:
      fw.labelColumns = shape[1];
      break;
    case InputKind::context:
      fw.contexts.push_back(sample);
      break;
    case InputKind::pooled:
      fw.pooled.push_back(sample);
      break;
    case InputKind::guidance:
      fw.guidance = true;
      break;
    case InputKind::time_ids:
      fw.timeIds = true;
      break;
    default:
      break;
    }
  }
  if (fw.latents.empty())
    return absl::InvalidArgumentError(fn + " has no latents input");
  const std::vector<int64_t> &l = fw.latents;
  bool textOnly = fw.pooled.empty() && !fw.guidance && !fw.timeIds;
  bool sdxlInputs = fw.pooled.size() == 1 && fw.pooled[0].size() == 1 &&
                    !fw.guidance && fw.timeIds;
  if (l.size() == 3 && fw.labelColumns > 0 && fw.contexts.empty() && textOnly) {
    int64_t h = l[0], w = l[1], c = l[2];
    fw.family = Family::DiT;
    fw.name = "DiT's forward(x, t, y)";
    fw.inputs = {{"x", {kBatch, c, h, w}},
                 {"t", {kBatch}},
                 {"y", {kBatch}, /*labels=*/true}};
  } else if (l.size() == 4 && fw.labelColumns == 0 && fw.contexts.size() == 1 &&
             fw.contexts[0].size() == 2 && textOnly) {
    int64_t f = l[0], h = l[1], w = l[2], c = l[3];
    fw.family = Family::Wan;
    fw.name = "WanTransformer3DModel.forward";
    fw.inputs = {{"hidden_states", {kBatch, c, f, h, w}},
                 {"timestep", {kBatch}},
                 {"encoder_hidden_states",
                  {kBatch, fw.contexts[0][0], fw.contexts[0][1]}}};
  } else if (l.size() == 3 && fw.labelColumns == 0 && fw.contexts.size() == 1 &&
             fw.contexts[0].size() == 2 && fw.pooled.size() == 1 &&
             fw.pooled[0].size() == 1 && fw.guidance && l[0] % 2 == 0 &&
             l[1] % 2 == 0) {
    int64_t tokens = (l[0] / 2) * (l[1] / 2), packed = 4 * l[2];
    int64_t text = fw.contexts[0][0];
    fw.family = Family::Flux;
    fw.name = "FluxTransformer2DModel.forward";
    fw.inputs = {{"hidden_states", {kBatch, tokens, packed}},
                 {"encoder_hidden_states", {kBatch, text, fw.contexts[0][1]}},
                 {"pooled_projections", {kBatch, fw.pooled[0][0]}},
                 {"timestep", {kBatch}},
                 {"img_ids", {tokens, 3}},
                 {"txt_ids", {text, 3}},
                 {"guidance", {kBatch}}};
  } else if (l.size() == 3 && fw.labelColumns == 0 && fw.contexts.size() == 1 &&
             fw.contexts[0].size() == 2 && (textOnly || sdxlInputs)) {
    int64_t h = l[0], w = l[1], c = l[2];
    fw.family = Family::UNet;
    fw.name = "UNet2DConditionModel.forward";
    fw.inputs = {{"sample", {kBatch, c, h, w}},
                 {"timestep", {kBatch}},
                 {"encoder_hidden_states",
                  {kBatch, fw.contexts[0][0], fw.contexts[0][1]}}};
    if (sdxlInputs) {
      fw.inputs.push_back({"text_embeds", {kBatch, fw.pooled[0][0]}});
      fw.inputs.push_back({"time_ids", {kBatch, 6}});
    }
  } else {
    return absl::InvalidArgumentError(
        "--predict reads the inputs of DiT's, Wan's and Flux's forward() and "
        "of UNet2DConditionModel's; " +
        fn + "'s inputs are none of these");
  }
  std::vector<std::string> shapes;
  for (const TensorRule &rule : fw.inputs)
    shapes.push_back(rule.name + " " + ruleShape(rule.shape));
  fw.shapes = absl::StrJoin(shapes, ", ");
  return fw;
}

/// `values` of `shape` transposed so that output dimension i is input
/// dimension perm[i].
std::vector<float> permuted(const std::vector<float> &values,
                            std::vector<int64_t> shape,
                            const std::vector<int64_t> &perm) {
  std::vector<float> out(values.size());
  ::sd::rt::kernels::transpose(values.data(), out.data(),
                               static_cast<int32_t>(shape.size()), shape.data(),
                               perm.data());
  return out;
}

/// The inputs file's tensors, checked against the forward() and converted
/// to what sd's function takes.
struct PredictInputs {
  int64_t batch = 0;
  /// Channel-last latents, t in [0, 1], one-hot labels, the guidance,
  /// SDXL's size and crop ids, the contexts (text states, then the pooled
  /// vector).
  std::vector<float> latents, times, labels, guidance, timeIds;
  std::vector<std::vector<float>> contexts;
};

using TensorMap = std::map<std::string, const ckpt::SafetensorsTensor *>;

/// Checks the file's tensors against `fw.inputs`: names, dtypes, shapes (one
/// batch) and finite values.
absl::StatusOr<TensorMap> checkTensors(const std::string &path,
                                       const ckpt::SafetensorsFile &file,
                                       const Forward &fw) {
  for (const ckpt::SafetensorsTensor &tensor : file.tensors)
    if (llvm::none_of(fw.inputs, [&](const TensorRule &rule) {
          return rule.name == tensor.name;
        }))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' is not an input of %s", path, tensor.name, fw.name));
  TensorMap found;
  int64_t batch = 0;
  std::string batchFrom;
  for (const TensorRule &rule : fw.inputs) {
    const ckpt::SafetensorsTensor *tensor = file.find(rule.name);
    if (!tensor)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s has no tensor '%s' (%s: %s)", path, rule.name,
                          fw.name, fw.shapes));
    const std::vector<int64_t> &shape = tensor->shape;
    bool fits = shape.size() == rule.shape.size();
    for (size_t d = 0; fits && d < shape.size(); ++d)
      fits =
          rule.shape[d] == kBatch ? shape[d] >= 1 : shape[d] == rule.shape[d];
    if (!fits)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s, but the model's is %s", path,
          rule.name, shapeString(shape), ruleShape(rule.shape)));
    bool batched = !rule.shape.empty() && rule.shape[0] == kBatch;
    if (batched && batch != 0 && shape[0] != batch) {
      std::vector<int64_t> expected = shape;
      expected[0] = batch;
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s, but %s's batch makes it %s", path,
          rule.name, shapeString(shape), batchFrom, shapeString(expected)));
    }
    if (batched && batch == 0) {
      batch = shape[0];
      batchFrom = rule.name;
    }
    if (rule.labels && tensor->dtype != "I64")
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s' is %s; class labels are I64", path,
                          rule.name, tensor->dtype));
    if (!rule.labels && !ckpt::isFloatingDtype(tensor->dtype))
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s' is %s; it must be F32, F16, BF16 "
                          "or F64",
                          path, rule.name, tensor->dtype));
    for (float value : tensor->values)
      if (!std::isfinite(value))
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: tensor '%s' holds %g; inputs must be finite",
                            path, rule.name, value));
    found[rule.name] = tensor;
  }
  return found;
}

/// Timesteps divided by `scale` (the reference's [0, 1000) to sd's [0, 1]).
std::vector<float> scaledTimes(const std::vector<float> &values, double scale) {
  std::vector<float> times;
  for (float value : values)
    times.push_back(static_cast<float>(static_cast<double>(value) / scale));
  return times;
}

/// Flux's position ids: img_ids (0, row, column) over the packed grid and
/// txt_ids zero, as the pipeline makes them (sd builds RoPE from the grid).
absl::Status checkFluxIds(const std::string &path, const TensorMap &t,
                          const Forward &fw) {
  int64_t gridW = fw.latents[1] / 2;
  const std::vector<float> &img = t.at("img_ids")->values;
  for (size_t token = 0; token < img.size() / 3; ++token) {
    float expected[3] = {0.0f, static_cast<float>(token / gridW),
                         static_cast<float>(token % gridW)};
    for (int k = 0; k < 3; ++k)
      if (img[3 * token + k] != expected[k])
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: img_ids[%d] is (%g, %g, %g); sd's Flux takes the pipeline's "
            "ids (0, row, column) of its %d×%d grid: (%g, %g, %g)",
            path, token, img[3 * token], img[3 * token + 1], img[3 * token + 2],
            fw.latents[0] / 2, gridW, expected[0], expected[1], expected[2]));
  }
  const std::vector<float> &txt = t.at("txt_ids")->values;
  for (size_t i = 0; i < txt.size(); ++i)
    if (txt[i] != 0.0f)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: txt_ids[%d][%d] is %g; sd's Flux takes the pipeline's zero "
          "text ids",
          path, i / 3, i % 3, txt[i]));
  return absl::OkStatus();
}

absl::StatusOr<PredictInputs> readInputs(const std::string &path,
                                         const Forward &fw) {
  absl::StatusOr<ckpt::SafetensorsFile> file =
      readWholeSafetensors(path, "--predict file");
  if (!file.ok())
    return file.status();
  absl::StatusOr<TensorMap> found = checkTensors(path, *file, fw);
  if (!found.ok())
    return found.status();
  const TensorMap &t = *found;
  const std::vector<int64_t> &l = fw.latents;
  PredictInputs in;
  in.batch = t.at(fw.inputs[0].name)->shape[0];
  int64_t b = in.batch;
  switch (fw.family) {
  case Family::DiT: {
    in.latents =
        permuted(t.at("x")->values, {b, l[2], l[0], l[1]}, {0, 2, 3, 1});
    in.times = scaledTimes(t.at("t")->values, 1000);
    int64_t columns = fw.labelColumns;
    in.labels.assign(static_cast<size_t>(b * columns), 0.0f);
    for (int64_t n = 0; n < b; ++n) {
      float label = t.at("y")->values[n];
      if (!(label >= 0 && label < static_cast<float>(columns)))
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: label y[%d] is %g; the model's classes are 0 to %d, and %d "
            "the null class",
            path, n, label, columns - 2, columns - 1));
      in.labels[n * columns + static_cast<int64_t>(label)] = 1.0f;
    }
    break;
  }
  case Family::Wan:
    in.latents = permuted(t.at("hidden_states")->values,
                          {b, l[3], l[0], l[1], l[2]}, {0, 2, 3, 4, 1});
    in.times = scaledTimes(t.at("timestep")->values, 1000);
    in.contexts = {t.at("encoder_hidden_states")->values};
    break;
  case Family::Flux:
    if (absl::Status status = checkFluxIds(path, t, fw); !status.ok())
      return status;
    // [B, h, w, C, 2, 2] → [B, h, 2, w, 2, C] = [B, H, W, C].
    in.latents =
        permuted(t.at("hidden_states")->values,
                 {b, l[0] / 2, l[1] / 2, l[2], 2, 2}, {0, 1, 4, 2, 5, 3});
    in.times = scaledTimes(t.at("timestep")->values, 1);
    in.contexts = {t.at("encoder_hidden_states")->values,
                   t.at("pooled_projections")->values};
    in.guidance = t.at("guidance")->values;
    break;
  case Family::UNet:
    in.latents =
        permuted(t.at("sample")->values, {b, l[2], l[0], l[1]}, {0, 2, 3, 1});
    in.times = scaledTimes(t.at("timestep")->values, 1000);
    in.contexts = {t.at("encoder_hidden_states")->values};
    if (fw.timeIds) {
      in.contexts.push_back(t.at("text_embeds")->values);
      in.timeIds = t.at("time_ids")->values;
    }
    break;
  }
  return in;
}

/// sd's output [B, sample output shape] in the reference's layout.
std::pair<std::vector<float>, std::vector<int64_t>>
referenceOutput(const Forward &fw, const std::vector<float> &output, int64_t b,
                const std::vector<int64_t> &shape) {
  switch (fw.family) {
  case Family::DiT:
  case Family::UNet: {
    int64_t h = shape[0], w = shape[1], c = shape[2];
    return {permuted(output, {b, h, w, c}, {0, 3, 1, 2}), {b, c, h, w}};
  }
  case Family::Wan: {
    int64_t f = shape[0], h = shape[1], w = shape[2], c = shape[3];
    return {permuted(output, {b, f, h, w, c}, {0, 4, 1, 2, 3}),
            {b, c, f, h, w}};
  }
  case Family::Flux: {
    int64_t h = shape[0] / 2, w = shape[1] / 2, c = shape[2];
    // [B, h, 2, w, 2, C] → [B, h, w, C, 2, 2] = [B, h·w, 4C].
    return {permuted(output, {b, h, 2, w, 2, c}, {0, 1, 3, 5, 2, 4}),
            {b, h * w, 4 * c}};
  }
  }
  llvm_unreachable("every family has an output layout");
}

} // namespace

absl::Status mlir::sd::runPrediction(ModuleOp module,
                                     const SampleOptions &options) {
  // The options, the model's inputs, the weights and the inputs file, all
  // checked before anything compiles.
  if (absl::Status status = checkWeightOptions(options); !status.ok())
    return status;
  if (options.outputPath.empty())
    return absl::InvalidArgumentError(
        "--predict writes its output to --output=FILE.safetensors");
  if (!options.gridPath.empty())
    return absl::InvalidArgumentError(
        "--grid draws samples; --predict writes one output (--output)");
  if (absl::Status status = checkOutputPath(options.outputPath, "--output");
      !status.ok())
    return status;
  StringRef entry =
      module.lookupSymbol<func::FuncOp>("forward") ? "forward" : "denoise";
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return absl::InvalidArgumentError(
        "the model has no @forward or @denoise (sdgen writes them with "
        "--with-denoise)");
  absl::StatusOr<Forward> forward = forwardOf(func);
  if (!forward.ok())
    return forward.status();
  absl::StatusOr<WeightSource> source = readSampleWeights(module, options);
  if (!source.ok())
    return source.status();
  bool usedEma = false;
  absl::StatusOr<std::map<std::string, std::vector<float>>> weights =
      selectModelWeights(module, *source, options.ema, usedEma);
  if (!weights.ok())
    return weights.status();
  absl::StatusOr<PredictInputs> inputs =
      readInputs(options.predictPath, *forward);
  if (!inputs.ok())
    return inputs.status();

  // One call of the whole batch.
  PipelineOptions pipeline = options.pipeline;
  pipeline.batch = inputs->batch;
  absl::StatusOr<std::unique_ptr<DenoiseProgram>> program =
      DenoiseProgram::create(module, pipeline, options.device, entry);
  if (!program.ok())
    return program.status();
  if (absl::Status status = (*program)->setWeights(*weights); !status.ok())
    return status;
  if (!inputs->timeIds.empty())
    if (absl::Status status = (*program)->setTimeIds(inputs->timeIds);
        !status.ok())
      return status;
  llvm::outs() << "sdsample: " << options.modelPath << ", @" << entry << " on "
               << inputs->batch << " inputs from " << options.predictPath
               << ", mesh " << (*program)->mesh().toString() << "\n";
  llvm::outs() << "weights: " << source->description << (usedEma ? ", EMA" : "")
               << "\n";
  absl::StatusOr<std::vector<float>> output =
      (*program)->predict(inputs->latents, inputs->times, inputs->labels,
                          inputs->contexts, inputs->guidance);
  if (!output.ok())
    return output.status();
  if (options.device.process > 0)
    return absl::OkStatus();

  auto [out, shape] = referenceOutput(*forward, *output, inputs->batch,
                                      (*program)->sampleOutputShape());
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"model", llvm::sys::path::filename(options.modelPath).str()},
      {"weights", source->description + (usedEma ? " (EMA)" : "")},
      {"function", entry.str()}};
  absl::StatusOr<ckpt::WrittenFile> written = ckpt::writeSafetensors(
      options.outputPath, {{"out", shape, out.data()}}, metadata);
  if (!written.ok())
    return written.status();
  llvm::outs() << "wrote " << options.outputPath << ": out "
               << shapeString(shape) << "\n";
  return absl::OkStatus();
}
