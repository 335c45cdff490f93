//===- SampleConfigTest.cpp - sdsample's config keys ----------------------===//
//
// The sampling keys of a MaxDiffusion-style config file (readSamplingConfig).
// The sampler math is tested in unittests/Sampling.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace mlir::sd;

namespace {

/// A file in a fresh temporary directory holding `text`.
std::string writeTemp(llvm::StringRef name, llvm::StringRef text) {
  llvm::SmallString<128> dir;
  EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("sd-sample-test", dir));
  std::string path = (dir + "/" + name).str();
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << text;
  return path;
}

TEST(SampleConfig, ReadsTheSamplingKeys) {
  std::string path = writeTemp("run.yml", "ici_data_parallelism: 2\n"
                                          "num_inference_steps: 25\n"
                                          "guidance_scale: 2.5\n"
                                          "prediction_type: 'v_prediction'\n"
                                          "learning_rate: 1.e-3\n");
  absl::StatusOr<SamplingConfig> config = readSamplingConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->steps, 25);
  EXPECT_EQ(config->guidanceScale, 2.5);
  EXPECT_EQ(config->prediction, sampling::Prediction::VPrediction);

  std::string none = writeTemp("none.yml", "seed: 0\n");
  config = readSamplingConfig(none);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->steps || config->guidanceScale || config->prediction);
}

TEST(SampleConfig, BadValuesNameTheLine) {
  std::string path =
      writeTemp("bad.yml", "seed: 0\nnum_inference_steps: many\n");
  EXPECT_EQ(readSamplingConfig(path).status().message(),
            "bad.yml:2: num_inference_steps must be an integer in [1, "
            "100000], not 'many'");
  path = writeTemp("bad.yml", "prediction_type: sample\n");
  EXPECT_EQ(readSamplingConfig(path).status().message(),
            "bad.yml:1: prediction_type must be epsilon, v_prediction or "
            "flow, not 'sample'");
  path = writeTemp("bad.yml", "guidance_scale: [1, 2]\n");
  EXPECT_EQ(readSamplingConfig(path).status().message(),
            "bad.yml:1: guidance_scale must be a scalar");
  EXPECT_TRUE(
      absl::IsNotFound(readSamplingConfig("/nonexistent/run.yml").status()));
}

} // namespace
