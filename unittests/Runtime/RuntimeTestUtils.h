//===- RuntimeTestUtils.h - Helpers of the runtime tests --------*- C++ -*-===//
//
// Tests that compile hand-written device programs embed the ABI header the
// way generated programs do, and keep compiled programs (and other files)
// in temporary directories of their own.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
#define SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H

#include "sd/Runtime/Program.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace sd::rt::testutil {

/// The text of include/sd/Runtime/ProgramABI.h (SD_SOURCE_DIR is the
/// repository root, set by unittests/Runtime/CMakeLists.txt).
inline std::string abiHeaderText() {
  std::ifstream in(std::string(SD_SOURCE_DIR) +
                   "/include/sd/Runtime/ProgramABI.h");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The definition of sd_program_signature for an entry of `numArgs` f32
/// arguments and `numResults` f32 results (each at least 1).
inline std::string signatureText(int numArgs, int numResults) {
  auto table = [](const char *name, int count) {
    std::string text = std::string("static const int32_t ") + name + "[] = {";
    for (int i = 0; i < count; ++i)
      text += "SD_F32, ";
    return text + "};\n";
  };
  return table("sd_test_arg_types", numArgs) +
         table("sd_test_result_types", numResults) +
         "static const SdSignature sd_test_signature = {" +
         std::to_string(numArgs) + ", sd_test_arg_types, " +
         std::to_string(numResults) +
         ", sd_test_result_types};\n"
         "extern \"C\" const SdSignature *sd_program_signature(void) {\n"
         "  return &sd_test_signature;\n}\n";
}

/// A whole program: the ABI header, the version entry point of the current
/// ABI, the signature of `numArgs` f32 arguments and `numResults` f32
/// results, then `body` (which defines sd_program_run).
inline std::string programText(const std::string &body, int numArgs,
                               int numResults) {
  std::string header = abiHeaderText();
  EXPECT_NE(header.find("SD_ABI_VERSION"), std::string::npos)
      << "ProgramABI.h not found from " << __FILE__;
  return header + R"(
extern "C" int32_t sd_program_abi_version(void) { return SD_ABI_VERSION; }
)" + signatureText(numArgs, numResults) +
         body;
}

/// Compiles `source` with its cache in `cacheDir` and loads it; null (and a
/// test failure) when either step fails.
inline std::unique_ptr<LoadedProgram>
compileAndLoad(const std::string &source, const std::string &cacheDir) {
  CompileOptions options;
  options.cacheDir = cacheDir;
  absl::StatusOr<CompiledProgram> compiled = compileProgram(source, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok())
    return nullptr;
  absl::StatusOr<std::unique_ptr<LoadedProgram>> program =
      LoadedProgram::load(compiled->libraryPath);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? std::move(*program) : nullptr;
}

/// `n` floats uniform in [lo, hi) from stream `seed`: operands of the
/// kernel tests.
inline std::vector<float> randomFloats(int64_t n, uint32_t seed,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(n));
  for (float &x : values)
    x = dist(gen);
  return values;
}

/// A fresh directory `$TMPDIR/<prefix>-XXXXXX` (/tmp without TMPDIR); empty
/// (and a test failure) when it cannot be made.
inline std::string makeTempDir(const std::string &prefix) {
  const char *tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(pattern.data())) {
    ADD_FAILURE() << "cannot create " << pattern;
    return "";
  }
  return pattern;
}

/// Removes `dir` and everything in it.
inline void removeTempDir(const std::string &dir) {
  std::string command = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

/// A fixture whose suite shares one temporary directory, `*root` (named
/// after the suite), made before its first test and removed after its last.
/// `Suite` is the derived fixture, so that every suite has its own `root`.
template <typename Suite> class SuiteTempDirTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    const testing::TestSuite *suite =
        testing::UnitTest::GetInstance()->current_test_suite();
    root = new std::string(makeTempDir(std::string("sd-") + suite->name()));
    ASSERT_FALSE(root->empty());
  }
  static void TearDownTestSuite() {
    removeTempDir(*root);
    delete root;
    root = nullptr;
  }

  static inline std::string *root = nullptr;
};

} // namespace sd::rt::testutil

#endif // SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
