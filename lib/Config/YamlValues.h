//===- YamlValues.h - Config values as PyYAML reads them --------*- C++ -*-===//
//
// How the config reader (RunConfig.cpp) reads a YAML value the way
// MaxDiffusion's PyYAML does: null spellings, plain scalars (the only ones
// resolved to numbers and booleans), YAML 1.1 numbers and booleans, and a
// value as messages show it. Internal to lib/Config.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CONFIG_YAMLVALUES_H
#define SD_LIB_CONFIG_YAMLVALUES_H

#include "llvm/Support/YAMLParser.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sd::detail {

/// YAML's null spellings (plain only: a quoted 'null' is a string).
bool isNull(const llvm::yaml::Node *node);

/// A plain (unquoted) scalar's text; PyYAML only resolves those to numbers
/// and booleans.
std::optional<std::string> plainText(const llvm::yaml::Node *node);

/// Any scalar's value (plain, quoted or block), or nullopt.
std::optional<std::string> scalarText(llvm::yaml::Node *node);

/// How a value is shown in messages: as written, quoted with '' when plain.
std::string describe(llvm::yaml::Node *node);

/// Decimal numbers in YAML 1.1 (`1.e-5`, as MaxDiffusion writes them) and
/// 1.2 (`1e-5`) spelling; not inf or nan.
std::optional<double> parseNumber(std::string_view text);
std::optional<int64_t> parseInteger(std::string_view text);

/// How the reader parses a number (double) or an integer (int64_t), and
/// names it in messages.
template <typename T> struct NumericKind;
template <> struct NumericKind<double> {
  static constexpr auto parse = &parseNumber;
  static constexpr const char *noun = "a number";
  static constexpr const char *plural = "numbers";
};
template <> struct NumericKind<int64_t> {
  static constexpr auto parse = &parseInteger;
  static constexpr const char *noun = "an integer";
  static constexpr const char *plural = "integers";
};

/// PyYAML's (YAML 1.1) boolean spellings.
std::optional<bool> parseBool(std::string_view text);

} // namespace sd::detail

#endif // SD_LIB_CONFIG_YAMLVALUES_H
