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

#include <unistd.h>

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
extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
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

} // namespace
} // namespace sd::rt
