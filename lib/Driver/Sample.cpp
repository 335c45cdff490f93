//===- Sample.cpp - The config's sampling keys ----------------------------===//
//
// The sampling keys of a MaxDiffusion-style config file, for sdsample. The
// samplers are sd/Sampling; the model's @denoise on a mesh and sdsample's
// run are DenoiseProgram.cpp and SampleRun.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "sd/Sharding/YamlDiagnostics.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include "absl/strings/str_format.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::sampling;

//===----------------------------------------------------------------------===//
// The config's sampling keys
//===----------------------------------------------------------------------===//

absl::StatusOr<SamplingConfig>
mlir::sd::readSamplingConfig(const std::string &path) {
  absl::StatusOr<std::string> text = ::sd::readYamlFile(path, "config file");
  if (!text.ok())
    return text.status();
  std::string label = llvm::sys::path::filename(path).str();
  if (absl::Status status = ::sd::checkYamlStructure(*text, label);
      !status.ok())
    return status;
  llvm::SourceMgr sourceMgr;
  // The first syntax error, as `FILE:LINE: message`.
  struct FirstError {
    std::string label;
    std::optional<absl::Status> status;
  } syntaxError{label, std::nullopt};
  sourceMgr.setDiagHandler(
      [](const llvm::SMDiagnostic &diag, void *context) {
        auto *first = static_cast<FirstError *>(context);
        if (!first->status)
          first->status = ::sd::yamlDiagnosticStatus(diag, first->label);
      },
      &syntaxError);
  std::optional<absl::Status> &syntax = syntaxError.status;
  llvm::yaml::Stream stream(*text, sourceMgr);
  SamplingConfig config;
  llvm::yaml::document_iterator document = stream.begin();
  auto *root =
      document != stream.end()
          ? llvm::dyn_cast_or_null<llvm::yaml::MappingNode>(document->getRoot())
          : nullptr;
  if (!root)
    return syntax.value_or(absl::InvalidArgumentError(
        label + ": a config file is a mapping of keys to values"));
  for (llvm::yaml::KeyValueNode &entry : *root) {
    auto *key = llvm::dyn_cast_or_null<llvm::yaml::ScalarNode>(entry.getKey());
    if (!key)
      continue;
    llvm::SmallString<32> keyStorage, valueStorage;
    llvm::StringRef name = key->getValue(keyStorage);
    if (name != "num_inference_steps" && name != "guidance_scale" &&
        name != "prediction_type")
      continue;
    auto *value =
        llvm::dyn_cast_or_null<llvm::yaml::ScalarNode>(entry.getValue());
    unsigned line =
        sourceMgr.getLineAndColumn(entry.getValue()->getSourceRange().Start)
            .first;
    auto bad = [&](llvm::StringRef what) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: %s must be %s", label, line, name.str(), what.str()));
    };
    if (!value)
      return bad("a scalar");
    llvm::StringRef text = value->getValue(valueStorage).trim();
    if (name == "num_inference_steps") {
      int64_t steps;
      if (text.getAsInteger(10, steps) || steps < 1 ||
          steps > kMaxSamplingSteps)
        return bad(absl::StrFormat("an integer in [1, %d], not '%s'",
                                   kMaxSamplingSteps, text.str()));
      config.steps = steps;
    } else if (name == "guidance_scale") {
      double scale;
      if (text.getAsDouble(scale) || !std::isfinite(scale))
        return bad("a finite number, not '" + text.str() + "'");
      config.guidanceScale = scale;
    } else {
      config.prediction = parsePrediction(text);
      if (!config.prediction)
        return bad("epsilon, v_prediction or flow, not '" + text.str() + "'");
    }
  }
  if (syntax)
    return *syntax;
  return config;
}
