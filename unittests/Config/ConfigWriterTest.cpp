//===- ConfigWriterTest.cpp - Tests for flags written as config keys ------===//
//
// carrySettings (sd/Config/ConfigWriter.h) against the config reader: every
// sdopt flag whose row has a key of the same kind, set at once, comes back
// from the lines it writes with the same value; LoRA's flags come back
// through enable_lora and lora_config; a flag no key holds is named apart;
// and the rows the caller skips are left out.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/ConfigWriter.h"

#include "sd/Config/Settings.h"

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

#include <type_traits>
#include <variant>

using namespace sd;

namespace {

/// `compare(given, keyField)` with the value of `row`'s flag in `flags` and
/// its key's RunConfig field, where the two hold the same kind of value;
/// false where they do not.
template <typename Compare>
bool withSameKind(const SettingRow &row, const RunSpecFlags &flags,
                  Compare compare) {
  return std::visit(
      [&](auto flagField) {
        if constexpr (std::is_same_v<decltype(flagField), std::monostate>) {
          return false;
        } else {
          const auto &given = flags.*flagField;
          using T = typename std::decay_t<decltype(given)>::value_type;
          return std::visit(
              [&](auto keyField) {
                if constexpr (std::is_same_v<typename KeyFieldValue<
                                                 decltype(keyField)>::type,
                                             T>)
                  return compare(given, keyField);
                else
                  return false;
              },
              row.keyField);
        }
      },
      row.flagField);
}

/// Whether `row`'s flag and key hold the same kind of value.
bool sameKind(const SettingRow &row) {
  return withSameKind(row, RunSpecFlags(),
                      [](const auto &, auto) { return true; });
}

/// Sets `row`'s flag in `flags` to a value its key accepts.
void setSample(const SettingRow &row, RunSpecFlags &flags) {
  std::visit(
      [&](auto flagField) {
        using FlagField = decltype(flagField);
        if constexpr (!std::is_same_v<FlagField, std::monostate>) {
          auto &value = flags.*flagField;
          using T = typename std::decay_t<decltype(value)>::value_type;
          if constexpr (std::is_same_v<T, double>)
            value = 0.1 + 0.05 * double(row.key.size() % 3);
          else if constexpr (std::is_same_v<T, bool>)
            value = true;
          else if constexpr (std::is_integral_v<T>)
            value = T(3);
          else if constexpr (std::is_same_v<T, std::string>)
            value = row.choices.empty() ? std::string("it's x")
                                        : std::string(row.choices.back());
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            value = std::vector<std::string>{"blocks.0.*", "it's"};
          else
            value = T{1, 2};
        }
      },
      row.flagField);
}

/// Whether `row`'s key in `config` holds its flag's value in `flags`.
bool sameValue(const SettingRow &row, const RunSpecFlags &flags,
               const RunConfig &config) {
  return withSameKind(row, flags, [&](const auto &given, auto keyField) {
    return config.*keyField == given;
  });
}

/// Flags that give --flash-block-sizes alone.
RunSpecFlags flashFlags(const std::string &text) {
  RunSpecFlags flags;
  flags.flashBlockSizes = text;
  return flags;
}

TEST(ConfigWriterTest, EveryFlagWithAKeyReadsBack) {
  RunSpecFlags flags;
  std::vector<const SettingRow *> carried;
  for (const SettingRow &row : settingRows())
    if (row.hasFlag() && (row.tools & kSdopt) && row.hasKey() &&
        sameKind(row)) {
      setSample(row, flags);
      carried.push_back(&row);
    }
  ASSERT_GT(carried.size(), 20u);
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  EXPECT_TRUE(out.flagsOnly.empty()) << absl::StrJoin(out.flagsOnly, " ");
  EXPECT_EQ(out.lines.size(), carried.size());
  std::string text = absl::StrJoin(out.lines, "\n") + "\n";
  absl::StatusOr<RunConfig> config = parseRunConfig(text, "plan.yml");
  ASSERT_TRUE(config.ok()) << config.status() << "\n" << text;
  for (const SettingRow *row : carried) {
    EXPECT_TRUE(sameValue(*row, flags, *config)) << row->key;
    EXPECT_NE(config->originOf(row->key), "") << row->key;
  }
}

TEST(ConfigWriterTest, LoraFlagsBecomeEnableLoraAndLoraConfig) {
  RunSpecFlags flags;
  flags.loraRank = 8;
  flags.loraAlpha = 16.5;
  flags.loraTargets = std::vector<std::string>{"to_q", "to_k"};
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_EQ(out.lines[0], "enable_lora: true");
  EXPECT_EQ(out.lines[1], "lora_config: {rank: [8], lora_alpha: 16.5, "
                          "target_modules: ['to_q', 'to_k']}");
  absl::StatusOr<RunConfig> config =
      parseRunConfig(absl::StrJoin(out.lines, "\n"), "plan.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->enableLora, true);
  ASSERT_TRUE(config->loraConfig);
  EXPECT_EQ(config->loraConfig->rank, 8);
  EXPECT_EQ(config->loraConfig->alpha, 16.5);
  EXPECT_EQ(config->loraConfig->targetModules,
            (std::vector<std::string>{"to_q", "to_k"}));
}

TEST(ConfigWriterTest, AFlagWithoutAKeyIsNamedApart) {
  RunSpecFlags flags;
  flags.warmupSteps = 100;
  flags.freeze = std::vector<std::string>{"blocks.0.*"};
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  EXPECT_EQ(out.flagsOnly, std::vector<std::string>{"--warmup-steps=100"});
  EXPECT_EQ(out.lines,
            std::vector<std::string>{"freeze_parameters: ['blocks.0.*']"});
}

TEST(ConfigWriterTest, FlashBlockSizesAsMaxDiffusionsJson) {
  RunSpecFlags flags = flashFlags(R"({"block_q": 128, "block_kv": 256})");
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  ASSERT_EQ(out.lines.size(), 1u);
  absl::StatusOr<RunConfig> config = parseRunConfig(out.lines[0], "plan.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->flashBlockSizes);
  EXPECT_EQ(config->flashBlockSizes->blockQ, 128);
  EXPECT_EQ(config->flashBlockSizes->blockKv, 256);
}

TEST(ConfigWriterTest, EmptyListItemsAreLeftOut) {
  // `--weight-decay-exclude=` (decay every parameter) and `--freeze=a,`.
  RunSpecFlags flags;
  flags.weightDecayExclude = std::vector<std::string>{""};
  flags.freeze = std::vector<std::string>{"a.*", ""};
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  EXPECT_EQ(out.lines, (std::vector<std::string>{"freeze_parameters: ['a.*']",
                                                 "weight_decay_exclude: []"}));
  absl::StatusOr<RunConfig> config =
      parseRunConfig(absl::StrJoin(out.lines, "\n"), "plan.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->freezeParameters, std::vector<std::string>{"a.*"});
  EXPECT_EQ(config->weightDecayExclude, std::vector<std::string>{});
}

TEST(ConfigWriterTest, FlashBlockSizesAsABlockMapping) {
  // The flag takes any YAML the key takes, not only JSON.
  RunSpecFlags flags = flashFlags("block_q: 256");
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  ASSERT_EQ(out.lines.size(), 1u);
  absl::StatusOr<RunConfig> config = parseRunConfig(out.lines[0], "plan.yml");
  ASSERT_TRUE(config.ok()) << config.status() << ": " << out.lines[0];
  ASSERT_TRUE(config->flashBlockSizes);
  EXPECT_EQ(config->flashBlockSizes->blockQ, 256);
}

TEST(ConfigWriterTest, AGlobOnTheRunItLineIsQuoted) {
  RunSpecFlags flags;
  flags.learningRate = 1e-4;
  CarriedSettings none = carrySettings(flags, kSdopt, {"lr"});
  EXPECT_TRUE(none.lines.empty());
  // No key holds --warmup-steps; a value with a glob would be quoted.
  flags.warmupSteps = 3;
  CarriedSettings out = carrySettings(flags, kSdopt, {});
  EXPECT_EQ(out.flagsOnly, std::vector<std::string>{"--warmup-steps=3"});
  EXPECT_EQ(shellWord("to_*"), "'to_*'");
  EXPECT_EQ(shellWord("it's"), "'it'\\''s'");
  EXPECT_EQ(shellWord("blocks.0.mlp,x"), "blocks.0.mlp,x");
}

TEST(ConfigWriterTest, SkippedRowsAndOtherToolsAreLeftOut) {
  RunSpecFlags flags;
  flags.weightsDtype = "bfloat16";
  flags.learningRate = 3e-5;
  flags.seed = 7; // sdrun's flag, not sdopt's
  CarriedSettings out = carrySettings(flags, kSdopt, {"weights-dtype"});
  EXPECT_EQ(out.lines, std::vector<std::string>{"learning_rate: 3e-05"});
  EXPECT_TRUE(out.flagsOnly.empty());
}

TEST(ConfigWriterTest, QuotesReadBack) {
  EXPECT_EQ(yamlQuoted("it's"), "'it''s'");
  absl::StatusOr<RunConfig> config =
      parseRunConfig("weight_decay_exclude: ['a''b', '*bias']", "t.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->weightDecayExclude,
            (std::vector<std::string>{"a'b", "*bias"}));
}

} // namespace
