//===- ConfigFuzzer.cpp - Fuzzes run configs and their overrides ----------===//
//
// Input: a YAML config, then optionally a line `#overrides` followed by one
// `key=value` override per line. The config is parsed, the overrides are
// applied and verified, and the mesh is built as sdrun builds it.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtils.h"

#include "sd/Config/RunConfig.h"

#include <string>

using namespace sd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text = fuzz::asText(data, size);
  std::string_view yaml = text, rest;
  constexpr std::string_view kSeparator = "\n#overrides\n";
  if (size_t at = text.find(kSeparator); at != std::string_view::npos) {
    yaml = text.substr(0, at);
    rest = text.substr(at + kSeparator.size());
  }
  absl::StatusOr<RunConfig> config = parseRunConfig(yaml, "fuzz.yml");
  if (!config.ok())
    return 0;
  std::vector<std::string> overrides;
  for (std::string_view line : fuzz::splitLines(rest, 64))
    if (!line.empty())
      overrides.emplace_back(line);
  if (!applyOverrides(*config, overrides).ok())
    return 0;
  fuzz::check(verifyRunConfig(*config).ok(),
              "applyOverrides accepted what verifyRunConfig rejects");
  for (std::optional<int64_t> devices :
       {std::optional<int64_t>(), std::optional<int64_t>(8)}) {
    MeshOptions opts;
    opts.devices = devices;
    opts.maxDevicesPerProcess = kMaxDevicesPerProcess;
    (void)config->buildMesh(opts);
  }
  (void)config->iciMeshString();
  (void)config->dcnMeshString();
  return 0;
}
