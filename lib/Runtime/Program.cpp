//===- Program.cpp - Compiling and loading device programs ----------------===//
//
// The cache key is an FNV-1a 64 hash of everything that determines the
// object. A hash collision or a corrupted cache entry cannot produce a wrong
// program: the stored source must equal the requested one byte for byte,
// otherwise the entry is rebuilt. The program's files are written to a
// directory named by the key; each `.cpp` file is one compiler run, the
// largest first, several at a time, then one link. Compilers are started
// with posix_spawnp (no shell, so paths are passed verbatim) and their
// diagnostics go to files that the error message quotes.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Program.h"
#include "sd/Runtime/Runtime.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

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

/// Starts `argv` with stdout and stderr into `logPath`; an error when it
/// could not be started.
absl::Status startCommand(const std::vector<std::string> &argv,
                          const std::string &logPath, pid_t &pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  int err =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    unlink(logPath.c_str());
    return absl::InternalError(absl::StrFormat(
        "compiling the device program failed: cannot start the compiler "
        "\"%s\": %s (set $SD_CXX or CompileOptions::compiler)",
        argv[0], std::strerror(err)));
  }
  return absl::OkStatus();
}

int compileJobs(const CompileOptions &options) {
  if (options.jobs > 0)
    return options.jobs;
  if (const char *env = std::getenv("SD_COMPILE_JOBS"); env && *env) {
    int jobs = 0;
    if (absl::SimpleAtoi(env, &jobs) && jobs > 0)
      return jobs;
  }
  return availableCpus();
}

/// The failure of a compiler run: the command, how it ended, the first
/// lines of its diagnostics and the file it compiled.
absl::Status compilerFailed(const std::vector<std::string> &argv, int status,
                            const std::string &log, const std::string &file) {
  std::string how =
      WIFEXITED(status)
          ? absl::StrCat("exited with status ", WEXITSTATUS(status))
          : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::InternalError(absl::StrFormat(
      "compiling the device program failed: `%s` %s:\n%s\nthe source is at %s",
      quoteCommand(argv), how, firstLines(log, 20), file));
}

/// One compiler run: its command, log and the file it reports on.
struct Job {
  std::vector<std::string> argv;
  std::string logPath;
  std::string file;
  pid_t pid = -1;
  std::chrono::steady_clock::time_point start;
};

/// Runs `jobs`, at most `parallel` at a time, calling `finished(index,
/// seconds)` after each success. After the first failure no job starts; the
/// running ones are waited for, and the failure is returned.
absl::Status runJobs(std::vector<Job> &jobs, int parallel,
                     const std::function<void(size_t, double)> &finished) {
  std::vector<size_t> running;
  size_t next = 0;
  absl::Status failure;
  auto stopAll = [&] {
    for (size_t i : running) {
      int ignored;
      while (waitpid(jobs[i].pid, &ignored, 0) < 0 && errno == EINTR) {
      }
      unlink(jobs[i].logPath.c_str());
    }
    running.clear();
  };
  while (next < jobs.size() || !running.empty()) {
    while (failure.ok() && next < jobs.size() &&
           static_cast<int>(running.size()) < parallel) {
      Job &job = jobs[next];
      job.start = std::chrono::steady_clock::now();
      if (absl::Status s = startCommand(job.argv, job.logPath, job.pid);
          !s.ok()) {
        stopAll();
        return s;
      }
      running.push_back(next++);
    }
    // Poll our own children only (a library must not reap others').
    bool reaped = false;
    for (auto it = running.begin(); it != running.end(); ++it) {
      Job &job = jobs[*it];
      int status = 0;
      pid_t done = waitpid(job.pid, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR))
        continue;
      size_t index = *it;
      running.erase(it);
      reaped = true;
      std::string log;
      readFile(job.logPath, log);
      unlink(job.logPath.c_str());
      if (done < 0)
        failure = absl::InternalError(
            absl::StrFormat("waiting for the compiler \"%s\" failed: %s",
                            job.argv[0], std::strerror(errno)));
      else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failure = compilerFailed(job.argv, status, log, job.file);
      else
        finished(index, std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - job.start)
                            .count());
      break;
    }
    if (!failure.ok()) {
      stopAll();
      return failure;
    }
    if (!reaped)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::vector<SourceFile>>
splitSourceFiles(std::string_view source) {
  constexpr std::string_view kMarker = "//--- ";
  std::vector<SourceFile> files;
  size_t lineStart = 0;
  while (lineStart < source.size()) {
    size_t lineEnd = source.find('\n', lineStart);
    size_t next =
        lineEnd == std::string_view::npos ? source.size() : lineEnd + 1;
    std::string_view line = source.substr(lineStart, next - lineStart);
    if (line.substr(0, kMarker.size()) == kMarker) {
      if (!files.empty())
        files.back().text = std::string_view(files.back().text.data(),
                                             source.data() + lineStart -
                                                 files.back().text.data());
      std::string name(absl::StripAsciiWhitespace(absl::string_view(
          line.data() + kMarker.size(), line.size() - kMarker.size())));
      if (name.empty() || name == "." || name == ".." ||
          name.find('/') != std::string::npos)
        return absl::InvalidArgumentError(absl::StrFormat(
            "device program source: '%s' is not a file name (a `//--- NAME` "
            "line names a file in the program's directory)",
            name));
      for (const SourceFile &file : files)
        if (file.name == name)
          return absl::InvalidArgumentError(absl::StrFormat(
              "device program source: file '%s' is given twice", name));
      files.push_back({name, source.substr(next)});
    }
    lineStart = next;
  }
  if (files.empty())
    return std::vector<SourceFile>{{"program.cpp", source}};
  if (std::none_of(files.begin(), files.end(), [](const SourceFile &file) {
        return absl::EndsWith(file.name, ".cpp");
      }))
    return absl::InvalidArgumentError(
        "device program source: no `.cpp` file to compile");
  return files;
}

absl::StatusOr<CompiledProgram> compileProgram(std::string_view source,
                                               const CompileOptions &options) {
  auto start = std::chrono::steady_clock::now();
  std::string compiler = options.compiler;
  if (compiler.empty()) {
    const char *env = std::getenv("SD_CXX");
    compiler = env && *env ? env : "c++";
  }
  std::vector<std::string> flags = options.flags;
  // -fno-trapping-math: GCC if-converts the selects of the transcendental
  // helpers (sd_exp's overflow and NaN cases) and of bf16 rounding only
  // when a float comparison may not trap; without it a kernel with an exp,
  // a sigmoid or a bf16 rounding stays scalar. It allows no reassociation:
  // each element gets the same operations; only the floating-point
  // exception flags, which sd never reads, may differ.
  //
  // -mprefer-vector-width=512: on a CPU with AVX-512 GCC otherwise keeps to
  // 256-bit vectors. A bf16 fused loop rounds each bf16 op's result
  // (sd_round_bf16) and is bound by its arithmetic: on an Intel Xeon with
  // AMX, a GELU backward rounded after each of its ops took 10 ms a call in
  // bf16 against 2.5 ms in f32 at 256 bits. Lanes do not change what each
  // element computes, and on a CPU without AVX-512 the flag changes nothing
  // (the same object code).
  if (flags.empty())
    flags = {
        "-O3",   "-march=native",   "-mprefer-vector-width=512", "-fopenmp",
        "-fPIC", "-fno-math-errno", "-fno-trapping-math"};
  std::string cacheDir =
      options.cacheDir.empty() ? defaultCacheDir() : options.cacheDir;
  absl::StatusOr<std::vector<SourceFile>> files = splitSourceFiles(source);
  if (!files.ok())
    return files.status();
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
  result.sourceDir = base;
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

  // The files, in the program's own directory; the largest compile first.
  if (absl::Status s = makeDirectories(result.sourceDir); !s.ok())
    return s;
  if (absl::Status s = writeFileAtomically(result.sourcePath, source); !s.ok())
    return s;
  std::vector<const SourceFile *> units;
  for (const SourceFile &file : *files) {
    if (absl::Status s = writeFileAtomically(
            absl::StrCat(result.sourceDir, "/", file.name), file.text);
        !s.ok())
      return s;
    if (absl::EndsWith(file.name, ".cpp"))
      units.push_back(&file);
  }
  std::stable_sort(units.begin(), units.end(),
                   [](const SourceFile *a, const SourceFile *b) {
                     return a->text.size() > b->text.size();
                   });
  std::vector<Job> jobs;
  std::vector<std::string> objects;
  for (const SourceFile *unit : units) {
    std::string path = absl::StrCat(result.sourceDir, "/", unit->name);
    objects.push_back(temporaryName(path + ".o"));
    Job job;
    job.argv = {compiler};
    job.argv.insert(job.argv.end(), flags.begin(), flags.end());
    job.argv.insert(job.argv.end(), {"-c", "-o", objects.back(), path});
    job.logPath = temporaryName(path + ".log");
    job.file = path;
    jobs.push_back(std::move(job));
  }
  auto removeObjects = [&] {
    for (const std::string &object : objects)
      unlink(object.c_str());
  };
  CompileProgress progress;
  progress.total = static_cast<int>(jobs.size());
  progress.jobs = std::min(compileJobs(options), progress.total);
  progress.directory = result.sourceDir;
  if (options.progress)
    options.progress(progress);
  absl::Status compiled =
      runJobs(jobs, progress.jobs, [&](size_t index, double seconds) {
        ++progress.done;
        progress.file = units[index]->name;
        progress.seconds = seconds;
        if (options.progress)
          options.progress(progress);
      });
  if (!compiled.ok()) {
    removeObjects();
    return compiled;
  }

  std::string tmpLibrary = temporaryName(result.libraryPath);
  std::vector<Job> link(1);
  link[0].argv = {compiler};
  link[0].argv.insert(link[0].argv.end(), flags.begin(), flags.end());
  link[0].argv.insert(link[0].argv.end(), {"-shared", "-o", tmpLibrary});
  link[0].argv.insert(link[0].argv.end(), objects.begin(), objects.end());
  link[0].logPath = temporaryName(base + ".log");
  link[0].file = result.sourceDir;
  absl::Status linked = runJobs(link, 1, [](size_t, double) {});
  removeObjects();
  if (!linked.ok()) {
    unlink(tmpLibrary.c_str());
    return linked;
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

/// The element types `abi` lists; an error naming the buffer whose type the
/// runtime does not know.
static absl::StatusOr<ProgramSignature>
readSignature(const SdSignature &abi, const std::string &libraryPath) {
  ProgramSignature signature;
  auto read = [&](int32_t count, const int32_t *types, const char *what,
                  std::vector<ElementType> &out) -> absl::Status {
    if (count < 0 || (count > 0 && !types))
      return absl::InternalError(absl::StrFormat(
          "device program \"%s\" has a malformed signature (%d %ss)",
          libraryPath, count, what));
    for (int32_t i = 0; i < count; ++i) {
      std::optional<ElementType> type = elementTypeFromAbi(types[i]);
      if (!type)
        return absl::InternalError(absl::StrFormat(
            "device program \"%s\": %s #%d has element type %d, which the "
            "runtime does not know",
            libraryPath, what, i, types[i]));
      out.push_back(*type);
    }
    return absl::OkStatus();
  };
  if (absl::Status status =
          read(abi.num_args, abi.arg_types, "argument", signature.arguments);
      !status.ok())
    return status;
  if (absl::Status status =
          read(abi.num_results, abi.result_types, "result", signature.results);
      !status.ok())
    return status;
  return signature;
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
  void *describe = dlsym(handle, SD_PROGRAM_SIGNATURE_NAME);
  const SdSignature *abiSignature =
      describe ? reinterpret_cast<const SdSignature *(*)()>(describe)()
               : nullptr;
  if (!abiSignature)
    return fail(absl::StrFormat("device program \"%s\" lacks \"%s\"",
                                libraryPath, SD_PROGRAM_SIGNATURE_NAME));
  absl::StatusOr<ProgramSignature> signature =
      readSignature(*abiSignature, libraryPath);
  if (!signature.ok())
    return fail(std::string(signature.status().message()));
  return std::unique_ptr<LoadedProgram>(new LoadedProgram(
      handle, reinterpret_cast<SdProgramEntry>(entry), std::move(*signature)));
}

LoadedProgram::~LoadedProgram() {
  if (handle)
    dlclose(handle);
}

} // namespace sd::rt
