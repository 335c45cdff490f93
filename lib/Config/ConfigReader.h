//===- ConfigReader.h - The YAML reader of run configs ----------*- C++ -*-===//
//
// The reader behind parseRunConfig and applyOverrides (RunConfig.cpp), with
// the readers of the mapping-valued keys (timestep_bias, lora_config) in
// ConfigMappings.cpp. Internal to lib/Config.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CONFIG_CONFIGREADER_H
#define SD_LIB_CONFIG_CONFIGREADER_H

#include "ConfigKeys.h"
#include "sd/Config/RunConfig.h"
#include "sd/Config/Settings.h"
#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sd::detail {

namespace yaml = llvm::yaml;

/// Reads one YAML text into a RunConfig: a whole config file, or the value
/// of one command-line override. llvm::yaml reports syntax errors through
/// the SourceMgr; the handler keeps the first one so it becomes the
/// returned status instead of being printed.
class ConfigReader {
public:
  /// withLines: messages say `label:line:` (a file) or only `label:` (the
  /// command line, where lines mean nothing).
  ConfigReader(std::string_view text, std::string_view label, bool withLines,
               RunConfig &config)
      : text(text), label(label), withLines(withLines), config(config) {
    sourceMgr.setDiagHandler(&ConfigReader::captureDiagnostic, this);
  }

  absl::Status readFile();
  absl::Status readOverride(std::string_view key);

private:
  static void captureDiagnostic(const llvm::SMDiagnostic &diag, void *ctx) {
    auto *self = static_cast<ConfigReader *>(ctx);
    if (!self->syntaxError)
      self->syntaxError =
          yamlDiagnosticStatus(diag, self->label, self->withLines);
  }

  /// `label:line` of a node (`label` alone without lines or location).
  std::string where(const yaml::Node *node) const {
    // An empty value's location is the token after it (the next key); its
    // own key's line is the one to fix.
    if (currentKey && (!node || llvm::isa<yaml::NullNode>(node)))
      node = currentKey;
    llvm::SMLoc loc = node ? node->getSourceRange().Start : llvm::SMLoc();
    if (!withLines || !loc.isValid())
      return label;
    return absl::StrFormat("%s:%d", label, sourceMgr.FindLineNumber(loc));
  }

  /// `where: key: message`; a pending syntax error wins, since a complaint
  /// about a half-parsed node would only confuse.
  absl::Status error(const yaml::Node *node, std::string_view key,
                     std::string_view message) const {
    if (syntaxError)
      return *syntaxError;
    if (key.empty())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s", where(node), message));
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s: %s", where(node), key, message));
  }

  absl::Status pending() const {
    return syntaxError ? *syntaxError : absl::OkStatus();
  }

  /// A number (T = double) or an integer (T = int64_t), written plain.
  template <typename T>
  absl::StatusOr<T> readNumeric(std::string_view key, yaml::Node *node);
  absl::StatusOr<int64_t> readInteger(std::string_view key, yaml::Node *node) {
    return readNumeric<int64_t>(key, node);
  }
  absl::StatusOr<bool> readBool(std::string_view key, yaml::Node *node);
  absl::StatusOr<std::string> readString(std::string_view key,
                                         yaml::Node *node);
  absl::StatusOr<std::vector<std::string>> readNames(std::string_view key,
                                                     yaml::Node *node);
  absl::StatusOr<FlashBlockSizes> readFlashSizes(std::string_view key,
                                                 yaml::Node *node);
  absl::StatusOr<LoraConfig> readLoraConfig(std::string_view key,
                                            yaml::Node *node);
  absl::StatusOr<TimestepBiasConfig> readTimestepBias(std::string_view key,
                                                      yaml::Node *node);
  absl::StatusOr<FlashBlockSizes> readFlashJson(std::string_view key,
                                                yaml::Node *node,
                                                const std::string &json);
  absl::Status readRules(std::string_view rulesKey, std::string_view rulesText,
                         std::string_view where);
  absl::StatusOr<ModelKeyValue> readModelKey(const ModelKey &model,
                                             yaml::Node *node);

  /// Checks the value of `row`'s key and stores it in the row's field.
  template <typename T>
  absl::Status store(const SettingRow &row, std::optional<T> RunConfig::*field,
                     yaml::Node *value);
  absl::Status store(const SettingRow &row, MeshAxisField field,
                     yaml::Node *value);
  absl::Status store(const SettingRow &row, std::monostate, yaml::Node *value);
  /// `describe(value) requirement` when `number` breaks `row`'s.
  absl::Status checkNumber(const SettingRow &row, double number,
                           yaml::Node *value) const;

  /// Stores the value of a key sd uses; `known` is false for other keys.
  /// A key that chooses what is trained is also stored (in modelKeys), but
  /// `known` is false: sd does not use it.
  absl::Status setValue(std::string_view key, yaml::Node *value, bool &known);

  std::string text;
  std::string label;
  bool withLines;
  RunConfig &config;
  llvm::SourceMgr sourceMgr;
  std::optional<absl::Status> syntaxError;
  /// The key whose value is being read, in a file.
  const yaml::Node *currentKey = nullptr;
};

} // namespace sd::detail

#endif // SD_LIB_CONFIG_CONFIGREADER_H
