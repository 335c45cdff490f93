//===- InputLimits.cpp - Limits on hostile text input ---------------------===//
//
// The nesting pre-scan that keeps recursive-descent parsers off deeply
// nested input.
//
//===----------------------------------------------------------------------===//

#include "sd/Support/InputLimits.h"

#include "absl/strings/str_format.h"

#include <vector>

using namespace sd;

namespace {

/// The closing bracket of an opening one, or 0.
char closerOf(char c) {
  switch (c) {
  case '(':
    return ')';
  case '[':
    return ']';
  case '{':
    return '}';
  case '<':
    return '>';
  default:
    return 0;
  }
}

} // namespace

absl::Status sd::checkNestingDepth(std::string_view text, std::string_view what,
                                   int64_t maxDepth) {
  // The closers expected, innermost last; its size is the current depth.
  std::vector<char> open;
  int64_t line = 1;
  size_t lineStart = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      lineStart = i + 1;
    } else if (c == '"') {
      // A string literal: brackets inside do not nest. An unterminated one
      // runs to the end, where the parser reports it.
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line, lineStart = i + 1;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '-' && i + 1 < text.size() && text[i + 1] == '>') {
      ++i; // `->` in a function type.
    } else if (char closer = closerOf(c)) {
      open.push_back(closer);
      if (static_cast<int64_t>(open.size()) > maxDepth)
        return absl::InvalidArgumentError(absl::StrFormat(
            "'%s' is nested too deeply: more than %d levels of brackets at "
            "line %d, column %d",
            what, maxDepth, line, i - lineStart + 1));
    } else if (!open.empty() && c == open.back()) {
      open.pop_back();
    }
  }
  return absl::OkStatus();
}
