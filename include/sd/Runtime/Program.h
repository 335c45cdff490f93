//===- Program.h - Compiling and loading device programs --------*- C++ -*-===//
//
// A device program is the C++ that `sd-lower-to-openmp` emits: a few files in
// LLVM's split-file form (each starts at a `//--- NAME` line; a text without
// one is a single `program.cpp`). Each `.cpp` file is compiled by the system
// compiler on its own, several at a time, and the objects are linked into a
// shared object, cached by the content hash of everything that determines it
// (source, compiler, flags, ABI version) under the user's cache directory,
// and loaded with dlopen. A cached object is reused only when the source
// stored beside it is byte-for-byte the one asked for.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_PROGRAM_H
#define SD_RUNTIME_PROGRAM_H

#include "sd/Runtime/ElementType.h"
#include "sd/Runtime/ProgramABI.h"

#include "absl/status/statusor.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sd::rt {

/// How far a compilation is, reported after each step.
struct CompileProgress {
  /// The files compiled so far (0 before the first), of `total`; the link
  /// comes after the last.
  int done = 0;
  int total = 0;
  /// The file just compiled (empty before the first) and how long it took.
  std::string file;
  double seconds = 0;
  /// The compilers run at once, and the directory holding the files.
  int jobs = 0;
  std::string directory;
};

struct CompileOptions {
  /// The compiler; empty means $SD_CXX, else `c++`.
  std::string compiler;
  /// Empty means the defaults: -O3 -march=native -mprefer-vector-width=512
  /// -fopenmp -fPIC -fno-math-errno -fno-trapping-math. Each file is compiled
  /// with these and `-c`; the objects are linked with these and `-shared`.
  std::vector<std::string> flags;
  /// Empty means defaultCacheDir().
  std::string cacheDir;
  /// Compilers run at once; 0 means $SD_COMPILE_JOBS, else the machine's
  /// hardware threads.
  int jobs = 0;
  /// Called (on the calling thread) before the first file and after each;
  /// never on a cache hit.
  std::function<void(const CompileProgress &)> progress;
};

/// A source file of a device program.
struct SourceFile {
  std::string name;
  std::string_view text;
};

/// The files of `source` in split-file form: each `//--- NAME` line starts
/// file NAME (text before the first is a comment); a text without one is a
/// single `program.cpp`. A name must be a plain file name (no `/`, not `.`
/// or `..`), given once.
absl::StatusOr<std::vector<SourceFile>>
splitSourceFiles(std::string_view source);

/// $SD_CACHE_DIR, else $XDG_CACHE_HOME/sd, else $HOME/.cache/sd, else
/// /tmp/sd-cache-$UID.
std::string defaultCacheDir();

struct CompiledProgram {
  std::string libraryPath;
  /// The whole source, and the directory holding its files.
  std::string sourcePath;
  std::string sourceDir;
  std::string hash;
  bool cacheHit = false;
  double compileSeconds = 0;
};

/// Compiles `source` (or finds it in the cache). Writes are atomic (a
/// temporary name, then rename), so concurrent compilers and killed runs never
/// leave a partial object under the final name. A compiler that fails or
/// cannot be started is an Internal error quoting the command, the first
/// lines of its diagnostics, and the path of the file it compiled; a source
/// whose split-file form is malformed is InvalidArgument.
absl::StatusOr<CompiledProgram> compileProgram(std::string_view source,
                                               const CompileOptions &options);

/// The element types of a program entry's arguments and results.
struct ProgramSignature {
  std::vector<ElementType> arguments, results;
};

/// A loaded program; unloads on destruction.
class LoadedProgram {
public:
  /// dlopen()s `libraryPath`; fails when it cannot be loaded, lacks the entry
  /// point or the signature, was compiled against another SD_ABI_VERSION, or
  /// its signature names an element type the runtime does not know.
  static absl::StatusOr<std::unique_ptr<LoadedProgram>>
  load(const std::string &libraryPath);
  ~LoadedProgram();
  LoadedProgram(const LoadedProgram &) = delete;
  LoadedProgram &operator=(const LoadedProgram &) = delete;

  SdProgramEntry entry() const { return entryPoint; }
  const ProgramSignature &signature() const { return programSignature; }

private:
  LoadedProgram(void *handle, SdProgramEntry entry, ProgramSignature signature)
      : handle(handle), entryPoint(entry),
        programSignature(std::move(signature)) {}
  void *handle;
  SdProgramEntry entryPoint;
  ProgramSignature programSignature;
};

} // namespace sd::rt

#endif // SD_RUNTIME_PROGRAM_H
