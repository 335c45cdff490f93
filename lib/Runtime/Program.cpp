//===- Program.cpp - Compiling and loading device programs ----------------===//
//
// The cache key is an FNV-1a 64 hash of everything that determines the
// object. A hash collision or a corrupted cache entry cannot produce a wrong
// program: the stored source must equal the requested one byte for byte,
// otherwise the entry is rebuilt. The compiler is started with posix_spawnp
// (no shell, so paths are passed verbatim) and its diagnostics go to a file
// that the error message quotes.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Program.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char **environ;

namespace sd::rt {

std::string defaultCacheDir() {
  if (const char *dir = std::getenv("SD_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return absl::StrCat(xdg, "/sd");
  if (const char *home = std::getenv("HOME"); home && *home)
    return absl::StrCat(home, "/.cache/sd");
  return absl::StrCat("/tmp/sd-cache-", getuid());
}

namespace {

/// FNV-1a, 64 bits, continued from `hash`.
uint64_t fnv1a(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

/// mkdir -p.
absl::Status makeDirectories(const std::string &path) {
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
    if (prefix.empty())
      continue;
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return absl::InternalError(
          absl::StrFormat("cannot create the cache directory \"%s\": %s",
                          prefix, std::strerror(errno)));
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InternalError(
        absl::StrFormat("cache path \"%s\" is not a directory", path));
  return absl::OkStatus();
}

bool fileExists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// The whole file, or false when it cannot be read.
bool readFile(const std::string &path, std::string &contents) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return false;
  std::ostringstream buffer;
  buffer << file.rdbuf();
  contents = buffer.str();
  return !file.bad();
}

/// A name for a temporary beside `path`, unique across threads and processes.
std::string temporaryName(const std::string &path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(path, ".tmp.", getpid(), ".", counter.fetch_add(1));
}

/// Writes `contents` to `path` atomically (temporary file, then rename).
absl::Status writeFileAtomically(const std::string &path,
                                 std::string_view contents) {
  std::string tmp = temporaryName(path);
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    file.close();
    if (!file) {
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrFormat("cannot write \"%s\"", tmp));
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrFormat(
        "cannot rename \"%s\" to \"%s\": %s", tmp, path, std::strerror(err)));
  }
  return absl::OkStatus();
}

/// The command line for messages; arguments with spaces or quotes are quoted.
std::string quoteCommand(const std::vector<std::string> &argv) {
  std::vector<std::string> parts;
  for (const std::string &arg : argv) {
    if (!arg.empty() && arg.find_first_of(" \t\"'\\$") == std::string::npos) {
      parts.push_back(arg);
      continue;
    }
    std::string quoted = "'";
    for (char c : arg)
      quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    parts.push_back(quoted + "'");
  }
  return absl::StrJoin(parts, " ");
}

/// The first `maxLines` lines of `text`, with a note when some were left out.
std::string firstLines(const std::string &text, int maxLines) {
  std::istringstream stream(text);
  std::string line, result;
  int count = 0;
  while (std::getline(stream, line)) {
    if (count++ == maxLines) {
      result += "...\n";
      break;
    }
    result += line + "\n";
  }
  if (!result.empty())
    result.pop_back();
  return result;
}

/// Runs `argv` with stdout and stderr into `logPath`; returns its wait status
/// in `status`, or an error when it could not be started.
absl::Status runCommand(const std::vector<std::string> &argv,
                        const std::string &logPath, int &status) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int err =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    return absl::InternalError(absl::StrFormat(
        "compiling the device program failed: cannot start the compiler "
        "\"%s\": %s (set $SD_CXX or CompileOptions::compiler)",
        argv[0], std::strerror(err)));
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return absl::InternalError(
          absl::StrFormat("waiting for the compiler \"%s\" failed: %s", argv[0],
                          std::strerror(errno)));
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<CompiledProgram> compileProgram(std::string_view source,
                                               const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  std::string compiler = options.compiler;
  if (compiler.empty()) {
    const char *env = std::getenv("SD_CXX");
    compiler = env && *env ? env : "c++";
  }
  std::vector<std::string> flags = options.flags;
  if (flags.empty())
    flags = {"-O3",   "-march=native", "-fopenmp",
             "-fPIC", "-shared",       "-fno-math-errno"};
  std::string cacheDir =
      options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
  if (absl::Status s = makeDirectories(cacheDir); !s.ok())
    return s;

  // The key: source, compiler, flags and ABI version, NUL-separated.
  uint64_t hash = fnv1a(source, 0xcbf29ce484222325ULL);
  hash = fnv1a(std::string_view("\0", 1), hash);
  hash = fnv1a(compiler, hash);
  for (const std::string &flag : flags) {
    hash = fnv1a(std::string_view("\0", 1), hash);
    hash = fnv1a(flag, hash);
  }
  hash = fnv1a(std::string_view("\0abi", 4), hash);
  hash = fnv1a(absl::StrCat(SD_ABI_VERSION), hash);

  CompiledProgram result;
  result.hash = absl::StrFormat("%016x", hash);
  std::string base = absl::StrCat(cacheDir, "/", result.hash);
  result.sourcePath = base + ".cpp";
  result.libraryPath = base + ".so";
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };

  std::string stored;
  if (fileExists(result.libraryPath) && readFile(result.sourcePath, stored) &&
      stored == source) {
    result.cacheHit = true;
    result.compileSeconds = elapsed();
    return result;
  }

  if (absl::Status s = writeFileAtomically(result.sourcePath, source); !s.ok())
    return s;
  std::string tmpLibrary = temporaryName(result.libraryPath);
  std::string logPath = temporaryName(base + ".log");
  std::vector<std::string> argv = {compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", tmpLibrary, result.sourcePath});
  int status = 0;
  absl::Status started = runCommand(argv, logPath, status);
  std::string log;
  readFile(logPath, log);
  unlink(logPath.c_str());
  if (!started.ok()) {
    unlink(tmpLibrary.c_str());
    return started;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    unlink(tmpLibrary.c_str());
    std::string how =
        WIFEXITED(status)
            ? absl::StrCat("exited with status ", WEXITSTATUS(status))
            : absl::StrCat("was killed by signal ", WTERMSIG(status));
    return absl::InternalError(absl::StrFormat(
        "compiling the device program failed: `%s` %s:\n%s\nthe source is at "
        "%s",
        quoteCommand(argv), how, firstLines(log, 20), result.sourcePath));
  }
  if (rename(tmpLibrary.c_str(), result.libraryPath.c_str()) != 0) {
    int err = errno;
    unlink(tmpLibrary.c_str());
    return absl::InternalError(
        absl::StrFormat("cannot rename \"%s\" to \"%s\": %s", tmpLibrary,
                        result.libraryPath, std::strerror(err)));
  }
  result.compileSeconds = elapsed();
  return result;
}

absl::StatusOr<std::unique_ptr<LoadedProgram>>
LoadedProgram::load(const std::string &libraryPath) {
  void *handle = dlopen(libraryPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return absl::InternalError(absl::StrFormat(
        "cannot load the device program \"%s\": %s", libraryPath, dlerror()));
  auto fail = [&](std::string message) {
    dlclose(handle);
    return absl::InternalError(message);
  };
  dlerror();
  void *entry = dlsym(handle, SD_PROGRAM_ENTRY_NAME);
  if (!entry) {
    const char *err = dlerror();
    return fail(absl::StrFormat(
        "device program \"%s\" lacks the entry point \"%s\": %s", libraryPath,
        SD_PROGRAM_ENTRY_NAME, err ? err : "null symbol"));
  }
  void *version = dlsym(handle, SD_PROGRAM_ABI_NAME);
  if (!version) {
    const char *err = dlerror();
    return fail(absl::StrFormat("device program \"%s\" lacks \"%s\": %s",
                                libraryPath, SD_PROGRAM_ABI_NAME,
                                err ? err : "null symbol"));
  }
  int32_t programVersion = reinterpret_cast<int32_t (*)()>(version)();
  if (programVersion != SD_ABI_VERSION)
    return fail(absl::StrFormat(
        "device program \"%s\" was compiled against ABI version %d, but the "
        "runtime has version %d; recompile it",
        libraryPath, programVersion, SD_ABI_VERSION));
  return std::unique_ptr<LoadedProgram>(
      new LoadedProgram(handle, reinterpret_cast<SdProgramEntry>(entry)));
}

LoadedProgram::~LoadedProgram() {
  if (handle)
    dlclose(handle);
}

} // namespace sd::rt
