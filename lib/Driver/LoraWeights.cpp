//===- LoraWeights.cpp - LoRA adapters merged into a sampler's weights ----===//
//
// sdsample --lora: a file of adapters (sdrun --export with LoRA, or PEFT /
// diffusers naming) merged into the base weights before they are loaded,
// W + scale·(alpha/r)·B·A per target module, as diffusers' fuse_lora does.
// Every tensor of the file is checked against the model first: an adapter
// whose base or shape the model does not have is an error, not skipped.
//
//===----------------------------------------------------------------------===//

#include "sd/Checkpoint/Exchange.h"
#include "sd/Driver/Sample.h"

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/Support/JSON.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

struct Pair {
  const ::sd::ckpt::SafetensorsTensor *a = nullptr, *b = nullptr;
};

/// lora_alpha and r from the file's PEFT config (kLoraMetadataKey), if it
/// has one.
absl::Status readLoraConfig(const std::string &path,
                            const std::map<std::string, std::string> &metadata,
                            std::optional<double> &alpha,
                            std::optional<int64_t> &rank) {
  auto it = metadata.find(::sd::ckpt::kLoraMetadataKey);
  if (it == metadata.end())
    return absl::OkStatus();
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(it->second);
  const llvm::json::Object *object = json ? json->getAsObject() : nullptr;
  if (!object) {
    if (!json)
      llvm::consumeError(json.takeError());
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: metadata '%s' is not a JSON object", path,
                        ::sd::ckpt::kLoraMetadataKey));
  }
  // PEFT's LoraConfig fields, or diffusers' pipeline files' prefixed ones.
  auto field = [&](llvm::StringRef name) -> const llvm::json::Value * {
    if (const llvm::json::Value *value = object->get(name))
      return value;
    return object->get(("transformer." + name).str());
  };
  if (const llvm::json::Value *a = field("lora_alpha"))
    alpha = a->getAsNumber();
  if (const llvm::json::Value *r = field("r"))
    rank = r->getAsInteger();
  // Scalings sd does not apply are refused rather than merged wrongly.
  const llvm::json::Value *rslora = field("use_rslora");
  bool patterns = false;
  for (llvm::StringRef name : {"rank_pattern", "alpha_pattern"})
    if (const llvm::json::Value *pattern = field(name))
      if (const llvm::json::Object *entries = pattern->getAsObject())
        patterns |= !entries->empty();
  if ((rslora && rslora->getAsBoolean().value_or(false)) || patterns)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: metadata '%s' asks for rsLoRA scaling or per-module rank or "
        "alpha patterns, which sdsample does not apply",
        path, ::sd::ckpt::kLoraMetadataKey));
  if ((alpha && !(*alpha > 0 && std::isfinite(*alpha))) || (rank && *rank < 1))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: metadata '%s' has lora_alpha %g and r %d; both must be "
        "positive",
        path, ::sd::ckpt::kLoraMetadataKey, alpha.value_or(1),
        rank.value_or(1)));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::string>
mlir::sd::mergeLoraFile(const std::string &path, double scale,
                        const std::vector<ParameterShape> &params,
                        std::map<std::string, std::vector<float>> &weights) {
  absl::StatusOr<::sd::ckpt::SafetensorsFile> file =
      readWholeSafetensors(path, "--lora file");
  if (!file.ok())
    return file.status();
  std::optional<double> alpha;
  std::optional<int64_t> configRank;
  if (absl::Status status =
          readLoraConfig(path, file->metadata, alpha, configRank);
      !status.ok())
    return status;
  // diffusers' pipeline files prefix the transformer's names.
  bool prefixed = !file->tensors.empty() &&
                  llvm::all_of(file->tensors, [](const auto &tensor) {
                    return absl::StartsWith(tensor.name, "transformer.");
                  });
  std::map<std::string, Pair> pairs;
  for (const ::sd::ckpt::SafetensorsTensor &tensor : file->tensors) {
    std::string name = prefixed ? tensor.name.substr(12) : tensor.name;
    bool isA = absl::EndsWith(name, ".lora_A.weight");
    if (!isA && !absl::EndsWith(name, ".lora_B.weight"))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' is not a LoRA adapter (X.lora_A.weight or "
          "X.lora_B.weight)",
          path, tensor.name));
    if (!::sd::ckpt::isFloatingDtype(tensor.dtype))
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: tensor '%s' is %s; adapters are read from "
                          "F32, F16, BF16 or F64",
                          path, tensor.name, tensor.dtype));
    auto bad =
        llvm::find_if(tensor.values, [](float v) { return !std::isfinite(v); });
    if (bad != tensor.values.end())
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' holds %g at element %d; weights must be finite",
          path, tensor.name, *bad, bad - tensor.values.begin()));
    std::string module = name.substr(0, name.size() - strlen(".lora_A.weight"));
    (isA ? pairs[module].a : pairs[module].b) = &tensor;
  }
  if (pairs.empty())
    return absl::InvalidArgumentError(path + " holds no LoRA adapter");
  int64_t rankSeen = 0;
  for (const auto &[module, pair] : pairs) {
    if (!pair.a || !pair.b)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: module '%s' has lora_%s.weight but no lora_%s.weight", path,
          module, pair.a ? "A" : "B", pair.a ? "B" : "A"));
    std::string base = module + ".weight";
    auto param = llvm::find_if(
        params, [&](const ParameterShape &p) { return p.name == base; });
    if (param == params.end())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: module '%s' has adapters, but the model has "
                          "no parameter '%s'",
                          path, module, base));
    int64_t in = param->shape.back();
    int64_t elements = 1;
    for (int64_t size : param->shape)
      elements *= size;
    const std::vector<int64_t> &aShape = pair.a->shape, &bShape = pair.b->shape;
    int64_t rank = aShape.size() == 2 ? aShape[0] : -1;
    if (rank < 1 || aShape[1] != in || bShape.size() != 2 ||
        bShape[1] != rank || bShape[0] * in != elements)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the adapters of '%s' are [%s] and [%s], but its weight %s "
          "needs lora_A [r, %d] and lora_B [%d, r]",
          path, module, absl::StrJoin(aShape, ", "),
          absl::StrJoin(bShape, ", "), shapeString(param->stored), in,
          elements / in));
    if (configRank && rank != *configRank)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the adapters of '%s' have rank %d, its metadata says r %d", path,
          module, rank, *configRank));
    rankSeen = rank;
    double factor = scale * alpha.value_or(double(rank)) / double(rank);
    ::sd::ckpt::mergeLoraPair(weights.at(base).data(), pair.a->values.data(),
                              pair.b->values.data(), elements / in, in, rank,
                              factor);
  }
  return absl::StrFormat(
      "LoRA: %s, %d modules, rank %d, alpha %g%s, merged with scale %g", path,
      pairs.size(), rankSeen, alpha.value_or(double(rankSeen)),
      alpha ? "" : " (no PEFT metadata: alpha = r)", scale);
}
