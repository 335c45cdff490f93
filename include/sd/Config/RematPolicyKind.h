//===- RematPolicyKind.h - MaxDiffusion's remat policy names ----*- C++ -*-===//
//
// The remat policies MaxDiffusion accepts (`remat_policy` in a config,
// `--remat` on the tools, the `remat` option of the remat pass) as one enum
// shared by the run specification (MLIR-free) and the compiler, so that the
// name-to-policy mapping lives in one place. Header-only.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_REMATPOLICYKIND_H
#define SD_CONFIG_REMATPOLICYKIND_H

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <string_view>
#include <utility>

namespace sd {

enum class RematPolicyKind {
  None,
  Full,
  MatmulWithoutBatch,
  OffloadMatmulWithoutBatch,
  HiddenStateWithOffload,
  FluxOptimized,
  Custom,
};

/// Each policy with MaxDiffusion's spelling, in the order help texts list
/// them.
inline constexpr std::array<std::pair<RematPolicyKind, std::string_view>, 7>
    kRematPolicyNames = {{
        {RematPolicyKind::None, "NONE"},
        {RematPolicyKind::Full, "FULL"},
        {RematPolicyKind::MatmulWithoutBatch, "MATMUL_WITHOUT_BATCH"},
        {RematPolicyKind::OffloadMatmulWithoutBatch,
         "OFFLOAD_MATMUL_WITHOUT_BATCH"},
        {RematPolicyKind::HiddenStateWithOffload, "HIDDEN_STATE_WITH_OFFLOAD"},
        {RematPolicyKind::FluxOptimized, "FLUX_OPTIMIZED"},
        {RematPolicyKind::Custom, "CUSTOM"},
    }};

/// MaxDiffusion's spelling of `kind`.
inline std::string_view rematPolicyName(RematPolicyKind kind) {
  for (const auto &[k, name] : kRematPolicyNames)
    if (k == kind)
      return name;
  return "NONE";
}

/// The policy spelled `name`, in any case; nullopt for an unknown name.
inline std::optional<RematPolicyKind>
parseRematPolicyKind(std::string_view name) {
  for (const auto &[kind, spelling] : kRematPolicyNames)
    if (spelling.size() == name.size() &&
        std::equal(spelling.begin(), spelling.end(), name.begin(),
                   [](char a, char b) {
                     return a == std::toupper(static_cast<unsigned char>(b));
                   }))
      return kind;
  return std::nullopt;
}

} // namespace sd

#endif // SD_CONFIG_REMATPOLICYKIND_H
