//===- Settings.h - The table of the tools' settings ------------*- C++ -*-===//
//
// Every setting of sdopt, sdrun and sdsample declared once, as a row: the
// flag that sets it (if any) and the tools that have the flag, the config
// key that sets it (if any), the typed fields of RunSpecFlags and RunConfig
// they fill, the requirement a value must meet (with the text messages
// quote) and the help. The tools' llvm::cl flags (sd/Driver/ToolFlags.h),
// the config reader (RunConfig.h) and the resolver's flag checks
// (RunSpec.h) are all made by walking these rows. MLIR-free and free of
// llvm::cl.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_SETTINGS_H
#define SD_CONFIG_SETTINGS_H

#include "sd/Config/RunConfig.h"
#include "sd/Config/RunSpec.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sd {

/// The tools a flag belongs to, a bit each.
enum SettingTools : unsigned {
  kSdopt = 1,
  kSdrun = 2,
  kSdsample = 4,
  kTrainTools = kSdopt | kSdrun,
  kDeviceTools = kSdrun | kSdsample,
  kAllTools = kSdopt | kSdrun | kSdsample,
};

/// The --help category of a flag. Attention flags are listed with the
/// training step's where a tool has one, else with the mesh's.
enum class FlagGroup { Mesh, Attention, Step, Device, Run, Sample };

/// What a number must be: `valid` (nullptr: anything) and the requirement
/// that messages quote when it is not ("must be in [0, 1)").
struct Requirement {
  bool (*valid)(double) = nullptr;
  std::string_view text;
};

/// A key of the config's ICI or DCN mesh sizes: RunConfig::ici or ::dcn at
/// kConfigMeshAxes index `axis`.
struct MeshAxisField {
  bool dcn;
  size_t axis;

  bool operator==(const MeshAxisField &other) const {
    return dcn == other.dcn && axis == other.axis;
  }
};

/// The RunSpecFlags field a flag sets (monostate: the row has no flag).
using FlagField =
    std::variant<std::monostate, std::optional<double> RunSpecFlags::*,
                 std::optional<int64_t> RunSpecFlags::*,
                 std::optional<uint64_t> RunSpecFlags::*,
                 std::optional<bool> RunSpecFlags::*,
                 std::optional<std::string> RunSpecFlags::*,
                 std::optional<std::vector<std::string>> RunSpecFlags::*,
                 std::optional<std::vector<int64_t>> RunSpecFlags::*>;

/// The RunConfig field a config key sets (monostate: the row has no key).
using KeyField = std::variant<
    std::monostate, std::optional<double> RunConfig::*,
    std::optional<int64_t> RunConfig::*, std::optional<uint64_t> RunConfig::*,
    std::optional<bool> RunConfig::*, std::optional<std::string> RunConfig::*,
    std::optional<std::vector<std::string>> RunConfig::*,
    std::optional<FlashBlockSizes> RunConfig::*,
    std::optional<LoraConfig> RunConfig::*,
    std::optional<TimestepBiasConfig> RunConfig::*,
    std::optional<LogicalAxisRules> RunConfig::*, MeshAxisField>;

/// One setting.
struct SettingRow {
  /// The flag without dashes ("lr"), and the tools that have it.
  std::string_view flag;
  unsigned tools = 0;
  FlagField flagField;
  /// The config key ("learning_rate").
  std::string_view key;
  KeyField keyField;
  /// A numeric value's requirement, for the key and the flag alike.
  Requirement check;
  /// Replaces `check` for the flag where the two differ (a key may keep
  /// MaxDiffusion's -1 for "unset", which a flag need not say).
  Requirement flagCheck;
  /// The largest value the flag takes (0: no limit); "must be at most N".
  int64_t flagMax = 0;
  /// A string key's values, when it has a fixed set ("unknown <noun> 'x';
  /// expected one of a, b").
  llvm::ArrayRef<std::string_view> choices;
  std::string_view choiceNoun;
  /// --help: the category, the text, the value's name (`<file.yml>`) and
  /// another spelling of the flag.
  FlagGroup group = FlagGroup::Mesh;
  std::string_view help, valueName, alias;

  bool hasFlag() const { return !flag.empty(); }
  bool hasKey() const { return !key.empty(); }
  /// The requirement `value` breaks as the key's, or "".
  std::string_view keyRequirement(double value) const;
  /// The requirement `value` breaks as the flag's, or "".
  std::string_view flagRequirement(double value) const;
};

/// Every setting, in the order the config reader lists its keys.
llvm::ArrayRef<SettingRow> settingRows();

/// The row of config key `key`, or nullptr.
const SettingRow *findKeyRow(std::string_view key);
/// The row whose key fills `field`, or nullptr.
const SettingRow *findKeyRow(const KeyField &field);
/// The first row whose flag sets `field`, or nullptr.
const SettingRow *findFlagRow(const FlagField &field);

/// Checks every flag `flags` sets against its row: the row's requirement
/// (finite first, for a number that has a key), then its limit.
/// InvalidArgument `--adam-b1 must be in [0, 1), not 5`.
absl::Status checkFlagValues(const RunSpecFlags &flags);

} // namespace sd

#endif // SD_CONFIG_SETTINGS_H
