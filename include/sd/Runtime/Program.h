//===- Program.h - Compiling and loading device programs --------*- C++ -*-===//
//
// A device program is the C++ translation unit `sd-lower-to-openmp` emits.
// It is compiled by the system compiler into a shared object, cached by the
// content hash of everything that determines the object (source, compiler,
// flags, ABI version) under the user's cache directory, and loaded with
// dlopen. A cached object is reused only when the source stored beside it is
// byte-for-byte the one asked for.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_PROGRAM_H
#define SD_RUNTIME_PROGRAM_H

#include "sd/Runtime/ProgramABI.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sd::rt {

struct CompileOptions {
  /// The compiler; empty means $SD_CXX, else `c++`.
  std::string compiler;
  /// Empty means the defaults: -O3 -march=native -fopenmp -fPIC -shared
  /// -fno-math-errno.
  std::vector<std::string> flags;
  /// Empty means defaultCacheDir().
  std::string cacheDir;
};

/// $SD_CACHE_DIR, else $XDG_CACHE_HOME/sd, else $HOME/.cache/sd, else
/// /tmp/sd-cache-$UID.
std::string defaultCacheDir();

struct CompiledProgram {
  std::string libraryPath;
  std::string sourcePath;
  std::string hash;
  bool cacheHit = false;
  double compileSeconds = 0;
};

/// Compiles `source` (or finds it in the cache). Writes are atomic (a
/// temporary name, then rename), so concurrent compilers and killed runs never
/// leave a partial object under the final name. A compiler that fails or
/// cannot be started is an Internal error quoting the command, the first
/// lines of its diagnostics, and the path where the source was kept.
absl::StatusOr<CompiledProgram> compileProgram(std::string_view source,
                                               const CompileOptions &options);

/// A loaded program; unloads on destruction.
class LoadedProgram {
public:
  /// dlopen()s `libraryPath`; fails when it cannot be loaded, lacks the entry
  /// point, or was compiled against another SD_ABI_VERSION.
  static absl::StatusOr<std::unique_ptr<LoadedProgram>>
  load(const std::string &libraryPath);
  ~LoadedProgram();
  LoadedProgram(const LoadedProgram &) = delete;
  LoadedProgram &operator=(const LoadedProgram &) = delete;

  SdProgramEntry entry() const { return entryPoint; }

private:
  LoadedProgram(void *handle, SdProgramEntry entry)
      : handle(handle), entryPoint(entry) {}
  void *handle;
  SdProgramEntry entryPoint;
};

} // namespace sd::rt

#endif // SD_RUNTIME_PROGRAM_H
