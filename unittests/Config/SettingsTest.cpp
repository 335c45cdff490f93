//===- SettingsTest.cpp - Tests for the table of settings -----------------===//
//
// Properties of the rows (sd/Config/Settings.h) and of what is made from
// them: the config reader reads every key row, every flag row has help, no
// key or flag is declared twice, and a value outside a row's requirement is
// refused with the same text from a file, an override and a flag. Also
// sdsample's sampling keys, read by the shared reader into the run spec.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/Settings.h"

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

#include <fstream>
#include <set>
#include <string>

using namespace sd;

namespace {

/// A YAML value that `row`'s key accepts.
std::string goodValue(const SettingRow &row) {
  return std::visit(
      [&](auto field) -> std::string {
        using Field = decltype(field);
        if constexpr (std::is_same_v<Field, MeshAxisField>) {
          return "1";
        } else if constexpr (std::is_same_v<Field, std::monostate>) {
          return "";
        } else {
          using T = typename std::decay_t<decltype(std::declval<RunConfig>().*
                                                   field)>::value_type;
          if constexpr (std::is_same_v<T, double>)
            return "0.5";
          else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
            return "1";
          else if constexpr (std::is_same_v<T, bool>)
            return "true";
          else if constexpr (std::is_same_v<T, std::string>)
            return row.choices.empty() ? "x" : std::string(row.choices[0]);
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            return "[a, b]";
          else if constexpr (std::is_same_v<T, FlashBlockSizes>)
            return "{block_q: 256}";
          else if constexpr (std::is_same_v<T, LoraConfig>)
            return "{rank: [4], lora_alpha: 8}";
          else if constexpr (std::is_same_v<T, TimestepBiasConfig>)
            return "{strategy: later, multiplier: 2.0}";
          else
            return "[['batch', 'data']]";
        }
      },
      row.keyField);
}

/// Whether the field of `row`'s key is set in `config`.
bool isSet(const SettingRow &row, const RunConfig &config) {
  return std::visit(
      [&](auto field) -> bool {
        using Field = decltype(field);
        if constexpr (std::is_same_v<Field, MeshAxisField>)
          return (field.dcn ? config.dcn : config.ici)[field.axis].has_value();
        else if constexpr (std::is_same_v<Field, std::monostate>)
          return false;
        else
          return (config.*field).has_value();
      },
      row.keyField);
}

TEST(SettingsTest, TheReaderReadsEveryKeyRow) {
  int keys = 0;
  for (const SettingRow &row : settingRows()) {
    if (!row.hasKey())
      continue;
    ++keys;
    std::string text = std::string(row.key) + ": " + goodValue(row) + "\n";
    absl::StatusOr<RunConfig> config = parseRunConfig(text, "t.yml");
    ASSERT_TRUE(config.ok()) << row.key << ": " << config.status();
    EXPECT_TRUE(isSet(row, *config)) << row.key;
    EXPECT_EQ(config->originOf(row.key), "t.yml:1") << row.key;
    EXPECT_TRUE(config->ignoredKeys.empty()) << row.key;
    EXPECT_TRUE(isConfigKey(row.key)) << row.key;
  }
  EXPECT_GT(keys, 40);
}

TEST(SettingsTest, EveryFlagRowHasHelpAndAField) {
  for (const SettingRow &row : settingRows()) {
    EXPECT_TRUE(row.hasFlag() || row.hasKey());
    if (!row.hasFlag()) {
      EXPECT_TRUE(row.help.empty()) << row.key;
      continue;
    }
    EXPECT_FALSE(row.help.empty()) << row.flag;
    EXPECT_NE(row.tools, 0u) << row.flag;
    EXPECT_FALSE(std::holds_alternative<std::monostate>(row.flagField))
        << row.flag;
  }
}

TEST(SettingsTest, NoKeyOrFlagDeclaredTwice) {
  std::set<std::string_view> keys;
  for (const SettingRow &row : settingRows()) {
    if (row.hasKey()) {
      EXPECT_TRUE(keys.insert(row.key).second) << row.key;
    }
  }
  // A flag may have a row per tool (its help differs), never two in one.
  for (unsigned tool : {kSdopt, kSdrun, kSdsample}) {
    std::set<std::string_view> flags;
    for (const SettingRow &row : settingRows()) {
      if (!row.hasFlag() || !(row.tools & tool))
        continue;
      EXPECT_TRUE(flags.insert(row.flag).second) << row.flag;
      if (!row.alias.empty()) {
        EXPECT_TRUE(flags.insert(row.alias).second) << row.alias;
      }
    }
  }
}

/// A value `row` refuses: "-5", "0", "2" or "200000", as an integer when
/// the key takes one.
std::optional<double> badValue(const SettingRow &row) {
  for (double candidate : {-5.0, 0.0, 2.0, 200000.0})
    if (!row.keyRequirement(candidate).empty())
      return candidate;
  return std::nullopt;
}

TEST(SettingsTest, ARequirementNamesTheKeyAndItsOrigin) {
  int checked = 0;
  for (const SettingRow &row : settingRows()) {
    if (!row.hasKey() || !row.check.valid)
      continue;
    std::optional<double> bad = badValue(row);
    ASSERT_TRUE(bad) << row.key;
    std::string value = absl::StrFormat("%g", *bad);
    std::string requirement(row.keyRequirement(*bad));
    std::string text = "seed: 1\n" + std::string(row.key) + ": " + value;
    EXPECT_EQ(
        parseRunConfig(text, "t.yml").status().message(),
        absl::StrFormat("t.yml:2: %s: '%s' %s", row.key, value, requirement));
    RunConfig config;
    EXPECT_EQ(
        applyOverride(config, std::string(row.key) + "=" + value).message(),
        absl::StrFormat("command line: %s: '%s' %s", row.key, value,
                        requirement));
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(SettingsTest, AFlagHasItsKeysRequirement) {
  RunSpecFlags flags;
  flags.adamB1 = 5;
  EXPECT_EQ(checkFlagValues(flags).message(),
            "--adam-b1 must be in [0, 1), not 5");
  flags = RunSpecFlags();
  flags.learningRate = std::nan("");
  EXPECT_EQ(checkFlagValues(flags).message(),
            "--lr must be a finite number, not nan");
  // ulysses_shards keeps MaxDiffusion's -1 for unset; the flag does not.
  flags = RunSpecFlags();
  flags.ulyssesShards = -1;
  EXPECT_EQ(checkFlagValues(flags).message(),
            "--ulysses-shards must be at least 1, not -1");
  flags = RunSpecFlags();
  flags.batch = kMaxGlobalBatch + 1;
  EXPECT_EQ(checkFlagValues(flags).message(),
            "--batch must be at most 16777216, not 16777217");
  EXPECT_TRUE(checkFlagValues(RunSpecFlags()).ok());
}

//===----------------------------------------------------------------------===//
// sdsample's sampling keys
//===----------------------------------------------------------------------===//

std::string writeConfig(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

HostInfo host() {
  HostInfo info;
  info.startTime = "20261122-110512";
  return info;
}

TEST(SettingsTest, SamplingKeysReadThroughTheSharedReader) {
  RunSpecFlags flags;
  flags.config = writeConfig("sample.yml", "ici_data_parallelism: 2\n"
                                           "num_inference_steps: 25\n"
                                           "guidance_scale: 2.5\n"
                                           "prediction_type: 'v_prediction'\n"
                                           "learning_rate: 1.e-3\n");
  flags.takesOverrides = false;
  absl::StatusOr<RunSpec> spec = resolveRunSpec(flags, host());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sampling.steps.value, 25);
  EXPECT_EQ(spec->sampling.steps.origin, "sample.yml:2");
  EXPECT_EQ(spec->sampling.guidanceScale.value, 2.5);
  EXPECT_EQ(spec->sampling.guidanceScale.origin, "sample.yml:3");
  ASSERT_TRUE(spec->data.predictionType);
  EXPECT_EQ(spec->data.predictionType->value, "v_prediction");

  // The flags win over the keys.
  flags.numInferenceSteps = 7;
  flags.predictionType = "flow";
  spec = resolveRunSpec(flags, host());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sampling.steps.value, 7);
  EXPECT_EQ(spec->sampling.steps.origin, "--num-inference-steps");
  EXPECT_EQ(spec->data.predictionType->value, "flow");
  EXPECT_EQ(spec->data.predictionType->origin, "--prediction-type");

  // Defaults without a config.
  spec = resolveRunSpec(RunSpecFlags(), host());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->sampling.steps.value, 50);
  EXPECT_EQ(spec->sampling.guidanceScale.value, 1.0);
  EXPECT_FALSE(spec->data.predictionType);
}

TEST(SettingsTest, SamplingKeysOutOfRange) {
  EXPECT_EQ(parseRunConfig("seed: 0\nnum_inference_steps: 200000\n", "bad.yml")
                .status()
                .message(),
            "bad.yml:2: num_inference_steps: '200000' must be in [1, 100000]");
  EXPECT_EQ(parseRunConfig("num_inference_steps: many\n", "bad.yml")
                .status()
                .message(),
            "bad.yml:1: num_inference_steps: 'many' is not an integer");
  EXPECT_EQ(
      parseRunConfig("prediction_type: sample\n", "bad.yml").status().message(),
      "bad.yml:1: prediction_type: unknown prediction type 'sample'; "
      "expected one of epsilon, v_prediction, flow");
  EXPECT_EQ(
      parseRunConfig("guidance_scale: [1, 2]\n", "bad.yml").status().message(),
      "bad.yml:1: guidance_scale: expected a number, got a list");
  RunSpecFlags flags;
  flags.numInferenceSteps = 0;
  EXPECT_EQ(resolveRunSpec(flags, host()).status().message(),
            "--num-inference-steps must be in [1, 100000], not 0");
}

} // namespace
