//===- BFloat16Test.cpp - bfloat16 conversions, bf16 host tensors ---------===//

#include "sd/Runtime/BFloat16.h"
#include "sd/Runtime/HostTensor.h"
#include "sd/Runtime/ProgramABI.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace sd::rt;

namespace {

float floatOfBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

bool isNan(BFloat16 value) { return std::isnan(toFloat(value)); }

/// The nearest bfloat16 to a finite `value` by the definition: of the two
/// bfloat16 numbers around it, the closer in double arithmetic, on a tie the
/// one whose last mantissa bit is 0; past the largest finite, infinity
/// where round-to-nearest puts it.
uint16_t nearestByDefinition(float value) {
  uint32_t bits = bitsOf(value);
  uint16_t down = static_cast<uint16_t>(bits >> 16);
  if ((bits & 0xffffu) == 0)
    return down;
  uint16_t up = static_cast<uint16_t>(down + 1);
  double x = value;
  double below = toFloat(BFloat16{down});
  // `up` may be infinity: the value halfway to it is 2^128 - 2^119.
  double above = (up & 0x7fffu) == 0x7f80u
                     ? std::copysign(std::ldexp(1.0, 128), x)
                     : static_cast<double>(toFloat(BFloat16{up}));
  double distanceDown = std::fabs(x - below), distanceUp = std::fabs(above - x);
  if (distanceDown != distanceUp)
    return distanceDown < distanceUp ? down : up;
  return (down & 1u) == 0 ? down : up;
}

} // namespace

TEST(BFloat16Test, EveryBFloat16SurvivesTheRoundTrip) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    BFloat16 value{static_cast<uint16_t>(bits)};
    BFloat16 back = toBFloat16(toFloat(value));
    if (isNan(value)) {
      EXPECT_TRUE(isNan(back)) << std::hex << bits;
      EXPECT_EQ(back.bits & 0x8000u, bits & 0x8000u) << std::hex << bits;
      continue;
    }
    EXPECT_EQ(back.bits, bits) << std::hex << bits;
  }
}

TEST(BFloat16Test, RoundsToTheNearestTiesToEven) {
  // Halfway between 1 and 1 + 2^-7: down to the even 1; halfway between
  // 1 + 2^-7 and 1 + 2^-6: up to the even 1 + 2^-6.
  EXPECT_EQ(toFloat(toBFloat16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(toFloat(toBFloat16(1.0f + 0x1p-7f + 0x1p-8f)), 1.0f + 0x1p-6f);
  // Just past halfway goes up, just short of it down.
  EXPECT_EQ(toFloat(toBFloat16(1.0f + 0x1p-8f + 0x1p-23f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(toFloat(toBFloat16(1.0f + 0x1p-8f - 0x1p-23f)), 1.0f);
  EXPECT_EQ(toFloat(toBFloat16(-1.0f - 0x1p-8f)), -1.0f);
  // Every f32 of a deterministic spread of bit patterns (all exponents,
  // denormals included), against the definition.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = static_cast<uint32_t>(state >> 32);
    float value = floatOfBits(bits);
    if (!std::isfinite(value))
      continue;
    ASSERT_EQ(toBFloat16(value).bits, nearestByDefinition(value))
        << std::hex << bits;
  }
}

TEST(BFloat16Test, OverflowInfinitiesAndNaNs) {
  constexpr float kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(toFloat(toBFloat16(kMax)), kInf);
  EXPECT_EQ(toFloat(toBFloat16(-kMax)), -kInf);
  EXPECT_EQ(toFloat(toBFloat16(kInf)), kInf);
  EXPECT_EQ(toFloat(toBFloat16(-kInf)), -kInf);
  // The largest finite bfloat16, and a value just short of halfway past it.
  EXPECT_EQ(toBFloat16(floatOfBits(0x7f7f0000u)).bits, 0x7f7fu);
  EXPECT_EQ(toBFloat16(floatOfBits(0x7f7f7fffu)).bits, 0x7f7fu);
  // A NaN whose payload is only in the dropped bits stays a (quiet) NaN,
  // with its sign, instead of becoming infinity.
  BFloat16 nan = toBFloat16(floatOfBits(0x7f800001u));
  EXPECT_TRUE(isNan(nan));
  EXPECT_EQ(nan.bits, 0x7fc0u);
  EXPECT_EQ(toBFloat16(floatOfBits(0xff800001u)).bits, 0xffc0u);
  // The smallest f32 denormal rounds to zero, keeping its sign.
  EXPECT_EQ(toBFloat16(floatOfBits(0x00000001u)).bits, 0x0000u);
  EXPECT_EQ(toBFloat16(floatOfBits(0x80000001u)).bits, 0x8000u);
}

/// `values` through the array conversions: to bf16, and back.
struct RoundTrip {
  std::vector<BFloat16> halves;
  std::vector<float> back;
};
RoundTrip roundTrip(const std::vector<float> &values,
                    VectorPath path = VectorPath::Best) {
  RoundTrip r{std::vector<BFloat16>(values.size()),
              std::vector<float>(values.size())};
  convertToBFloat16(values.data(), r.halves.data(),
                    static_cast<int64_t>(values.size()), path);
  convertToFloat(r.halves.data(), r.back.data(),
                 static_cast<int64_t>(r.back.size()), path);
  return r;
}

TEST(BFloat16Test, ArraysConvertElementByElement) {
  std::vector<float> values = {0.0f, -2.5f, 1.0f + 0x1p-8f, 3.14159f, 1e30f};
  auto [halves, back] = roundTrip(values);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(halves[i].bits, toBFloat16(values[i]).bits);
    EXPECT_EQ(back[i], toFloat(halves[i]));
  }
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 1.0f);
}

TEST(BFloat16Test, LongArraysTakeEachVectorPathToTheSameBits) {
  // Sixteen (AVX-512) or eight (AVX2) lanes at a time, then a tail: random
  // bit patterns (every exponent, NaNs with payloads in either half, both
  // signs) and the edge cases, 16·64 + 7 of them, element by element
  // against the scalar conversion, on every path this CPU runs.
  std::vector<uint32_t> patterns = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u,
      0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0xff7f8000u, 0x7f800000u,
      0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fbf0000u, 0x7f810000u,
      0xffffffffu, 0x7fffffffu, 0xff7fffffu, 0x3f817fffu, 0xbf818000u};
  std::mt19937 gen(5);
  while (patterns.size() < 16 * 64 + 7)
    patterns.push_back(static_cast<uint32_t>(gen()));
  std::vector<float> values;
  for (uint32_t bits : patterns)
    values.push_back(floatOfBits(bits));
  int paths = 0;
  for (VectorPath path :
       {VectorPath::Best, VectorPath::Avx2, VectorPath::Avx512}) {
    if (!hasVectorPath(path))
      continue;
    ++paths;
    auto [halves, back] = roundTrip(values, path);
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(halves[i].bits, toBFloat16(values[i]).bits)
          << "path " << int(path) << ", element " << i << " (bits 0x"
          << std::hex << patterns[i] << ")";
      uint32_t expected = static_cast<uint32_t>(halves[i].bits) << 16, actual;
      std::memcpy(&actual, &back[i], sizeof(actual));
      ASSERT_EQ(actual, expected) << "path " << int(path) << ", element " << i;
    }
  }
  // Every x86-64 CPU sd supports has AVX2.
  EXPECT_GE(paths, 2);
}

TEST(BFloat16Test, TheElementTypeAndItsHostTensors) {
  EXPECT_EQ(elementBytes(ElementType::BF16), 2);
  EXPECT_STREQ(elementTypeName(ElementType::BF16), "bf16");
  EXPECT_EQ(abiElementType(ElementType::BF16), SD_BF16);
  EXPECT_EQ(elementTypeFromAbi(SD_BF16), ElementType::BF16);

  HostTensor zeros(ElementType::BF16, 3);
  EXPECT_EQ(zeros.elementType(), ElementType::BF16);
  EXPECT_EQ(zeros.size(), 3);
  EXPECT_EQ(zeros.bytes(), 6);
  EXPECT_EQ(zeros.data(), static_cast<void *>(zeros.bf16().data()));
  for (BFloat16 value : zeros.bf16())
    EXPECT_EQ(value.bits, 0u);

  HostTensor given(std::vector<BFloat16>{toBFloat16(1.5f), toBFloat16(-2.0f)});
  EXPECT_EQ(given.elementType(), ElementType::BF16);
  EXPECT_EQ(given.bytes(), 4);
  ConstBlock block{given.elementType(), given.data(), given.size()};
  EXPECT_EQ(toFloat(block.bf16()[0]), 1.5f);
  EXPECT_EQ(toFloat(block.bf16()[1]), -2.0f);

  HostTensor f32(ElementType::F32, 2);
  EXPECT_EQ(f32.bytes(), 8);
  EXPECT_EQ(f32.data(), static_cast<void *>(f32.f32().data()));
}
