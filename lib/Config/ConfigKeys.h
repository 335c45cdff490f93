//===- ConfigKeys.h - The config keys sd knows and refuses ------*- C++ -*-===//
//
// Private to lib/Config: the catalogue of config keys the reader
// (RunConfig.cpp) checks a key against. A key is sd's (the reader's tables),
// MaxDiffusion's (MaxDiffusionKeys.def), or a typo. Among MaxDiffusion's,
// the keys that choose what is trained or loaded (ModelKey) are read and
// then refused by verifyRunConfig while they ask for something sd cannot do
// yet.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CONFIG_CONFIGKEYS_H
#define SD_LIB_CONFIG_CONFIGKEYS_H

#include "sd/Config/RunConfig.h"

#include "absl/status/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace sd::detail {

/// The keys the reader reads (RunConfig.cpp's tables).
const std::vector<std::string> &sdConfigKeys();

/// Whether one of MaxDiffusion's configs has `key` at the top level.
bool isMaxDiffusionKey(std::string_view key);

/// How a key that chooses what is trained asks for something sd cannot do.
enum class ModelKeyKind {
  Name, ///< A non-empty string: weights to load.
  Flag, ///< True.
};

/// A key of MaxDiffusion's that chooses what is trained or loaded. Its
/// error reads `KEY: VALUE <asks>; KEY=<off> <instead>`.
struct ModelKey {
  std::string_view name;
  ModelKeyKind kind;
  std::string_view asks, off, instead;
};

/// The entry of `key`, or nullptr when it chooses nothing of what is
/// trained.
const ModelKey *findModelKey(std::string_view key);

/// The first of config.modelKeys that asks for something sd cannot do (a
/// lora_config only while enable_lora is not false), as an error naming
/// where it was set.
absl::Status verifyModelKeys(const RunConfig &config);

} // namespace sd::detail

#endif // SD_LIB_CONFIG_CONFIGKEYS_H
