//===- HardwareTest.cpp - Hardware profiles: built-ins and files ----------===//

#include "sd/Sharding/Hardware.h"

#include "gtest/gtest.h"

#include <string>

using namespace sd;

namespace {

/// True when `status` is InvalidArgument with `text` in its message.
bool failsWith(const absl::Status &status, const std::string &text) {
  return absl::IsInvalidArgument(status) &&
         std::string(status.message()).find(text) != std::string::npos;
}

// The published numbers, as sd prices them: a link is what a device sends
// one way, half the bidirectional figure; DCN per host.
TEST(HardwareTest, BuiltinsHaveTheirPublishedNumbers) {
  EXPECT_EQ(
      builtinProfileNames(),
      (std::vector<std::string>{"cpu", "tpu-v5p", "tpu-v6e", "h100-sxm"}));
  absl::StatusOr<HardwareProfile> v5p = builtinProfile("tpu-v5p");
  ASSERT_TRUE(v5p.ok()) << v5p.status();
  EXPECT_DOUBLE_EQ(v5p->device.bf16Flops, 459e12);
  EXPECT_DOUBLE_EQ(v5p->device.memoryBandwidth, 2765e9);
  EXPECT_DOUBLE_EQ(v5p->network.iciBandwidth, 600e9);
  EXPECT_DOUBLE_EQ(v5p->network.dcnBandwidth, 25e9);
  EXPECT_EQ(v5p->devicesPerHost, 4);
  // sd's assumption for a TPU's host link: PCIe 4.0 x16 one way.
  EXPECT_DOUBLE_EQ(v5p->device.hostRate(), 32e9);
  absl::StatusOr<HardwareProfile> h100 = builtinProfile("h100-sxm");
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_DOUBLE_EQ(h100->device.bf16Flops, 989.4e12);
  EXPECT_DOUBLE_EQ(h100->device.f32Flops, 66.9e12);
  EXPECT_DOUBLE_EQ(h100->network.iciBandwidth, 450e9);
  EXPECT_EQ(h100->devicesPerHost, 8);
  EXPECT_DOUBLE_EQ(h100->device.hostRate(), 64e9);
  for (const std::string &name : builtinProfileNames()) {
    absl::StatusOr<HardwareProfile> p = builtinProfile(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_FALSE(p->source.empty()) << name;
    EXPECT_GT(p->device.f32Flops, 0) << name;
    EXPECT_GE(p->device.bf16Flops, p->device.f32Flops) << name;
  }
  EXPECT_TRUE(failsWith(builtinProfile("tpu-v4").status(),
                        "unknown hardware profile \"tpu-v4\"; expected one of "
                        "cpu, tpu-v5p, tpu-v6e, h100-sxm"));
}

TEST(HardwareTest, ProfilesRoundTripThroughYaml) {
  for (const std::string &name : builtinProfileNames()) {
    absl::StatusOr<HardwareProfile> p = builtinProfile(name);
    ASSERT_TRUE(p.ok());
    absl::StatusOr<HardwareProfile> back =
        parseProfile(profileToYaml(*p), "p.yml");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, *p) << name;
  }
}

// A calibrated profile's rates by product size: optional keys, written only
// when set, and each size class priced at its own rate (0: the large rate).
TEST(HardwareTest, SizeClassRatesAreOptional) {
  EXPECT_EQ(productSize(9.9e7), ProductSize::Small);
  EXPECT_EQ(productSize(1e8), ProductSize::Medium);
  EXPECT_EQ(productSize(3.9e9), ProductSize::Medium);
  EXPECT_EQ(productSize(4e9), ProductSize::Large);
  absl::StatusOr<HardwareProfile> p = builtinProfile("cpu");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(profileToYaml(*p).find("f32_flops_small"), std::string::npos);
  EXPECT_DOUBLE_EQ(p->device.f32Rate(ProductSize::Small), p->device.f32Flops);
  // A CPU device's host memory is its own: offloads at the memory rate.
  EXPECT_EQ(profileToYaml(*p).find("host_bandwidth"), std::string::npos);
  EXPECT_DOUBLE_EQ(p->device.hostRate(), p->device.memoryBandwidth);
  p->device.f32FlopsSmall = 2e10;
  p->device.f32FlopsMedium = 5e10;
  EXPECT_DOUBLE_EQ(p->device.attentionRate(), 5e10);
  p->device.f32FlopsAttention = 1e10;
  EXPECT_EQ(profileToYaml(*p).find("f32_flops_transposed_lhs"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(p->device.transposedLhsRate(), 5e10);
  p->device.f32FlopsTransposedLhs = 3e10;
  std::string text = profileToYaml(*p);
  EXPECT_NE(text.find("f32_flops_transposed_lhs: 30000000000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("f32_flops_attention: 10000000000\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("f32_flops_small: 20000000000\n"), std::string::npos)
      << text;
  absl::StatusOr<HardwareProfile> back = parseProfile(text, "p.yml");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *p);
  EXPECT_DOUBLE_EQ(back->device.f32Rate(ProductSize::Small), 2e10);
  EXPECT_DOUBLE_EQ(back->device.f32Rate(ProductSize::Medium), 5e10);
  EXPECT_DOUBLE_EQ(back->device.attentionRate(), 1e10);
  EXPECT_DOUBLE_EQ(back->device.transposedLhsRate(), 3e10);
  EXPECT_DOUBLE_EQ(back->device.f32Rate(ProductSize::Large),
                   p->device.f32Flops);
  std::string negative = text;
  negative.replace(negative.find("f32_flops_medium: "), 18,
                   "f32_flops_medium: -");
  EXPECT_TRUE(failsWith(parseProfile(negative, "p.yml").status(),
                        "\"f32_flops_medium\" must be a finite positive"));
}

TEST(HardwareTest, AFileNeedsEveryKeyOnceWithAPositiveValue) {
  absl::StatusOr<HardwareProfile> p = builtinProfile("tpu-v6e");
  ASSERT_TRUE(p.ok());
  std::string good = profileToYaml(*p);
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string text = good;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  EXPECT_TRUE(failsWith(
      parseProfile(replaced("bf16_flops: ", "bf16_flop: "), "p.yml").status(),
      "p.yml:5: unknown key \"bf16_flop\"; a profile has name, source,"));
  EXPECT_TRUE(failsWith(
      parseProfile(replaced("ici_latency: ", "ici_latency: -"), "p.yml")
          .status(),
      "p.yml:9: \"ici_latency\" must be a finite positive number (SI base "
      "units), not \"-1e-06\""));
  EXPECT_TRUE(failsWith(
      parseProfile(replaced("devices_per_host: 8", "devices_per_host: 2.5"),
                   "p.yml")
          .status(),
      "p.yml:12: \"devices_per_host\" must be a positive integer, not "
      "\"2.5\""));
  EXPECT_TRUE(failsWith(
      parseProfile(replaced("dcn_latency: ", "dcn_bandwidth: 1\nx: "), "p.yml")
          .status(),
      "duplicate key \"dcn_bandwidth\""));
  std::string missing = good.substr(0, good.find("devices_per_host"));
  EXPECT_TRUE(failsWith(parseProfile(missing, "p.yml").status(),
                        "p.yml: no \"devices_per_host\" key"));
  EXPECT_TRUE(failsWith(parseProfile("[1, 2]", "p.yml").status(),
                        "p.yml:1: expected a mapping at the top level"));
  EXPECT_TRUE(failsWith(parseProfile("name: [", "p.yml").status(), "p.yml:1:"));
}

TEST(HardwareTest, LoadTakesABuiltinOrAFile) {
  EXPECT_TRUE(loadProfile("cpu", "profile").ok());
  EXPECT_TRUE(failsWith(loadProfile("tpu-v9", "profile").status(),
                        "--profile: unknown hardware profile \"tpu-v9\""));
  EXPECT_TRUE(failsWith(loadProfile("/nonexistent/p.yml", "profile").status(),
                        "--profile: cannot read profile file "
                        "\"/nonexistent/p.yml\""));
}

} // namespace
