//===- SampleWeights.cpp - sdsample's weights: files, checkpoints --------===//
//
// The weights sdsample (and sdrun's --init-from of a denoiser) reads: a
// safetensors file or the latest checkpoint of a run, matched to the
// parameters of the module's @denoise and checked against them (shapes,
// the tables the model computes itself, EMA or raw) before anything
// compiles. The run that uses them is SampleRun.cpp.
//
//===----------------------------------------------------------------------===//

#include "SampleWeights.h"

#include "sd/Driver/MemoryPlan.h"
#include "sd/Driver/Pretrained.h"
#include "sd/Driver/ReferenceTables.h"
#include "sd/Driver/Sample.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Exchange.h"
#include "sd/Checkpoint/Safetensors.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "absl/strings/str_format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::detail;
using namespace mlir::sd::sampling;

namespace ckpt = ::sd::ckpt;

absl::StatusOr<ckpt::SafetensorsFile>
mlir::sd::readWholeSafetensors(const std::string &path, llvm::StringRef what) {
  // A FIFO would block and /dev/zero never end.
  if (absl::Status status = ::sd::checkRegularFile(path, what); !status.ok())
    return status;
  // A file larger than the machine cannot be loaded whole.
  return ckpt::readSafetensors(path,
                               static_cast<uint64_t>(machineMemoryBytes()));
}

absl::StatusOr<WeightSource>
mlir::sd::readWeightsFile(const std::string &path) {
  // One file, or the shards a diffusers index names (each holding what its
  // weight_map gives it, no tensor in two shards).
  std::vector<std::string> files = {path};
  std::map<std::string, std::vector<std::string>> expected;
  if (llvm::StringRef(path).ends_with(".index.json")) {
    if (absl::Status status = ::sd::checkRegularFile(path, "weights index");
        !status.ok())
      return status;
    absl::StatusOr<ckpt::ShardIndex> index = ckpt::readShardIndex(path);
    if (!index.ok())
      return index.status();
    files = index->files;
    expected = index->tensorsOf;
  }
  WeightSource source;
  source.description = path;
  for (const std::string &name : files) {
    absl::StatusOr<ckpt::SafetensorsFile> file =
        readWholeSafetensors(name, "weights file");
    if (!file.ok())
      return file.status();
    if (absl::Status status = ckpt::checkLayoutOf(name, file->metadata);
        !status.ok())
      return status;
    for (const std::string &tensor : expected[name])
      if (!file->find(tensor))
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s maps tensor '%s' to %s, which does not hold it", path, tensor,
            llvm::sys::path::filename(name).str()));
    for (ckpt::SafetensorsTensor &tensor : file->tensors) {
      if (source.tensors.count(tensor.name))
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' is in two shards (%s)", path, tensor.name, name));
      source.shapes[tensor.name] = tensor.shape;
      source.dtypes[tensor.name] = tensor.dtype;
      source.tensors[tensor.name] = std::move(tensor.values);
    }
  }
  return source;
}

absl::Status mlir::sd::checkWeightOptions(const SampleOptions &options) {
  if (!options.weightsPath.empty() && !options.checkpointDir.empty())
    return absl::InvalidArgumentError(
        "give the weights with --weights=FILE.safetensors or "
        "--checkpoint-dir=DIR (one of them)");
  if (options.weightsPath.empty() && options.checkpointDir.empty() &&
      options.pretrained.empty())
    return absl::InvalidArgumentError(
        "give the weights with --weights=FILE.safetensors, "
        "--checkpoint-dir=DIR or a config's pretrained_model_name_or_path");
  return absl::OkStatus();
}

absl::StatusOr<WeightSource>
mlir::sd::readSampleWeights(ModuleOp module, const SampleOptions &options) {
  if (!options.weightsPath.empty())
    return readWeightsFile(options.weightsPath);
  if (!options.checkpointDir.empty())
    return readLatestCheckpoint(options.checkpointDir);
  absl::StatusOr<std::string> weights = pretrainedWeightsFor(
      module, options.pretrained, options.pretrainedOrigin);
  if (!weights.ok())
    return weights.status();
  return readWeightsFile(*weights);
}

absl::StatusOr<WeightSource>
mlir::sd::readLatestCheckpoint(const std::string &dir) {
  if (!llvm::sys::fs::is_directory(dir))
    return absl::NotFoundError("--checkpoint-dir='" + dir +
                               "' is not a directory");
  absl::StatusOr<std::vector<std::string>> existing =
      ckpt::listCheckpoints(dir);
  if (!existing.ok())
    return existing.status();
  if (existing->empty())
    return absl::NotFoundError("no complete checkpoint in '" + dir + "'");
  absl::StatusOr<ckpt::LoadedCheckpoint> loaded =
      ckpt::loadCheckpoint(existing->back());
  if (!loaded.ok())
    return loaded.status();
  WeightSource source;
  source.description =
      absl::StrFormat("%s (step %d)", loaded->path, loaded->meta.step);
  source.checkpoint = true;
  for (ckpt::LoadedTensor &tensor : loaded->tensors) {
    source.shapes[tensor.name] = tensor.globalShape;
    source.tensors[tensor.name] = std::move(tensor.values);
  }
  return source;
}

namespace mlir::sd::detail {

FailureOr<std::vector<ParameterShape>> denoiseParameters(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("denoise");
  if (!func)
    return module.emitError()
           << "the model has no @denoise (sdgen writes it with "
              "--with-denoise)";
  std::vector<ParameterShape> params;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto param = func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
    if (!param)
      continue;
    auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type || !type.hasStaticShape())
      return func.emitError() << "parameter '" << param.getName().getValue()
                              << "' is not a statically shaped tensor";
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    ArrayRef<int64_t> stored = param.getStoredShape();
    params.push_back(
        {param.getName().str(), shape,
         stored.empty() ? shape
                        : std::vector<int64_t>(stored.begin(), stored.end())});
  }
  return params;
}

constexpr llvm::StringLiteral kEmaPrefix = "ema ";

absl::Status checkComputedTensorsOf(ModuleOp module,
                                    const WeightSource &source) {
  for (const ComputedTensor &table : computedTensors(module)) {
    auto it = source.tensors.find(table.name);
    if (it == source.tensors.end())
      continue;
    if (absl::Status status =
            checkComputedTensor(table, source.shapes.at(table.name), it->second,
                                source.description);
        !status.ok())
      return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::vector<float>>>
selectWeightsOf(const WeightSource &source,
                const std::vector<ParameterShape> &params,
                std::optional<bool> ema, bool &usedEma) {
  if (params.empty())
    return absl::InvalidArgumentError("@denoise has no parameters");
  bool hasEma = source.tensors.count(kEmaPrefix.str() + params.front().name);
  if (ema.value_or(false) && !hasEma)
    return absl::InvalidArgumentError(
        source.description + " has no EMA weights (such as '" +
        kEmaPrefix.str() + params.front().name + "'): " +
        (source.checkpoint
             ? "train with ema_decay (--ema-decay), or sample the raw "
               "weights with --no-ema"
             : "a file of sdrun --export-ema holds them under the "
               "parameters' own names and is sampled without --ema"));
  usedEma = ema.value_or(hasEma);
  // A LoRA run's checkpoints hold its adapters, not the frozen base.
  if (source.checkpoint && !source.tensors.count(params.front().name) &&
      llvm::any_of(source.tensors, [](const auto &tensor) {
        return llvm::StringRef(tensor.first).ends_with(".lora_A.weight");
      }))
    return absl::InvalidArgumentError(
        source.description +
        " holds LoRA adapters without the frozen base model: sample with "
        "--weights=BASE.safetensors --lora=ADAPTERS.safetensors (sdrun "
        "--export writes a LoRA run's adapters)");
  std::map<std::string, std::vector<float>> weights;
  for (const auto &[name, shape, stored] : params) {
    std::string key = usedEma ? kEmaPrefix.str() + name : name;
    auto it = source.tensors.find(key);
    if (it == source.tensors.end())
      return absl::InvalidArgumentError(
          source.description + " has no tensor '" + key + "'" +
          (usedEma ? " (the EMA weights of parameter '" + name + "')"
                   : " (a parameter of the model)"));
    if (auto dtype = source.dtypes.find(key);
        dtype != source.dtypes.end() && !ckpt::isFloatingDtype(dtype->second))
      return absl::InvalidArgumentError(
          source.description + ": tensor '" + key + "' is " + dtype->second +
          "; weights are read from F32, F16, BF16 or F64");
    // The reference layout, or sd's view of it (same elements, same order).
    const std::vector<int64_t> &given = source.shapes.at(key);
    if (given != shape && given != stored)
      return absl::InvalidArgumentError(
          source.description + ": tensor '" + key + "' has shape " +
          shapeString(given) + ", but the model's is " + shapeString(stored));
    auto bad =
        llvm::find_if(it->second, [](float v) { return !std::isfinite(v); });
    if (bad != it->second.end())
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' holds %g at element %d; weights must be finite",
          source.description, key, *bad, bad - it->second.begin()));
    weights[name] = it->second;
  }
  return weights;
}

} // namespace mlir::sd::detail

absl::StatusOr<std::map<std::string, std::vector<float>>>
mlir::sd::selectWeights(const WeightSource &source,
                        const DenoiseProgram &program, std::optional<bool> ema,
                        bool &usedEma) {
  return selectWeightsOf(source, program.parameters(), ema, usedEma);
}

absl::StatusOr<std::optional<Prediction>>
mlir::sd::modelPrediction(ModuleOp module) {
  for (llvm::StringRef name : {"denoise", "loss"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    // (The verifier accepts only a #sd.prediction here.)
    auto attr = func->getAttrOfType<PredictionTypeAttr>(
        SDDialect::kPredictionTypeAttrName);
    if (!attr)
      continue;
    switch (attr.getValue()) {
    case PredictionType::epsilon:
      return Prediction::Epsilon;
    case PredictionType::v_prediction:
      return Prediction::VPrediction;
    case PredictionType::flow:
      return Prediction::Flow;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::map<std::string, std::vector<float>>>
mlir::sd::selectModelWeights(ModuleOp module, const WeightSource &source,
                             std::optional<bool> ema, bool &usedEma) {
  FailureOr<std::vector<ParameterShape>> params = denoiseParameters(module);
  if (failed(params))
    return absl::InvalidArgumentError("could not read @denoise's parameters");
  if (absl::Status status = checkComputedTensorsOf(module, source);
      !status.ok())
    return status;
  return selectWeightsOf(source, *params, ema, usedEma);
}
