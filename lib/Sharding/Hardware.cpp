//===- Hardware.cpp - Hardware profiles for the step-time model -----------===//

#include "sd/Sharding/Hardware.h"
#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

using namespace sd;
namespace yaml = llvm::yaml;

namespace {

/// One TPU or GPU generation's published numbers; the rest is sd's
/// convention (docs/planner.md): a link's bandwidth is what a device sends
/// in one direction, half the published bidirectional figure; latencies,
/// which no datasheet publishes, are sd's defaults.
HardwareProfile make(std::string name, std::string source, double f32Flops,
                     double bf16Flops, double memoryBandwidth,
                     double memoryBytes, double iciBidirectional,
                     double iciLatency, double dcnPerHost, double dcnLatency,
                     int64_t devicesPerHost) {
  HardwareProfile p;
  p.name = std::move(name);
  p.source = std::move(source);
  p.device = {f32Flops, bf16Flops, memoryBandwidth, memoryBytes};
  p.network.iciBandwidth = iciBidirectional / 2;
  p.network.iciLatency = iciLatency;
  p.network.dcnBandwidth = dcnPerHost;
  p.network.dcnLatency = dcnLatency;
  p.devicesPerHost = devicesPerHost;
  return p;
}

constexpr double kGiB = double(int64_t(1) << 30);

/// A TPU host's link to a chip, which Google does not publish: sd assumes
/// PCIe 4.0 x16, 32 GB/s one way.
constexpr double kPcie4x16 = 32e9;

HardwareProfile withHost(HardwareProfile p, double hostBandwidth) {
  p.device.hostBandwidth = hostBandwidth;
  return p;
}

std::vector<HardwareProfile> builtins() {
  // f32 products on a TPU at XLA's HIGHEST precision take six bf16 passes.
  constexpr double kTpuF32Passes = 6;
  NetworkModel defaults;
  return {
      // A device of this workplace's 2-core CPU machines: one thread. The
      // f32 rate is oneDNN's measured sgemm (n = 2048, 2 threads: 354.7
      // GFLOP/s) per thread; without bf16 units (AVX2) bf16 products run
      // at the f32 rate; memory: a 512 MiB copy by one thread (31 GB/s);
      // each of the 2 devices half of the 24 GiB; links: the network
      // model's defaults (shared memory).
      make("cpu",
           "measured on the workplace's AVX2 AMD EPYC machines (oneDNN "
           "sgemm, a one-thread copy); shared-memory defaults",
           177.35e9, 177.35e9, 31e9, 12 * kGiB, 2 * defaults.iciBandwidth,
           defaults.iciLatency, defaults.dcnBandwidth, defaults.dcnLatency, 2),
      withHost(make("tpu-v5p", "https://cloud.google.com/tpu/docs/v5p",
                    459e12 / kTpuF32Passes, 459e12, 2765e9, 95 * kGiB, 1200e9,
                    1e-6,
                    // 50 Gb/s of DCN per chip, 4 chips per host.
                    4 * 50e9 / 8, 25e-6, 4),
               kPcie4x16),
      withHost(make("tpu-v6e", "https://cloud.google.com/tpu/docs/v6e",
                    918e12 / kTpuF32Passes, 918e12, 1638e9, 32e9, 800e9, 1e-6,
                    // Not on the v6e page: v5e's published 2 x 100 Gb/s NICs
                    // per host.
                    2 * 100e9 / 8, 25e-6, 8),
               kPcie4x16),
      // NVIDIA's H100 SXM5 (dense rates; f32 without TF32) in a DGX H100:
      // NVLink 4 (900 GB/s bidirectional), 8 GPUs, 8 x 400 Gb/s ConnectX-7,
      // PCIe 5.0 x16 to the host (128 GB/s bidirectional).
      withHost(make("h100-sxm",
                    "https://www.nvidia.com/en-us/data-center/h100/ and the "
                    "DGX H100 datasheet",
                    66.9e12, 989.4e12, 3.35e12, 80e9, 900e9, 2e-6,
                    8 * 400e9 / 8, 5e-6, 8),
               128e9 / 2),
  };
}

/// The keys of a profile file, in the order profileToYaml writes them.
enum class Key {
  Name,
  Source,
  F32Flops,
  Bf16Flops,
  MemoryBandwidth,
  DeviceMemory,
  IciBandwidth,
  IciLatency,
  DcnBandwidth,
  DcnLatency,
  DevicesPerHost,
  F32FlopsSmall,
  F32FlopsMedium,
  HostBandwidth,
  F32FlopsAttention,
  F32FlopsTransposedLhs,
};

struct KeyInfo {
  Key key;
  const char *name;
  /// A key a profile may leave out (its field stays 0).
  bool optional = false;
};

constexpr KeyInfo kKeys[] = {
    {Key::Name, "name"},
    {Key::Source, "source"},
    {Key::F32Flops, "f32_flops"},
    {Key::Bf16Flops, "bf16_flops"},
    {Key::MemoryBandwidth, "memory_bandwidth"},
    {Key::DeviceMemory, "device_memory"},
    {Key::IciBandwidth, "ici_bandwidth"},
    {Key::IciLatency, "ici_latency"},
    {Key::DcnBandwidth, "dcn_bandwidth"},
    {Key::DcnLatency, "dcn_latency"},
    {Key::DevicesPerHost, "devices_per_host"},
    {Key::F32FlopsSmall, "f32_flops_small", true},
    {Key::F32FlopsMedium, "f32_flops_medium", true},
    {Key::HostBandwidth, "host_bandwidth", true},
    {Key::F32FlopsAttention, "f32_flops_attention", true},
    {Key::F32FlopsTransposedLhs, "f32_flops_transposed_lhs", true},
};

/// The field of `p` a numeric key sets.
double *numberOf(HardwareProfile &p, Key key) {
  switch (key) {
  case Key::F32Flops:
    return &p.device.f32Flops;
  case Key::Bf16Flops:
    return &p.device.bf16Flops;
  case Key::MemoryBandwidth:
    return &p.device.memoryBandwidth;
  case Key::DeviceMemory:
    return &p.device.memoryBytes;
  case Key::IciBandwidth:
    return &p.network.iciBandwidth;
  case Key::IciLatency:
    return &p.network.iciLatency;
  case Key::DcnBandwidth:
    return &p.network.dcnBandwidth;
  case Key::DcnLatency:
    return &p.network.dcnLatency;
  case Key::F32FlopsSmall:
    return &p.device.f32FlopsSmall;
  case Key::F32FlopsMedium:
    return &p.device.f32FlopsMedium;
  case Key::HostBandwidth:
    return &p.device.hostBandwidth;
  case Key::F32FlopsAttention:
    return &p.device.f32FlopsAttention;
  case Key::F32FlopsTransposedLhs:
    return &p.device.f32FlopsTransposedLhs;
  default:
    return nullptr;
  }
}

/// Reads one profile file.
class ProfileReader : public YamlReaderBase {
public:
  ProfileReader(std::string_view text, std::string_view label)
      : YamlReaderBase(label), text(text) {}

  absl::StatusOr<HardwareProfile> read();

private:
  static std::optional<std::string> scalar(yaml::Node *node) {
    auto *value = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
    if (!value)
      return std::nullopt;
    llvm::SmallString<32> storage;
    return value->getValue(storage).str();
  }

  std::string_view text;
};

absl::StatusOr<HardwareProfile> ProfileReader::read() {
  if (absl::Status s = checkYamlStructure(text, fileName); !s.ok())
    return s;
  yaml::Stream stream(llvm::MemoryBufferRef(llvm::StringRef(text), fileName),
                      sourceMgr);
  HardwareProfile profile;
  std::map<Key, bool> seen;
  for (yaml::Document &doc : stream) {
    yaml::Node *root = doc.getRoot();
    if (syntaxError)
      return *syntaxError;
    if (!root || llvm::isa<yaml::NullNode>(root))
      continue;
    auto *map = llvm::dyn_cast<yaml::MappingNode>(root);
    if (!map)
      return error(root, "expected a mapping at the top level");
    for (yaml::KeyValueNode &entry : *map) {
      std::optional<std::string> name = scalar(entry.getKey());
      if (syntaxError)
        return *syntaxError;
      const KeyInfo *info = std::find_if(
          std::begin(kKeys), std::end(kKeys),
          [&](const KeyInfo &k) { return name && *name == k.name; });
      if (info == std::end(kKeys)) {
        std::vector<std::string> names;
        for (const KeyInfo &k : kKeys)
          names.push_back(k.name);
        return error(entry.getKey(),
                     absl::StrFormat("unknown key \"%s\"; a profile has %s",
                                     name.value_or("?"),
                                     absl::StrJoin(names, ", ")));
      }
      if (seen[info->key])
        return error(entry.getKey(),
                     absl::StrFormat("duplicate key \"%s\"", info->name));
      seen[info->key] = true;
      std::optional<std::string> value = scalar(entry.getValue());
      if (syntaxError)
        return *syntaxError;
      if (!value || value->empty())
        return error(entry.getValue(),
                     absl::StrFormat("\"%s\" must be a scalar", info->name));
      if (info->key == Key::Name) {
        profile.name = *value;
        continue;
      }
      if (info->key == Key::Source) {
        profile.source = *value;
        continue;
      }
      if (info->key == Key::DevicesPerHost) {
        int64_t count = 0;
        if (!absl::SimpleAtoi(*value, &count) || count <= 0)
          return error(entry.getValue(),
                       absl::StrFormat("\"devices_per_host\" must be a "
                                       "positive integer, not \"%s\"",
                                       *value));
        profile.devicesPerHost = count;
        continue;
      }
      double number = 0;
      if (!absl::SimpleAtod(*value, &number) || !std::isfinite(number) ||
          number <= 0)
        return error(entry.getValue(),
                     absl::StrFormat("\"%s\" must be a finite positive number "
                                     "(SI base units), not \"%s\"",
                                     info->name, *value));
      *numberOf(profile, info->key) = number;
    }
  }
  if (syntaxError)
    return *syntaxError;
  for (const KeyInfo &k : kKeys)
    if (!seen[k.key] && !k.optional)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: no \"%s\" key", fileName, k.name));
  return profile;
}

} // namespace

ProductSize sd::productSize(double flops) {
  if (flops < 1e8)
    return ProductSize::Small;
  return flops < 4e9 ? ProductSize::Medium : ProductSize::Large;
}

std::vector<std::string> sd::builtinProfileNames() {
  std::vector<std::string> names;
  for (const HardwareProfile &p : builtins())
    names.push_back(p.name);
  return names;
}

absl::StatusOr<HardwareProfile> sd::builtinProfile(std::string_view name) {
  for (HardwareProfile &p : builtins())
    if (p.name == name)
      return std::move(p);
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown hardware profile \"%s\"; expected one of %s, or "
                      "the path of a profile file",
                      name, absl::StrJoin(builtinProfileNames(), ", ")));
}

absl::StatusOr<HardwareProfile> sd::parseProfile(std::string_view text,
                                                 std::string_view label) {
  return ProfileReader(text, label).read();
}

absl::StatusOr<HardwareProfile> sd::loadProfile(std::string_view nameOrPath,
                                                std::string_view flag) {
  std::vector<std::string> names = builtinProfileNames();
  if (std::find(names.begin(), names.end(), nameOrPath) != names.end())
    return builtinProfile(nameOrPath);
  absl::StatusOr<std::string> text = readYamlFile(nameOrPath, "profile file");
  if (!text.ok()) {
    // "tpu-v5" is more likely a misspelt built-in than a missing file.
    bool plainName =
        std::all_of(nameOrPath.begin(), nameOrPath.end(), [](char c) {
          return absl::ascii_isalnum(c) || c == '-' || c == '_';
        });
    if (absl::IsNotFound(text.status()) && plainName)
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s: %s", flag, builtinProfile(nameOrPath).status().message()));
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s: %s", flag, text.status().message()));
  }
  return parseProfile(*text, nameOrPath);
}

/// The shortest of %.15g .. %.17g that reads back as `value`.
static std::string roundTrip(double value) {
  for (int digits = 15; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == value)
      return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string sd::profileToYaml(const HardwareProfile &profile) {
  auto quoted = [](const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    return out + "\"";
  };
  std::string text = "# sd hardware profile (docs/planner.md)\n";
  HardwareProfile copy = profile;
  for (const KeyInfo &k : kKeys) {
    if (k.optional && *numberOf(copy, k.key) == 0)
      continue;
    text += k.name;
    text += ": ";
    if (k.key == Key::Name)
      text += quoted(profile.name);
    else if (k.key == Key::Source)
      text += quoted(profile.source);
    else if (k.key == Key::DevicesPerHost)
      text += std::to_string(profile.devicesPerHost);
    else
      text += roundTrip(*numberOf(copy, k.key));
    text += "\n";
  }
  return text;
}
