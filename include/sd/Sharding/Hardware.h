//===- Hardware.h - Hardware profiles for the step-time model ---*- C++ -*-===//
//
// A hardware profile names what the cost model needs to turn a program's
// FLOPs, bytes and collectives into seconds: a device's arithmetic rates and
// memory, its links inside a host (ICI: TPU interconnect, NVLink, shared
// memory) and between hosts (DCN), and how many devices a host has. Built-in
// profiles come from their makers' published specifications (docs/planner.md
// lists each number's source); a YAML file can describe any other machine.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_HARDWARE_H
#define SD_SHARDING_HARDWARE_H

#include "sd/Sharding/Network.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

/// A matrix product's size class, by the FLOPs of one product on one
/// device (a batched op's one item: an attention head's scores are small
/// however many heads run): small products run far below a device's peak
/// (a CPU's GEMM spends them packing; an accelerator's tiles sit half
/// empty).
enum class ProductSize { Small, Medium, Large };

/// Below 1e8 FLOPs a product (a 368^3 GEMM) is small, below 4e9 (1260^3)
/// medium, else large.
ProductSize productSize(double flops);

/// What one device computes and holds.
struct DeviceSpec {
  /// Dense matrix-product rates, FLOP per second, in f32 and in bf16 (with
  /// f32 accumulation): the large products' rate.
  double f32Flops = 0;
  double bf16Flops = 0;
  /// Bytes per second between the device's memory and its arithmetic.
  double memoryBandwidth = 0;
  /// The device's memory, bytes.
  double memoryBytes = 0;
  /// The f32 rates of small and medium products where measured
  /// (`sdrun --calibrate`); 0: f32Flops.
  double f32FlopsSmall = 0;
  double f32FlopsMedium = 0;
  /// Bytes per second between the device's memory and its host's, one
  /// way (offloads and reloads); 0: memoryBandwidth (a CPU device, whose
  /// host memory is the same memory).
  double hostBandwidth = 0;
  /// The f32 rate of the flash-attention kernels (forward and backward),
  /// whose tiles and online softmax run below a large product's rate where
  /// measured (`sdrun --calibrate`); 0: the medium products' rate.
  double f32FlopsAttention = 0;
  /// The f32 rate of products in the Aᵀ·B form (both operands with the
  /// contraction on rows, as weight gradients are), which sd's runtime
  /// gives another library than the other forms on CPUs without AMX, where
  /// measured (`sdrun --calibrate`); 0: the medium products' rate.
  double f32FlopsTransposedLhs = 0;

  double attentionRate() const {
    return f32FlopsAttention > 0 ? f32FlopsAttention
                                 : f32Rate(ProductSize::Medium);
  }

  double transposedLhsRate() const {
    return f32FlopsTransposedLhs > 0 ? f32FlopsTransposedLhs
                                     : f32Rate(ProductSize::Medium);
  }

  double hostRate() const {
    return hostBandwidth > 0 ? hostBandwidth : memoryBandwidth;
  }

  /// The f32 rate of a product of size class `size`.
  double f32Rate(ProductSize size) const {
    double rate = size == ProductSize::Small    ? f32FlopsSmall
                  : size == ProductSize::Medium ? f32FlopsMedium
                                                : f32Flops;
    return rate > 0 ? rate : f32Flops;
  }

  bool operator==(const DeviceSpec &other) const {
    return f32Flops == other.f32Flops && bf16Flops == other.bf16Flops &&
           memoryBandwidth == other.memoryBandwidth &&
           memoryBytes == other.memoryBytes &&
           f32FlopsSmall == other.f32FlopsSmall &&
           f32FlopsMedium == other.f32FlopsMedium &&
           hostBandwidth == other.hostBandwidth &&
           f32FlopsAttention == other.f32FlopsAttention &&
           f32FlopsTransposedLhs == other.f32FlopsTransposedLhs;
  }
};

struct HardwareProfile {
  /// A short name: `tpu-v5p`, or the file's `name`.
  std::string name;
  /// Where the numbers come from: a datasheet's address, or how they were
  /// measured.
  std::string source;
  DeviceSpec device;
  /// ICI per device and DCN per host, as the network model prices them.
  NetworkModel network;
  int64_t devicesPerHost = 1;

  bool operator==(const HardwareProfile &other) const {
    return name == other.name && source == other.source &&
           device == other.device &&
           network.iciBandwidth == other.network.iciBandwidth &&
           network.dcnBandwidth == other.network.dcnBandwidth &&
           network.iciLatency == other.network.iciLatency &&
           network.dcnLatency == other.network.dcnLatency &&
           devicesPerHost == other.devicesPerHost;
  }
};

/// The built-in profiles' names, in a fixed order: `cpu` (a device of this
/// workplace's CPU machines: one thread), `tpu-v5p`, `tpu-v6e`, `h100-sxm`.
std::vector<std::string> builtinProfileNames();

/// The built-in profile `name`; InvalidArgument naming the choices
/// otherwise.
absl::StatusOr<HardwareProfile> builtinProfile(std::string_view name);

/// A profile from YAML `text` (`label` names it in errors, as
/// `label:line: message`): a mapping of `name`, `source` and the numbers
/// `f32_flops`, `bf16_flops`, `memory_bandwidth`, `device_memory`,
/// `ici_bandwidth`, `ici_latency`, `dcn_bandwidth`, `dcn_latency` (SI base
/// units: FLOP/s, bytes/s, bytes, seconds; finite and positive) and
/// `devices_per_host` (a positive integer). Every key is required once,
/// but `f32_flops_small` and `f32_flops_medium` (the small and medium
/// products' f32 rates), `host_bandwidth` (device to host memory, one way)
/// `f32_flops_attention` (attention kernels' f32 rate) and
/// `f32_flops_transposed_lhs` (the Aᵀ·B form's f32 rate), which may be left
/// out; an unknown one is an error.
absl::StatusOr<HardwareProfile> parseProfile(std::string_view text,
                                             std::string_view label);

/// A built-in profile's name, or the path of a YAML file (parseProfile);
/// `flag` names the option in errors.
absl::StatusOr<HardwareProfile> loadProfile(std::string_view nameOrPath,
                                            std::string_view flag);

/// `profile` as the YAML that parseProfile reads back to an equal profile.
std::string profileToYaml(const HardwareProfile &profile);

} // namespace sd

#endif // SD_SHARDING_HARDWARE_H
