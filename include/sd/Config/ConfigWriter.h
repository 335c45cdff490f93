//===- ConfigWriter.h - Flags written back as run-config keys ---*- C++ -*-===//
//
// The other direction of the config reader, for `sdopt --plan-output`: the
// settings a tool's flags gave, as the YAML lines of a run config that sets
// the same, so that `sdrun --config=plan.yml` runs the program the planner
// priced (its precision, gradient buckets, LoRA adapters, frozen
// parameters, ...). Made by walking the settings table (Settings.h): a flag
// whose row has a key of the same kind is written as that key (a list
// without its empty items, flash_block_sizes as the JSON the key reads);
// LoRA's flags, which have no keys of their own, as `enable_lora` and
// `lora_config`'s fields. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_CONFIGWRITER_H
#define SD_CONFIG_CONFIGWRITER_H

#include "sd/Config/RunSpec.h"
#include "sd/Support/YamlText.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <string_view>
#include <vector>

namespace sd {

/// The type a RunConfig field of `Field` holds (void for none).
template <typename Field> struct KeyFieldValue { using type = void; };
template <typename T> struct KeyFieldValue<std::optional<T> RunConfig::*> {
  using type = T;
};

/// What carrySettings makes.
struct CarriedSettings {
  /// `key: value` lines of YAML (no newline), in the table's order, then
  /// LoRA's keys.
  std::vector<std::string> lines;
  /// The flags set that no config key holds, as they are spelled on a
  /// command line (`--warmup-steps=100`): a run needs them beside the
  /// config.
  std::vector<std::string> flagsOnly;
};

/// The settings `flags` gives through the flags of `tools` (SettingTools
/// bits), leaving out the rows whose flag `skip` names (the settings the
/// caller writes itself, and those that describe the machine rather than
/// the run). The lines read back by parseRunConfig set the keys to the
/// flags' values.
CarriedSettings carrySettings(const RunSpecFlags &flags, unsigned tools,
                              llvm::ArrayRef<std::string_view> skip);

/// `text` as one word of a POSIX shell's command line: as it is where it
/// has no character the shell reads (globs, quotes, spaces), else quoted.
std::string shellWord(std::string_view text);

} // namespace sd

#endif // SD_CONFIG_CONFIGWRITER_H
