//===- ConfigKeys.cpp - Which config keys exist, and which sd refuses -----===//
//
// The catalogue of config keys: MaxDiffusion's (MaxDiffusionKeys.def), the
// keys among them that choose what is trained and the check that refuses
// them, and the nearest key to a typo (llvm's edit distance).
//
//===----------------------------------------------------------------------===//

#include "ConfigKeys.h"

#include "absl/strings/str_format.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <iterator>

using namespace sd;
using namespace sd::detail;

namespace {

/// The keys of MaxDiffusion's configs, sorted.
constexpr std::string_view kMaxDiffusionKeys[] = {
#define MAXDIFFUSION_KEY(name) #name,
#include "MaxDiffusionKeys.def"
};

constexpr std::string_view kOwnParameters =
    "trains the model file's own parameters (seeded, or --init-from's) "
    "instead";
constexpr ModelKey kModelKeys[] = {
    {"wan_transformer_pretrained_model_name_or_path", ModelKeyKind::Name,
     "names a transformer folder to override the repository's, which sd "
     "does not read (give that folder as pretrained_model_name_or_path)",
     "''", kOwnParameters},
    {"unet_checkpoint", ModelKeyKind::Name,
     "names a checkpoint to start from, which sd cannot load yet", "''",
     kOwnParameters},
    {"pretrained_orbax_dir", ModelKeyKind::Name,
     "names converted weights to start from, which sd cannot load yet", "''",
     kOwnParameters},
    {"train_text_encoder", ModelKeyKind::Flag,
     "trains the text encoder too, which sd cannot do yet", "False",
     "trains the model file's parameters alone"},
};

} // namespace

bool sd::detail::isMaxDiffusionKey(std::string_view key) {
  return std::binary_search(std::begin(kMaxDiffusionKeys),
                            std::end(kMaxDiffusionKeys), key);
}

const ModelKey *sd::detail::findModelKey(std::string_view key) {
  for (const ModelKey &entry : kModelKeys)
    if (entry.name == key)
      return &entry;
  return nullptr;
}

/// No key asks for what sd cannot do yet.
absl::Status sd::detail::verifyModelKeys(const RunConfig &config) {
  for (const auto &[key, value] : config.modelKeys) {
    if (!value.active)
      continue;
    const ModelKey &model = *findModelKey(key);
    std::string origin = config.originOf(key);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s%s: %s %s; %s=%s %s", origin.empty() ? "" : origin + ": ", key,
        value.shown, model.asks, key, model.off, model.instead));
  }
  return absl::OkStatus();
}

bool sd::isConfigKey(std::string_view key) {
  const std::vector<std::string> &own = sdConfigKeys();
  return std::find(own.begin(), own.end(), key) != own.end() ||
         isMaxDiffusionKey(key);
}

std::string sd::nearestConfigKey(std::string_view key) {
  // Near enough to be a typo: an edit or two in a short key, three in a
  // long one.
  unsigned limit =
      std::clamp<unsigned>(static_cast<unsigned>(key.size()) / 3, 1, 3);
  std::string best;
  unsigned bestDistance = limit + 1;
  auto consider = [&](std::string_view candidate) {
    unsigned distance = llvm::StringRef(key).edit_distance(
        llvm::StringRef(candidate.data(), candidate.size()),
        /*AllowReplacements=*/true, /*MaxEditDistance=*/limit);
    // Strictly nearer: on a tie, a key sd reads (listed first) wins.
    if (distance < bestDistance) {
      bestDistance = distance;
      best = std::string(candidate);
    }
  };
  for (const std::string &candidate : sdConfigKeys())
    consider(candidate);
  for (std::string_view candidate : kMaxDiffusionKeys)
    consider(candidate);
  return best;
}
