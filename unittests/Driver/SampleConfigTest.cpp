//===- SampleConfigTest.cpp - sdsample's options from its run spec --------===//
//
// setSamplingOptions: the sampling settings of a resolved run spec and
// sdsample's own flags as SampleOptions. The keys are read by the shared
// config reader (unittests/Config/SettingsTest.cpp); the sampler math is
// tested in unittests/Sampling.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "gtest/gtest.h"

using namespace mlir::sd;

namespace {

/// A spec whose prediction type is `name` (as a flag or the config gives it).
::sd::RunSpec withPrediction(const std::string &name) {
  ::sd::RunSpec spec;
  spec.data.predictionType = ::sd::Setting<std::string>(name);
  return spec;
}

TEST(SampleConfig, TakesTheSpecsSamplingSettings) {
  ::sd::RunSpec spec = withPrediction("v_prediction");
  spec.sampling.steps.value = 25;
  spec.sampling.guidanceScale.value = 2.5;
  ::sd::RunSpecFlags flags;
  flags.sampler = "ddpm";
  flags.classes = std::vector<int64_t>{7, 3};
  flags.noEma = true;
  SampleOptions options;
  ASSERT_TRUE(setSamplingOptions(spec, flags, options).ok());
  EXPECT_EQ(options.steps, 25);
  EXPECT_EQ(options.guidanceScale, 2.5);
  EXPECT_EQ(options.prediction, sampling::Prediction::VPrediction);
  EXPECT_EQ(options.sampler, sampling::Sampler::Ddpm);
  EXPECT_EQ(options.classes, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(options.ema, false);
  EXPECT_EQ(options.samplesPerClass, 1);
  EXPECT_EQ(options.seed, 0u);

  // Without a prediction type the model's decides.
  SampleOptions plain;
  ASSERT_TRUE(
      setSamplingOptions(::sd::RunSpec(), ::sd::RunSpecFlags(), plain).ok());
  EXPECT_FALSE(plain.prediction || plain.sampler || plain.ema);
  EXPECT_EQ(plain.steps, 50);
}

TEST(SampleConfig, BadFlags) {
  ::sd::RunSpec spec = withPrediction("sample");
  SampleOptions options;
  EXPECT_EQ(setSamplingOptions(spec, ::sd::RunSpecFlags(), options).message(),
            "unknown --prediction-type 'sample'; expected epsilon, "
            "v_prediction or flow");
  ::sd::RunSpecFlags flags;
  flags.ema = flags.noEma = true;
  EXPECT_EQ(setSamplingOptions(::sd::RunSpec(), flags, options).message(),
            "give --ema or --no-ema, not both");
  flags = ::sd::RunSpecFlags();
  flags.sampler = "heun";
  EXPECT_EQ(setSamplingOptions(::sd::RunSpec(), flags, options).message(),
            "unknown --sampler 'heun'; expected ddpm, ddim or euler");
}

} // namespace
