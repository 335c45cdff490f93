//===- NumbersTest.cpp - Tests for numbers that read back exactly ---------===//

#include "sd/Support/Numbers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

using namespace sd;

namespace {

TEST(ShortestDoubleTest, WritesTheShortestText) {
  EXPECT_EQ(shortestDouble(0.125), "0.125");
  EXPECT_EQ(shortestDouble(1.0), "1");
  EXPECT_EQ(shortestDouble(3e-05), "3e-05");
  EXPECT_EQ(shortestDouble(-2.5), "-2.5");
  // A per-device batch of 1 over 8 devices (a plan's config): every digit,
  // not two decimals.
  EXPECT_EQ(shortestDouble(1.0 / 8.0), "0.125");
  EXPECT_EQ(shortestDouble(0.12), "0.12");
}

TEST(ShortestDoubleTest, ReadsBackExactly) {
  for (double value : {1.0 / 3.0, 0.1, 1e-300, 123456789.123456789,
                       std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::denorm_min()}) {
    std::string text = shortestDouble(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
  }
}

} // namespace
