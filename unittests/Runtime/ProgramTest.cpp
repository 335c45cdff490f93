//===- ProgramTest.cpp - Compiling, caching and loading programs ----------===//
//
// Programs here are tiny hand-written translation units that, like the ones
// `sd-lower-to-openmp` emits, embed the text of ProgramABI.h. Every test uses
// its own temporary cache directory.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Program.h"
#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace sd::rt {
namespace {

using ::sd::rt::testutil::abiHeaderText;

/// A program whose result 0 is 2 * args[0] + `offset` for 4 floats, and that
/// reports ABI version `version`.
std::string programSource(int offset, int version = SD_ABI_VERSION) {
  std::string header = abiHeaderText();
  EXPECT_NE(header.find("SD_ABI_VERSION"), std::string::npos)
      << "ProgramABI.h not found from " << __FILE__;
  return header + R"(
extern "C" int32_t sd_program_abi_version(void) { return )" +
         std::to_string(version) + R"(; }
)" + testutil::signatureText(1, 1) +
         R"(extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results) {
  const float *x = (const float *)args[0];
  float *y = (float *)api->alloc(dev, 4 * sizeof(float), SD_DEVICE_MEMORY,
                                 "%y = test");
  if (!y)
    return 1;
  for (int i = 0; i < 4; ++i)
    y[i] = 2.0f * x[i] + )" +
         std::to_string(offset) + R"(.0f;
  results[0] = y;
  return 0;
}
)";
}

/// A fresh cache directory under $TMPDIR (or /tmp), removed afterwards.
class ProgramTest : public testing::Test {
protected:
  void SetUp() override {
    root = testutil::makeTempDir("sd-program-test");
    ASSERT_FALSE(root.empty());
    // A subdirectory that does not exist yet: compileProgram creates it.
    options.cacheDir = root + "/cache/nested";
  }
  void TearDown() override { testutil::removeTempDir(root); }

  /// The message of LoadedProgram::load's error for `source`, which must
  /// compile; "" (and a test failure) when it loads.
  std::string loadError(const std::string &source) {
    absl::StatusOr<CompiledProgram> compiled = compileProgram(source, options);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    if (!compiled.ok())
      return "";
    absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
        LoadedProgram::load(compiled->libraryPath);
    EXPECT_FALSE(program.ok());
    return program.ok() ? "" : std::string(program.status().message());
  }

  std::string root;
  CompileOptions options;
};

void *testAlloc(SdDevice *, int64_t bytes, int32_t, const char *) {
  return std::malloc(static_cast<size_t>(bytes));
}

/// Loads `libraryPath`, runs it on {1, 2, 3, 4}, and returns result 0.
std::vector<float> runProgram(const std::string &libraryPath) {
  absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
      LoadedProgram::load(libraryPath);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok())
    return {};
  SdApi api{};
  api.abi_version = SD_ABI_VERSION;
  api.alloc = testAlloc;
  float x[4] = {1, 2, 3, 4};
  void *args[1] = {x};
  void *results[1] = {nullptr};
  EXPECT_EQ((*program)->entry()(&api, nullptr, args, results), 0);
  auto *y = static_cast<float *>(results[0]);
  std::vector<float> values(y, y + 4);
  std::free(y);
  return values;
}

TEST_F(ProgramTest, CompilesLoadsAndRuns) {
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_FALSE(compiled->cacheHit);
  EXPECT_GT(compiled->compileSeconds, 0.0);
  EXPECT_EQ(compiled->libraryPath,
            options.cacheDir + "/" + compiled->hash + ".so");
  EXPECT_EQ(runProgram(compiled->libraryPath),
            (std::vector<float>{3, 5, 7, 9}));
}

TEST_F(ProgramTest, SecondCompileIsACacheHitAndADifferentSourceIsNot) {
  absl::StatusOr<CompiledProgram> first =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<CompiledProgram> second =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cacheHit);
  EXPECT_EQ(second->libraryPath, first->libraryPath);
  EXPECT_LT(second->compileSeconds, first->compileSeconds);

  absl::StatusOr<CompiledProgram> other =
      compileProgram(programSource(5), options);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->cacheHit);
  EXPECT_NE(other->hash, first->hash);
  EXPECT_EQ(runProgram(other->libraryPath), (std::vector<float>{7, 9, 11, 13}));

  // Other flags are another key.
  CompileOptions withFlags = options;
  withFlags.flags = {"-O1", "-fPIC", "-shared"};
  absl::StatusOr<CompiledProgram> flagged =
      compileProgram(programSource(1), withFlags);
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_FALSE(flagged->cacheHit);
  EXPECT_NE(flagged->hash, first->hash);
}

TEST_F(ProgramTest, CorruptedCachedSourceIsNotReused) {
  absl::StatusOr<CompiledProgram> first =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(first.ok()) << first.status();
  // Another program's source and object under this hash's names.
  { std::ofstream(first->sourcePath, std::ios::trunc) << programSource(9); }
  absl::StatusOr<CompiledProgram> again =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cacheHit);
  std::ifstream stored(again->sourcePath);
  std::ostringstream text;
  text << stored.rdbuf();
  EXPECT_EQ(text.str(), programSource(1));
  EXPECT_EQ(runProgram(again->libraryPath), (std::vector<float>{3, 5, 7, 9}));
}

TEST_F(ProgramTest, SyntaxErrorQuotesDiagnosticsAndSource) {
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram("int main() { return this_is_not_declared; }\n", options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInternal);
  std::string message(compiled.status().message());
  EXPECT_NE(message.find("compiling the device program failed"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("exited with status"), std::string::npos) << message;
  EXPECT_NE(message.find("this_is_not_declared"), std::string::npos) << message;
  EXPECT_NE(message.find("the source is at " + options.cacheDir + "/"),
            std::string::npos)
      << message;
  // The failed object is not cached.
  absl::StatusOr<CompiledProgram> again =
      compileProgram("int main() { return this_is_not_declared; }\n", options);
  EXPECT_FALSE(again.ok());
}

TEST_F(ProgramTest, MissingCompilerIsAClearError) {
  options.compiler = "/nonexistent/cc";
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram(programSource(1), options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInternal);
  std::string message(compiled.status().message());
  EXPECT_NE(message.find("/nonexistent/cc"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot start the compiler"), std::string::npos)
      << message;
}

TEST_F(ProgramTest, AbiVersionMismatchIsRejected) {
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram(programSource(1, SD_ABI_VERSION + 41), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
      LoadedProgram::load(compiled->libraryPath);
  ASSERT_FALSE(program.ok());
  std::string message(program.status().message());
  EXPECT_NE(message.find("ABI version " + std::to_string(SD_ABI_VERSION + 41)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(compiled->libraryPath), std::string::npos) << message;
}

TEST_F(ProgramTest, LoadReadsTheSignature) {
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram(programSource(1), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
      LoadedProgram::load(compiled->libraryPath);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->signature().arguments,
            std::vector<ElementType>{ElementType::F32});
  EXPECT_EQ((*program)->signature().results,
            std::vector<ElementType>{ElementType::F32});
}

/// programSource(1) with its signature replaced by `signature` (the text
/// defining sd_program_signature, or nothing).
std::string withSignature(const std::string &signature) {
  std::string source = programSource(1);
  std::string own = testutil::signatureText(1, 1);
  size_t at = source.find(own);
  EXPECT_NE(at, std::string::npos);
  return source.replace(at, own.size(), signature);
}

TEST_F(ProgramTest, LoadRejectsAProgramWithoutASignature) {
  std::string message = loadError(withSignature(""));
  EXPECT_NE(message.find("lacks \"sd_program_signature\""), std::string::npos)
      << message;
}

TEST_F(ProgramTest, LoadRejectsAnUnknownElementType) {
  std::string message = loadError(
      withSignature("static const int32_t types[] = {SD_F32, 77};\n"
                    "static const SdSignature signature = {2, types, 1, "
                    "types};\n"
                    "extern \"C\" const SdSignature *sd_program_signature("
                    "void) { return &signature; }\n"));
  EXPECT_NE(message.find("argument #1 has element type 77"), std::string::npos)
      << message;
}

TEST_F(ProgramTest, LoadingAMissingLibraryNamesThePath) {
  std::string path = root + "/missing.so";
  absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
      LoadedProgram::load(path);
  ASSERT_FALSE(program.ok());
  EXPECT_NE(program.status().message().find(path), std::string::npos)
      << program.status();
}

TEST(ProgramCacheDirTest, DefaultCacheDirFollowsTheEnvironment) {
  const char *saved = std::getenv("SD_CACHE_DIR");
  std::string savedValue = saved ? saved : "";
  setenv("SD_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(defaultCacheDir(), "/some/where");
  unsetenv("SD_CACHE_DIR");
  EXPECT_FALSE(defaultCacheDir().empty());
  if (saved)
    setenv("SD_CACHE_DIR", savedValue.c_str(), 1);
}

//===----------------------------------------------------------------------===//
// Programs of several files
//===----------------------------------------------------------------------===//

TEST(SplitSourceFilesTest, ReadsSplitFileMarkers) {
  absl::StatusOr<std::vector<SourceFile>> files =
      splitSourceFiles("// a comment before the first file\n"
                       "//--- a.h\n#define A 1\n"
                       "//--- main.cpp\n#include \"a.h\"\nint x = A;\n"
                       "//--- more.cpp  \nint y;");
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].name, "a.h");
  EXPECT_EQ((*files)[0].text, "#define A 1\n");
  EXPECT_EQ((*files)[1].name, "main.cpp");
  EXPECT_EQ((*files)[1].text, "#include \"a.h\"\nint x = A;\n");
  EXPECT_EQ((*files)[2].name, "more.cpp");
  EXPECT_EQ((*files)[2].text, "int y;");
}

TEST(SplitSourceFilesTest, TextWithoutMarkersIsOneFile) {
  std::string source = "int x;\n// --- not a marker\n";
  absl::StatusOr<std::vector<SourceFile>> files = splitSourceFiles(source);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].name, "program.cpp");
  EXPECT_EQ((*files)[0].text, source);
}

TEST(SplitSourceFilesTest, RejectsNamesOutsideTheDirectory) {
  for (const char *source :
       {"//--- ../evil.cpp\n", "//--- sub/a.cpp\n", "//--- ..\n", "//--- .\n",
        "//---  \nint x;\n", "//--- /etc/passwd\n"}) {
    absl::StatusOr<std::vector<SourceFile>> files = splitSourceFiles(source);
    ASSERT_FALSE(files.ok()) << source;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(files.status().message().find("is not a file name"),
              std::string::npos)
        << files.status();
  }
}

TEST(SplitSourceFilesTest, RejectsRepeatedNamesAndNoCppFile) {
  absl::StatusOr<std::vector<SourceFile>> twice =
      splitSourceFiles("//--- a.cpp\nint x;\n//--- a.cpp\nint y;\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("file 'a.cpp' is given twice"),
            std::string::npos)
      << twice.status();
  absl::StatusOr<std::vector<SourceFile>> headers =
      splitSourceFiles("//--- a.h\nint x;\n");
  ASSERT_FALSE(headers.ok());
  EXPECT_NE(headers.status().message().find("no `.cpp` file"),
            std::string::npos)
      << headers.status();
}

/// The names in `dir`, without "." and "..".
std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *entry = readdir(d))
      if (std::string name = entry->d_name; name != "." && name != "..")
        names.push_back(name);
    closedir(d);
  }
  return names;
}

/// programSource(offset) as three files: a header, the entry and a helper
/// function defined in a file of its own.
std::string splitProgramSource(int offset) {
  return "// three files\n//--- abi.h\n" + abiHeaderText() +
         "\n//--- entry.cpp\n#include \"abi.h\"\n"
         "float helper(float x);\n"
         "extern \"C\" int32_t sd_program_abi_version(void) { return "
         "SD_ABI_VERSION; }\n" +
         testutil::signatureText(1, 1) +
         "extern \"C\" int32_t sd_program_run(const SdApi *api, SdDevice "
         "*dev, void *const *args, void **results) {\n"
         "  const float *x = (const float *)args[0];\n"
         "  float *y = (float *)api->alloc(dev, 16, SD_DEVICE_MEMORY, \"y\");\n"
         "  for (int i = 0; i < 4; ++i) y[i] = helper(x[i]);\n"
         "  results[0] = y;\n  return 0;\n}\n"
         "//--- helper.cpp\n"
         "float helper(float x) { return 2.0f * x + " +
         std::to_string(offset) + ".0f; }\n";
}

TEST_F(ProgramTest, FilesCompileInParallelWithProgress) {
  options.jobs = 2;
  std::vector<CompileProgress> events;
  options.progress = [&](const CompileProgress &p) { events.push_back(p); };
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram(splitProgramSource(1), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(runProgram(compiled->libraryPath),
            (std::vector<float>{3, 5, 7, 9}));
  // Before the first file, then after each of the two.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].done, 0);
  EXPECT_EQ(events[0].total, 2);
  EXPECT_EQ(events[0].jobs, 2);
  EXPECT_EQ(events[0].directory, compiled->sourceDir);
  EXPECT_EQ(events[2].done, 2);
  std::vector<std::string> names = {events[1].file, events[2].file};
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"entry.cpp", "helper.cpp"}));
  // The files stay in the program's directory; no object or log is left.
  for (const char *name : {"abi.h", "entry.cpp", "helper.cpp"})
    EXPECT_TRUE(std::ifstream(compiled->sourceDir + "/" + name).good()) << name;
  EXPECT_EQ(listDir(compiled->sourceDir).size(), 3u);

  // A cache hit reports no progress.
  events.clear();
  absl::StatusOr<CompiledProgram> again =
      compileProgram(splitProgramSource(1), options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cacheHit);
  EXPECT_TRUE(events.empty());
}

TEST_F(ProgramTest, AFileThatFailsIsNamedAndNothingIsCached) {
  std::string source = splitProgramSource(1);
  source.replace(source.find("return 2.0f"), 6, "retrun");
  absl::StatusOr<CompiledProgram> compiled = compileProgram(source, options);
  ASSERT_FALSE(compiled.ok());
  std::string message(compiled.status().message());
  EXPECT_NE(message.find("retrun"), std::string::npos) << message;
  EXPECT_NE(message.find("/helper.cpp"), std::string::npos) << message;
  // No library, no object: a second try compiles (and fails) again.
  absl::StatusOr<CompiledProgram> again = compileProgram(source, options);
  ASSERT_FALSE(again.ok());
  for (const std::string &name : listDir(options.cacheDir))
    EXPECT_EQ(name.find(".so"), std::string::npos) << name;
}

TEST_F(ProgramTest, AMalformedSplitSourceIsInvalidArgument) {
  absl::StatusOr<CompiledProgram> compiled =
      compileProgram("//--- ../x.cpp\nint x;\n", options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
}

} // namespace
} // namespace sd::rt
