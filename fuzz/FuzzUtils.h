//===- FuzzUtils.h - Shared helpers of sd's fuzz targets --------*- C++ -*-===//
//
// Splitting one fuzzer input into the several strings a target needs, and
// the check that turns a broken invariant into a crash the fuzzer reports.
//
//===----------------------------------------------------------------------===//

#ifndef SD_FUZZ_FUZZUTILS_H
#define SD_FUZZ_FUZZUTILS_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace sd::fuzz {

/// The input as text.
inline std::string_view asText(const uint8_t *data, size_t size) {
  return std::string_view(reinterpret_cast<const char *>(data), size);
}

/// Splits `text` at `separator` lines into at most `parts` pieces (the last
/// takes the rest), so one corpus file holds e.g. a mesh and a dcn mesh.
inline std::vector<std::string_view> splitLines(std::string_view text,
                                                size_t parts) {
  std::vector<std::string_view> pieces;
  while (pieces.size() + 1 < parts) {
    size_t newline = text.find('\n');
    if (newline == std::string_view::npos)
      break;
    pieces.push_back(text.substr(0, newline));
    text.remove_prefix(newline + 1);
  }
  pieces.push_back(text);
  pieces.resize(parts);
  return pieces;
}

/// An invariant of the code under test: a failure is a bug, which the
/// fuzzer reports as a crash with `what`.
inline void check(bool condition, const char *what) {
  if (condition)
    return;
  std::fprintf(stderr, "sd fuzz invariant failed: %s\n", what);
  std::abort();
}

} // namespace sd::fuzz

/// ASan's defaults for every target (each includes this header once).
/// LLVM's headers poison and unpoison BumpPtrAllocator slabs when compiled
/// with ASan, but libLLVM.so and libMLIR.so are not: memory our inlined
/// copy poisons is then used by theirs, a false "use-after-poison". Manual
/// poisoning is off; ASan still checks every access of sd's code.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

#endif // SD_FUZZ_FUZZUTILS_H
