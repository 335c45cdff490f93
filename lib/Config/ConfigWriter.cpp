//===- ConfigWriter.cpp - Flags written back as run-config keys -----------===//

#include "sd/Config/ConfigWriter.h"

#include "sd/Config/Settings.h"
#include "sd/Support/Numbers.h"

#include "absl/strings/str_join.h"
#include "llvm/ADT/STLExtras.h"

#include <cctype>
#include <type_traits>
#include <variant>

using namespace sd;

std::string sd::shellWord(std::string_view text) {
  bool plain = !text.empty() && llvm::all_of(text, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_.,:/=+@%").find(c) != std::string_view::npos;
  });
  if (plain)
    return std::string(text);
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

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
    // An empty item (`--freeze=a,`) names nothing; the reader refuses it.
    std::vector<std::string> items;
    for (const auto &item : value)
      if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::string>) {
        if (!item.empty())
          items.push_back(spell<spelling>(item));
      } else {
        items.push_back(spell<spelling>(item));
      }
    return spelling == Spelling::Yaml ? "[" + absl::StrJoin(items, ", ") + "]"
                                      : absl::StrJoin(items, ",");
  }
}

template <typename T> std::string yamlValue(const T &value) {
  return spell<Spelling::Yaml>(value);
}

/// --flash-block-sizes' text as the JSON flash_block_sizes reads: the flag
/// is read as the key's value (RunSpec.cpp), any YAML mapping; nullopt
/// where it does not read.
std::optional<std::string> flashJson(const std::string &text) {
  RunConfig parsed;
  if (!applyOverride(parsed, "flash_block_sizes=" + text).ok() ||
      !parsed.flashBlockSizes)
    return std::nullopt;
  return parsed.flashBlockSizes->toString();
}
/// A flag of another kind is no flash_block_sizes.
template <typename T> std::optional<std::string> flashJson(const T &) {
  return std::nullopt;
}

/// LoRA's flags, which the config holds in lora_config's fields (PEFT's
/// names, as sd reads them), `rank` as the one-item list MaxDiffusion's
/// per-adapter lists take.
struct LoraField {
  std::string_view flag, field;
  bool list;
};
constexpr LoraField kLoraFields[] = {{"lora-rank", "rank", true},
                                     {"lora-alpha", "lora_alpha", false},
                                     {"lora-targets", "target_modules", false}};

} // namespace

CarriedSettings sd::carrySettings(const RunSpecFlags &flags, unsigned tools,
                                  llvm::ArrayRef<std::string_view> skip) {
  CarriedSettings carried;
  std::vector<std::string> lora;
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
            // LoRA's flags make lora_config, below.
            const LoraField *loraField =
                llvm::find_if(kLoraFields, [&](const LoraField &f) {
                  return f.flag == row.flag;
                });
            if (loraField != std::end(kLoraFields)) {
              std::string value = yamlValue(*given);
              lora.push_back(std::string(loraField->field) + ": " +
                             (loraField->list ? "[" + value + "]" : value));
              return;
            }
            bool written = std::visit(
                [&](auto keyField) {
                  using K = typename KeyFieldValue<decltype(keyField)>::type;
                  if constexpr (std::is_same_v<K, T>) {
                    carried.lines.push_back(std::string(row.key) + ": " +
                                            yamlValue(*given));
                    return true;
                  } else if constexpr (std::is_same_v<K, FlashBlockSizes>) {
                    std::optional<std::string> json = flashJson(*given);
                    if (json)
                      carried.lines.push_back(std::string(row.key) + ": " +
                                              *json);
                    return json.has_value();
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
  // enable_lora turns LoRA on, as the flags do.
  if (!lora.empty()) {
    carried.lines.push_back("enable_lora: true");
    carried.lines.push_back("lora_config: {" + absl::StrJoin(lora, ", ") + "}");
  }
  return carried;
}
