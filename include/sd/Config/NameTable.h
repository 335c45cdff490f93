//===- NameTable.h - Enum values and their config spellings -----*- C++ -*-===//
//
// A table pairing each value of a config enum with its spelling, and the two
// lookups every such enum needs (value to name, name to value), so that
// AttentionKind, RematPolicyKind and the like keep only their table.
// Header-only, MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_NAMETABLE_H
#define SD_CONFIG_NAMETABLE_H

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace sd {

/// Each value of `Kind` with its spelling; the first entry is the default.
template <typename Kind, std::size_t N>
using NameTable = std::array<std::pair<Kind, std::string_view>, N>;

/// The spelling of `kind` in `table`; the first entry's for a value the
/// table lacks.
template <typename Kind, std::size_t N>
constexpr std::string_view lookupName(const NameTable<Kind, N> &table,
                                      Kind kind) {
  static_assert(N > 0, "a name table needs a default entry");
  for (const auto &[k, name] : table)
    if (k == kind)
      return name;
  return table.front().second;
}

/// How `lookupKind` compares a name with the table's spellings.
enum class NameCase {
  /// Exactly as spelled.
  Exact,
  /// Any case, against upper-case spellings.
  Insensitive,
};

/// The value spelled `name` in `table`, or nullopt.
template <typename Kind, std::size_t N>
std::optional<Kind> lookupKind(const NameTable<Kind, N> &table,
                               std::string_view name,
                               NameCase nameCase = NameCase::Exact) {
  auto sameUpper = [](char spelled, char given) {
    return spelled == std::toupper(static_cast<unsigned char>(given));
  };
  for (const auto &[kind, spelling] : table) {
    bool matches = nameCase == NameCase::Exact
                       ? spelling == name
                       : spelling.size() == name.size() &&
                             std::equal(spelling.begin(), spelling.end(),
                                        name.begin(), sameUpper);
    if (matches)
      return kind;
  }
  return std::nullopt;
}

} // namespace sd

#endif // SD_CONFIG_NAMETABLE_H
