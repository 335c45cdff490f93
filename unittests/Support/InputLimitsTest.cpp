//===- InputLimitsTest.cpp - Tests for the nesting pre-scan ---------------===//

#include "sd/Support/InputLimits.h"

#include "gtest/gtest.h"

#include <string>

using namespace sd;

namespace {

std::string nested(int depth, const std::string &open, const std::string &close,
                   const std::string &inner = "") {
  std::string text;
  for (int i = 0; i < depth; ++i)
    text += open;
  text += inner;
  for (int i = 0; i < depth; ++i)
    text += close;
  return text;
}

// Thousands of nested modules, attribute arrays or types overflowed the
// stack in MLIR's parser (SIGSEGV in sdopt): the pre-scan rejects them.
TEST(InputLimitsTest, RejectsDeepNestingWithItsPlace) {
  absl::Status status =
      checkNestingDepth("module {\n" + nested(5000, "[", "]"), "x.mlir");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "'x.mlir' is nested too deeply: more than 256 levels of brackets "
            "at line 2, column 256");
  EXPECT_FALSE(checkNestingDepth(nested(300, "tuple<", ">", "f32"), "t").ok());
  EXPECT_FALSE(checkNestingDepth(nested(300, "module {\n", "}\n"), "m").ok());
  EXPECT_FALSE(checkNestingDepth(nested(300, "([{<", ">}])"), "m").ok());
}

TEST(InputLimitsTest, AcceptsNestingUpToTheLimit) {
  EXPECT_TRUE(checkNestingDepth(nested(256, "[", "]"), "x").ok());
  EXPECT_FALSE(checkNestingDepth(nested(257, "[", "]"), "x").ok());
  EXPECT_TRUE(checkNestingDepth(nested(10, "[", "]"), "x", 10).ok());
  EXPECT_FALSE(checkNestingDepth(nested(11, "[", "]"), "x", 10).ok());
  // Siblings do not add up.
  std::string siblings;
  for (int i = 0; i < 1000; ++i)
    siblings += nested(100, "(", ")");
  EXPECT_TRUE(checkNestingDepth(siblings, "x").ok());
}

TEST(InputLimitsTest, SkipsStringsCommentsArrowsAndStrayClosers) {
  // Brackets in strings and comments do not nest.
  EXPECT_TRUE(
      checkNestingDepth("\"" + std::string(1000, '[') + "\"", "x").ok());
  EXPECT_TRUE(
      checkNestingDepth("\"\\\"" + std::string(1000, '{') + "\"", "x").ok());
  EXPECT_TRUE(
      checkNestingDepth("// " + std::string(1000, '(') + "\n", "x").ok());
  // `->` closes nothing: nested function types are still counted.
  EXPECT_FALSE(checkNestingDepth(nested(300, "() -> (", ")"), "x").ok());
  // A closer that does not match the innermost opener (`>=` in an integer
  // set) is ignored rather than popping it.
  EXPECT_TRUE(checkNestingDepth("affine_set<(d0) : (d0 >= 0)>", "x").ok());
  EXPECT_TRUE(checkNestingDepth(std::string(1000, '>'), "x").ok());
  EXPECT_FALSE(checkNestingDepth(nested(300, "[", "", ">"), "x").ok());
}

} // namespace
