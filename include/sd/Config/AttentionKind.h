//===- AttentionKind.h - MaxDiffusion's attention kernels -------*- C++ -*-===//
//
// The `attention` setting (a config's `attention` key, `--attention` on the
// tools): how the compiler runs sd.attention. MaxDiffusion's spellings.
// Header-only, MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_ATTENTIONKIND_H
#define SD_CONFIG_ATTENTIONKIND_H

#include "sd/Config/NameTable.h"

#include <array>
#include <optional>
#include <string_view>

namespace sd {

enum class AttentionKind {
  /// One score matrix per head (sd.attention as it is).
  DotProduct,
  /// Tiled into flash-attention blocks (sd-tile-attention); a sequence
  /// sharded over mesh axes has its keys and values all-gathered.
  Flash,
  /// Tiled, and self-attention over a sharded sequence passes the key and
  /// value blocks around the ring of devices that shard it.
  Ring,
  /// Tiled, and self-attention over a sharded sequence switches to head
  /// sharding by all-to-alls around each attention.
  Ulysses,
  /// Tiled, Ulysses within groups of `ulysses_shards` devices of the
  /// sequence and the ring across the groups.
  UlyssesRing,
  /// Tiled, with whichever of flash, ring and Ulysses the cost model finds
  /// sends the fewest bytes per device.
  Auto,
};

inline constexpr NameTable<AttentionKind, 6> kAttentionKindNames = {{
    {AttentionKind::DotProduct, "dot_product"},
    {AttentionKind::Flash, "flash"},
    {AttentionKind::Ring, "ring"},
    {AttentionKind::Ulysses, "ulysses"},
    {AttentionKind::UlyssesRing, "ulysses_ring"},
    {AttentionKind::Auto, "auto"},
}};

/// MaxDiffusion's attention values that sd does not run (accelerator
/// kernels), so that a config naming one gets an error that says so rather
/// than "unknown".
inline constexpr std::array<std::string_view, 3> kUnavailableAttentionKinds = {
    "cudnn_flash_te", "tokamax_flash", "tokamax_ring"};

inline std::string_view attentionKindName(AttentionKind kind) {
  return lookupName(kAttentionKindNames, kind);
}

/// The kind spelled `name` (exactly), or nullopt.
inline std::optional<AttentionKind> parseAttentionKind(std::string_view name) {
  return lookupKind(kAttentionKindNames, name);
}

} // namespace sd

#endif // SD_CONFIG_ATTENTIONKIND_H
