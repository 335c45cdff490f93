//===- YamlValues.cpp - Config values as PyYAML reads them ----------------===//

#include "YamlValues.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

#include "llvm/ADT/SmallString.h"

#include <cmath>

using namespace sd::detail;
namespace yaml = llvm::yaml;

bool sd::detail::isNull(const yaml::Node *node) {
  if (!node || llvm::isa<yaml::NullNode>(node))
    return true;
  auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(node);
  if (!scalar)
    return false;
  llvm::StringRef raw = scalar->getRawValue().rtrim(" \t");
  return raw == "null" || raw == "Null" || raw == "NULL" || raw == "~";
}

std::optional<std::string> sd::detail::plainText(const yaml::Node *node) {
  auto *scalar = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
  if (!scalar || isNull(node))
    return std::nullopt;
  llvm::StringRef raw = scalar->getRawValue();
  if (raw.starts_with("'") || raw.starts_with("\""))
    return std::nullopt;
  // The raw text of a plain scalar keeps the blanks before a comment.
  llvm::SmallString<32> storage;
  return scalar->getValue(storage).str();
}

std::optional<std::string> sd::detail::scalarText(yaml::Node *node) {
  if (isNull(node))
    return std::nullopt;
  if (auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(node)) {
    llvm::SmallString<32> storage;
    return scalar->getValue(storage).str();
  }
  if (auto *block = llvm::dyn_cast<yaml::BlockScalarNode>(node))
    return block->getValue().str();
  return std::nullopt;
}

std::string sd::detail::describe(yaml::Node *node) {
  if (isNull(node))
    return "null";
  if (auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(node)) {
    llvm::StringRef raw = scalar->getRawValue();
    if (raw.starts_with("'") || raw.starts_with("\""))
      return raw.str();
    llvm::SmallString<32> storage;
    return absl::StrFormat("'%s'", scalar->getValue(storage).str());
  }
  if (llvm::isa<yaml::SequenceNode>(node))
    return "a list";
  if (llvm::isa<yaml::MappingNode>(node))
    return "a mapping";
  return "a block string";
}

/// Whether `text` is non-empty and made of `allowed` alone.
static bool onlyChars(std::string_view text, std::string_view allowed) {
  return !text.empty() && text.find_first_not_of(allowed) == text.npos;
}

std::optional<double> sd::detail::parseNumber(std::string_view text) {
  double value;
  if (!onlyChars(text, "0123456789+-.eE") ||
      !absl::SimpleAtod(absl::string_view(text.data(), text.size()), &value) ||
      !std::isfinite(value))
    return std::nullopt;
  return value;
}

std::optional<int64_t> sd::detail::parseInteger(std::string_view text) {
  int64_t value;
  if (!onlyChars(text, "0123456789+-") ||
      !absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &value))
    return std::nullopt;
  return value;
}

std::optional<bool> sd::detail::parseBool(std::string_view text) {
  for (std::string_view t :
       {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
    if (text == t)
      return true;
  for (std::string_view f :
       {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
    if (text == f)
      return false;
  return std::nullopt;
}
