//===- PredictRun.cpp - sdsample --predict: the network on given inputs ---===//
//
// One call of the model's @forward (or @denoise) on a mesh, on inputs named
// and laid out as the reference implementation's forward() takes them, the
// output written in the reference's layout. For DiT (facebookresearch/DiT's
// forward(x, t, y)):
//   x [B, C, H, W]  latents, NCHW (sd's are NHWC: transposed on the host);
//   t [B]           timesteps in DiT's [0, 1000) scale (sd's models embed
//                   t·1000 of a t in [0, 1]: divided by 1000);
//   y [B]           integer class labels, num_classes the null class (sd's
//                   models take one-hot rows);
//   out [B, C', H, W], C' = 2C with the learned sigma (@forward).
// Every input is checked before anything compiles: one error naming the
// tensor, its shape or dtype and what the model takes.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Driver/TrainModelFile.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/strings/str_format.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace ckpt = ::sd::ckpt;

namespace {

/// What the model function takes: its latents [B, H, W, C] (B dynamic or
/// static) and its labels' columns (classes + 1; 0 without labels).
struct ModelInputs {
  int64_t height = 0, width = 0, channels = 0, labelColumns = 0;
  bool hasContext = false;
};

absl::StatusOr<ModelInputs> modelInputs(func::FuncOp func) {
  ModelInputs in;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto input = func.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    if (!input)
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    switch (input.getKind()) {
    case InputKind::latents:
      if (type.getRank() != 4)
        return absl::InvalidArgumentError(
            "--predict reads image models' latents [B, H, W, C]; @" +
            func.getName().str() + "'s are " + shapeString(type.getShape()));
      in.height = type.getDimSize(1);
      in.width = type.getDimSize(2);
      in.channels = type.getDimSize(3);
      break;
    case InputKind::labels:
      in.labelColumns = type.getDimSize(1);
      break;
    case InputKind::context:
      in.hasContext = true;
      break;
    default:
      break;
    }
  }
  if (in.channels == 0)
    return absl::InvalidArgumentError("@" + func.getName().str() +
                                      " has no latents input");
  if (in.hasContext || in.labelColumns == 0)
    return absl::InvalidArgumentError(
        "--predict reads DiT's forward(x, t, y); @" + func.getName().str() +
        " takes text states, or no class labels (Flux and Wan inputs are "
        "not read yet)");
  return in;
}

/// The inputs file's tensors, checked against DiT's forward(x, t, y).
struct PredictInputs {
  int64_t batch = 0;
  /// NHWC latents, t / 1000, one-hot labels.
  std::vector<float> latents, times, labels;
};

absl::StatusOr<PredictInputs> readInputs(const std::string &path,
                                         const ModelInputs &model) {
  absl::StatusOr<ckpt::SafetensorsFile> file =
      readWholeSafetensors(path, "--predict file");
  if (!file.ok())
    return file.status();
  auto find =
      [&](const char *name) -> absl::StatusOr<const ckpt::SafetensorsTensor *> {
    if (const ckpt::SafetensorsTensor *tensor = file->find(name))
      return tensor;
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has no tensor '%s' (DiT's forward(x, t, y): x [B, C, H, W], t "
        "[B], y [B])",
        path, name));
  };
  for (const ckpt::SafetensorsTensor &tensor : file->tensors)
    if (tensor.name != "x" && tensor.name != "t" && tensor.name != "y")
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' is not an input of DiT's forward(x, t, y)", path,
          tensor.name));
  absl::StatusOr<const ckpt::SafetensorsTensor *> x = find("x");
  if (!x.ok())
    return x.status();
  absl::StatusOr<const ckpt::SafetensorsTensor *> t = find("t");
  if (!t.ok())
    return t.status();
  absl::StatusOr<const ckpt::SafetensorsTensor *> y = find("y");
  if (!y.ok())
    return y.status();

  const std::vector<int64_t> &xs = (*x)->shape;
  int64_t c = model.channels, h = model.height, w = model.width;
  if (xs.size() != 4 || xs[0] < 1 || xs[1] != c || xs[2] != h || xs[3] != w)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor 'x' has shape %s, but the model's is [B, %d, %d, %d]", path,
        shapeString(xs), c, h, w));
  int64_t b = xs[0];
  for (const ckpt::SafetensorsTensor *vector : {*t, *y})
    if (vector->shape != std::vector<int64_t>{b})
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s, but x's batch makes it [%d]", path,
          vector->name, shapeString(vector->shape), b));
  for (const ckpt::SafetensorsTensor *real : {*x, *t})
    if (!ckpt::isFloatingDtype(real->dtype))
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s' is %s; it must be F32, F16, BF16 "
                          "or F64",
                          path, real->name, real->dtype));
  if ((*y)->dtype != "I64")
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor 'y' is %s; class labels are I64", path, (*y)->dtype));

  PredictInputs in;
  in.batch = b;
  // NCHW → NHWC.
  in.latents.resize(static_cast<size_t>(b * h * w * c));
  const std::vector<float> &xv = (*x)->values;
  for (int64_t n = 0; n < b; ++n)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j)
          in.latents[((n * h + i) * w + j) * c + k] =
              xv[((n * c + k) * h + i) * w + j];
  for (float value : in.latents)
    if (!std::isfinite(value))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor 'x' holds %g; inputs must be finite", path, value));
  for (float value : (*t)->values) {
    if (!std::isfinite(value))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor 't' holds %g; timesteps must be finite", path, value));
    in.times.push_back(static_cast<float>(static_cast<double>(value) / 1000));
  }
  int64_t columns = model.labelColumns;
  in.labels.assign(static_cast<size_t>(b * columns), 0.0f);
  for (int64_t n = 0; n < b; ++n) {
    float label = (*y)->values[n];
    if (!(label >= 0 && label < static_cast<float>(columns)))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: label y[%d] is %g; the model's classes are 0 to %d, and %d "
          "the null class",
          path, n, label, columns - 2, columns - 1));
    in.labels[n * columns + static_cast<int64_t>(label)] = 1.0f;
  }
  return in;
}

} // namespace

absl::Status mlir::sd::runPrediction(ModuleOp module,
                                     const SampleOptions &options) {
  // The options, the model's inputs, the weights and the inputs file, all
  // checked before anything compiles.
  if (options.weightsPath.empty() == options.checkpointDir.empty())
    return absl::InvalidArgumentError(
        "give the weights with --weights=FILE.safetensors or "
        "--checkpoint-dir=DIR (one of them)");
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
  absl::StatusOr<ModelInputs> model = modelInputs(func);
  if (!model.ok())
    return model.status();
  absl::StatusOr<WeightSource> source =
      options.weightsPath.empty() ? readLatestCheckpoint(options.checkpointDir)
                                  : readWeightsFile(options.weightsPath);
  if (!source.ok())
    return source.status();
  bool usedEma = false;
  absl::StatusOr<std::map<std::string, std::vector<float>>> weights =
      selectModelWeights(module, *source, options.ema, usedEma);
  if (!weights.ok())
    return weights.status();
  absl::StatusOr<PredictInputs> inputs =
      readInputs(options.predictPath, *model);
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
  llvm::outs() << "sdsample: " << options.modelPath << ", @" << entry << " on "
               << inputs->batch << " inputs from " << options.predictPath
               << ", mesh " << (*program)->mesh().toString() << "\n";
  llvm::outs() << "weights: " << source->description << (usedEma ? ", EMA" : "")
               << "\n";
  absl::StatusOr<std::vector<float>> output =
      (*program)->predict(inputs->latents, inputs->times, inputs->labels);
  if (!output.ok())
    return output.status();
  if (options.device.process > 0)
    return absl::OkStatus();

  // NHWC → NCHW, as the reference returns it.
  const std::vector<int64_t> &shape = (*program)->sampleOutputShape();
  int64_t b = inputs->batch, h = shape[0], w = shape[1], c = shape[2];
  std::vector<float> out(static_cast<size_t>(b * c * h * w));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t k = 0; k < c; ++k)
          out[((n * c + k) * h + i) * w + j] =
              (*output)[((n * h + i) * w + j) * c + k];
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"model", llvm::sys::path::filename(options.modelPath).str()},
      {"weights", source->description + (usedEma ? " (EMA)" : "")},
      {"function", entry.str()}};
  absl::StatusOr<ckpt::WrittenFile> written = ckpt::writeSafetensors(
      options.outputPath, {{"out", {b, c, h, w}, out.data()}}, metadata);
  if (!written.ok())
    return written.status();
  llvm::outs() << "wrote " << options.outputPath << ": out "
               << shapeString({b, c, h, w}) << "\n";
  return absl::OkStatus();
}
