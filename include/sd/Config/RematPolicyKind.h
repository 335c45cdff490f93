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

#include "sd/Config/NameTable.h"

#include <optional>
#include <string_view>

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
inline constexpr NameTable<RematPolicyKind, 7> kRematPolicyNames = {{
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
  return lookupName(kRematPolicyNames, kind);
}

/// The policy spelled `name`, in any case; nullopt for an unknown name.
inline std::optional<RematPolicyKind>
parseRematPolicyKind(std::string_view name) {
  return lookupKind(kRematPolicyNames, name, NameCase::Insensitive);
}

} // namespace sd

#endif // SD_CONFIG_REMATPOLICYKIND_H
