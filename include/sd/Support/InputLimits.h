//===- InputLimits.h - Limits on hostile text input -------------*- C++ -*-===//
//
// Recursive-descent parsers (MLIR's, llvm::json's) recurse once per level of
// nesting, so a few thousand nested modules, attribute arrays or types
// overflow the stack before the parser can report anything. sd's tools call
// checkNestingDepth on a file's text before they parse it, so deeply nested
// input gets one clear error instead of a SIGSEGV. MLIR-free, so the runtime
// side (safetensors headers) uses it too.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_INPUTLIMITS_H
#define SD_SUPPORT_INPUTLIMITS_H

#include "absl/status/status.h"

#include <cstdint>
#include <string_view>

namespace sd {

/// The deepest bracket nesting sd accepts in a program or a JSON header.
/// Real programs nest about 10 levels; MLIR's parser built with ASan still
/// has stack to spare at this depth (fuzz/, docs/fuzzing.md).
constexpr int64_t kMaxInputNesting = 256;

/// Checks that `text` nests brackets ((), [], {}, <>) no deeper than
/// `maxDepth`. A cheap single pass, not a parser: string literals ("...",
/// with backslash escapes) and `//` line comments are skipped, `->` is not a
/// bracket, and a closing bracket that does not match the innermost open one
/// is ignored (as `>` in `d0 >= 0`), so valid input is never rejected below
/// the limit. InvalidArgument naming `what` and the line and column where
/// the limit is passed: "'x.mlir' is nested too deeply: more than 256 levels
/// of brackets at line 3, column 700".
absl::Status checkNestingDepth(std::string_view text, std::string_view what,
                               int64_t maxDepth = kMaxInputNesting);

} // namespace sd

#endif // SD_SUPPORT_INPUTLIMITS_H
