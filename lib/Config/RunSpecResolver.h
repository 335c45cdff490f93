//===- RunSpecResolver.h - resolveRunSpec's steps, shared by its files -*- C++
//-*-===//
//
// The Resolver that resolveRunSpec runs (RunSpec.cpp: the mesh, batch,
// rules, outputs, model and budgets; RunSpecTraining.cpp: the remat
// policy, the optimizer, fine-tuning and what the steps train on), and the
// helpers its steps share. Internal to lib/Config.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CONFIG_RUNSPECRESOLVER_H
#define SD_LIB_CONFIG_RUNSPECRESOLVER_H

#include "sd/Config/RunSpec.h"
#include "sd/Config/Settings.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

#include "llvm/Support/Path.h"

#include <optional>
#include <string>
#include <string_view>

namespace sd::detail {

/// `%g`: 0.3, 1.2, 8.
inline std::string shortDouble(double value) {
  return absl::StrFormat("%g", value);
}

inline absl::Status invalid(const std::string &message) {
  return absl::InvalidArgumentError(message);
}

using F = RunSpecFlags;
using C = RunConfig;

/// A setting parsed from the string setting `name`: its value, where the
/// string came from.
template <typename T>
Setting<T> parsedSetting(const Setting<std::string> &name, T value) {
  Setting<T> setting(std::move(value));
  setting.source = name.source;
  setting.origin = name.origin;
  return setting;
}

template <typename T> struct Identity { using type = T; };
template <typename T> using NonDeduced = typename Identity<T>::type;

/// Builds a RunSpec step by step; each step may fail with the message for
/// the first bad value.
class Resolver {
public:
  Resolver(const RunSpecFlags &flags, const RunConfig &file, bool hasConfig,
           const HostInfo &host)
      : flags(flags), file(file), hasConfig(hasConfig), host(host) {}

  absl::StatusOr<RunSpec> resolve();

private:
  absl::Status resolveMesh();
  absl::Status resolveBatch();
  absl::Status resolveRules();
  absl::Status resolveRemat();
  absl::Status resolveOptimizer();
  absl::Status resolveFineTune();
  absl::Status resolveOutputs();
  absl::Status resolveTrace();
  absl::Status resolveModel();
  absl::Status resolveBudgets();
  absl::Status resolveData();
  absl::Status resolveTimestepBias();
  absl::Status checkRunFlags();
  void warnIgnoredKeys();

  /// "file.yml:12" or "command line" for a key the config set; the file's
  /// name for a key it did not set (the setting then follows from another
  /// key of the file).
  std::string configSource(std::string_view key) const {
    std::string origin = file.originOf(key);
    return llvm::sys::path::filename(origin.empty() ? file.fileName : origin)
        .str();
  }

  /// The flag when it was given, else the config's value when set, else
  /// `fallback`.
  /// T is deduced from `flag` alone, so that std::nullopt and literals fit
  /// the other arguments.
  template <typename T>
  Setting<T> pick(const std::optional<T> &flag, std::string_view flagName,
                  std::string_view key,
                  const std::optional<NonDeduced<T>> &fromConfig,
                  NonDeduced<T> fallback) const {
    Setting<T> setting(std::move(fallback));
    if (flag) {
      setting.value = *flag;
      setting.source = SettingSource::Flag;
      setting.origin = absl::StrFormat("--%s", flagName);
    } else if (fromConfig) {
      setting.value = *fromConfig;
      setting.source = SettingSource::Config;
      setting.origin = configSource(key);
    }
    return setting;
  }

  /// pick for the setting of the row whose key fills `keyField`: its flag
  /// (named as the row names it), else `fromConfig` (the key's value, or
  /// one the caller derived from it), else `fallback`.
  template <typename T>
  Setting<T> pick(std::optional<T> RunSpecFlags::*flagField,
                  std::optional<T> RunConfig::*keyField,
                  const std::optional<NonDeduced<T>> &fromConfig,
                  NonDeduced<T> fallback) const {
    const SettingRow &row = *findKeyRow(KeyField(keyField));
    return pick(flags.*flagField, row.flag, row.key, fromConfig,
                std::move(fallback));
  }
  template <typename T>
  Setting<T> pick(std::optional<T> RunSpecFlags::*flagField,
                  std::optional<T> RunConfig::*keyField,
                  NonDeduced<T> fallback) const {
    return pick(flagField, keyField, file.*keyField, std::move(fallback));
  }
  /// pick for a flag without a config key.
  template <typename T>
  Setting<T> pick(std::optional<T> RunSpecFlags::*flagField,
                  NonDeduced<T> fallback) const {
    const SettingRow &row = *findFlagRow(FlagField(flagField));
    return pick(flags.*flagField, row.flag, "", std::nullopt,
                std::move(fallback));
  }

  const RunSpecFlags &flags;
  const RunConfig &file;
  bool hasConfig;
  const HostInfo &host;
  RunSpec spec;
};

} // namespace sd::detail

#endif // SD_LIB_CONFIG_RUNSPECRESOLVER_H
