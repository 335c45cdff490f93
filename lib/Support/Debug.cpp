//===- Debug.cpp - -debug and -debug-only for a release LLVM --------------===//
//
// The command-line switches of LLVM's debug output, registered by sd's tools
// where libLLVM (a release build) leaves them out. They drive the same
// llvm::DebugFlag and debug-type list that LLVM's own switches would, so
// LLVM_DEBUG in sd's code (sd/Support/Debug.h) behaves as in an LLVM build
// with assertions.
//
//===----------------------------------------------------------------------===//

#include "sd/Support/Debug.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <string>
#include <vector>

namespace cl = llvm::cl;

namespace {
/// The location of -debug-only: each occurrence adds its comma-separated
/// types and turns debug output on, as LLVM's own option does.
struct DebugOnlyLocation {
  void operator=(const std::string &value) const {
    if (value.empty())
      return;
    llvm::DebugFlag = true;
    llvm::SmallVector<llvm::StringRef> names;
    llvm::StringRef(value).split(names, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef name : names)
      types().push_back(name.str());
    std::vector<const char *> pointers;
    for (const std::string &type : types())
      pointers.push_back(type.c_str());
    llvm::setCurrentDebugTypes(pointers.data(), pointers.size());
  }
  /// Every type given so far (setCurrentDebugTypes replaces the list).
  static std::vector<std::string> &types() {
    static std::vector<std::string> all;
    return all;
  }
};
} // namespace

void sd::registerDebugOptions() {
  const auto &options = cl::getRegisteredOptions();
  if (options.count("debug") || options.count("debug-only"))
    return;
  // Function-local statics: registered once, on the first call.
  static cl::opt<bool, /*ExternalStorage=*/true> debug(
      "debug", cl::desc("Enable debug output"), cl::Hidden,
      cl::location(llvm::DebugFlag));
  static DebugOnlyLocation debugOnlyLocation;
  static cl::opt<DebugOnlyLocation, /*ExternalStorage=*/true,
                 cl::parser<std::string>>
      debugOnly("debug-only",
                cl::desc("Enable a specific type of debug output (comma "
                         "separated list of types)"),
                cl::Hidden, cl::value_desc("debug string"),
                cl::location(debugOnlyLocation), cl::ValueRequired);
}
