//===- YamlTextTest.cpp - Tests for strings in the YAML sd writes ---------===//

#include "sd/Support/YamlText.h"

#include "gtest/gtest.h"

using namespace sd;

namespace {

TEST(YamlQuotedTest, DoublesSingleQuotes) {
  EXPECT_EQ(yamlQuoted("embed"), "'embed'");
  EXPECT_EQ(yamlQuoted("it's"), "'it''s'");
  EXPECT_EQ(yamlQuoted("''"), "''''''");
  EXPECT_EQ(yamlQuoted(""), "''");
}

TEST(YamlCommentTextTest, KeepsToOneLine) {
  EXPECT_EQ(yamlCommentText("rules/a.yml"), "rules/a.yml");
  EXPECT_EQ(yamlCommentText("a\nb\r\nc"), "a b  c");
}

} // namespace
