//===- ConfigWriter.cpp - Flags written back as run-config keys -----------===//

#include "sd/Config/ConfigWriter.h"

#include "sd/Config/Settings.h"

#include "absl/strings/str_join.h"
#include "llvm/ADT/STLExtras.h"

#include <cctype>
#include <charconv>
#include <type_traits>
#include <variant>

using namespace sd;

std::string sd::yamlQuoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'')
      out += '\'';
  }
  return out + "'";
}

namespace {

/// The shortest text that reads back as `value`.
std::string shortestDouble(double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return error == std::errc() ? std::string(buffer, end) : "0";
}

/// How a value is written: in a YAML config, or as a flag's value.
enum class Spelling { Yaml, Flag };

/// `value` as a YAML scalar or flow list, or as a command line's flag value
/// (a list comma-separated, a string as it is).
template <Spelling spelling, typename T> std::string spell(const T &value) {
  if constexpr (std::is_same_v<T, double>) {
    return shortestDouble(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return spelling == Spelling::Yaml ? yamlQuoted(value) : value;
  } else {
    std::vector<std::string> items;
    for (const auto &item : value)
      items.push_back(spell<spelling>(item));
    return spelling == Spelling::Yaml ? "[" + absl::StrJoin(items, ", ") + "]"
                                      : absl::StrJoin(items, ",");
  }
}

template <typename T> std::string yamlValue(const T &value) {
  return spell<Spelling::Yaml>(value);
}

/// `text` as one shell word.
std::string shellWord(const std::string &text) {
  bool plain = !text.empty() && llvm::all_of(text, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_.,:/=+*@%").find(c) != std::string_view::npos;
  });
  if (plain)
    return text;
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// The flags whose settings MaxDiffusion's config holds in lora_config.
constexpr std::string_view kLoraFlags[] = {"lora-rank", "lora-alpha",
                                           "lora-targets"};

/// The type a RunConfig field of `Field` holds (void for none).
template <typename Field> struct KeyValueOf { using type = void; };
template <typename T> struct KeyValueOf<std::optional<T> RunConfig::*> {
  using type = T;
};

} // namespace

CarriedSettings sd::carrySettings(const RunSpecFlags &flags, unsigned tools,
                                  llvm::ArrayRef<std::string_view> skip) {
  CarriedSettings carried;
  for (const SettingRow &row : settingRows()) {
    if (!row.hasFlag() || !(row.tools & tools) ||
        llvm::is_contained(skip, row.flag))
      continue;
    std::visit(
        [&](auto flagField) {
          using FlagField = decltype(flagField);
          if constexpr (!std::is_same_v<FlagField, std::monostate>) {
            const auto &given = flags.*flagField;
            if (!given)
              return;
            using T = typename std::decay_t<decltype(given)>::value_type;
            // LoRA's flags make the keys below.
            if (llvm::is_contained(kLoraFlags, row.flag))
              return;
            bool written = std::visit(
                [&](auto keyField) {
                  using K = typename KeyValueOf<decltype(keyField)>::type;
                  if constexpr (std::is_same_v<K, T>) {
                    carried.lines.push_back(std::string(row.key) + ": " +
                                            yamlValue(*given));
                    return true;
                  } else if constexpr (std::is_same_v<K, FlashBlockSizes> &&
                                       std::is_same_v<T, std::string>) {
                    // MaxDiffusion's JSON, which is YAML's flow mapping.
                    carried.lines.push_back(std::string(row.key) + ": " +
                                            *given);
                    return true;
                  } else {
                    return false;
                  }
                },
                row.keyField);
            if (!written)
              carried.flagsOnly.push_back(
                  "--" + std::string(row.flag) + "=" +
                  shellWord(spell<Spelling::Flag>(*given)));
          }
        },
        row.flagField);
  }
  // MaxDiffusion turns LoRA on with enable_lora; lora_config holds the rest.
  auto skipped = [&](std::string_view flag) {
    return llvm::is_contained(skip, flag);
  };
  std::vector<std::string> lora;
  if (flags.loraRank && !skipped("lora-rank"))
    lora.push_back("rank: [" + yamlValue(*flags.loraRank) + "]");
  if (flags.loraAlpha && !skipped("lora-alpha"))
    lora.push_back("lora_alpha: " + yamlValue(*flags.loraAlpha));
  if (flags.loraTargets && !skipped("lora-targets"))
    lora.push_back("target_modules: " + yamlValue(*flags.loraTargets));
  if (!lora.empty()) {
    carried.lines.push_back("enable_lora: true");
    carried.lines.push_back("lora_config: {" + absl::StrJoin(lora, ", ") + "}");
  }
  return carried;
}
