//===- SamplerTest.cpp - sdsample's sampler math --------------------------===//
//
// The samplers on hand-made predictors, linked without MLIR or a device
// program: a perfect predictor of one clean sample takes every sampler to
// it; the exact predictor of Gaussian data takes DDPM, DDIM and Euler to
// that Gaussian; conversions, guidance, noise keyed by seed and sample, and
// the grid.
//
//===----------------------------------------------------------------------===//

#include "sd/Sampling/Sampler.h"

#include "gtest/gtest.h"

#include <cmath>
#include <numeric>

using namespace sd::sampling;

namespace {

TEST(SampleNames, RoundTrip) {
  for (Sampler s : {Sampler::Ddpm, Sampler::Ddim, Sampler::Euler})
    EXPECT_EQ(parseSampler(samplerName(s)), s);
  for (Prediction p :
       {Prediction::Epsilon, Prediction::VPrediction, Prediction::Flow})
    EXPECT_EQ(parsePrediction(predictionName(p)), p);
  EXPECT_FALSE(parseSampler("dpm++"));
  EXPECT_FALSE(parsePrediction("v"));
  EXPECT_EQ(defaultSampler(Prediction::Flow), Sampler::Euler);
  EXPECT_EQ(defaultSampler(Prediction::VPrediction), Sampler::Ddim);
}

TEST(SampleNames, SamplerMustFitThePrediction) {
  EXPECT_TRUE(checkSampler(Sampler::Ddpm, Prediction::Epsilon).ok());
  EXPECT_TRUE(checkSampler(Sampler::Ddim, Prediction::VPrediction).ok());
  EXPECT_TRUE(checkSampler(Sampler::Euler, Prediction::Flow).ok());
  absl::Status euler = checkSampler(Sampler::Euler, Prediction::Epsilon);
  EXPECT_EQ(euler.message(), "--sampler=euler needs a flow model; this model "
                             "predicts epsilon (use --sampler=ddim or ddpm)");
  absl::Status ddim = checkSampler(Sampler::Ddim, Prediction::Flow);
  EXPECT_EQ(ddim.message(), "--sampler=ddim needs an epsilon or v_prediction "
                            "model; this model predicts flow (use "
                            "--sampler=euler)");
}

TEST(SampleTimes, UniformGridDownToZero) {
  std::vector<double> cosine = samplingTimes(Sampler::Ddim, 4);
  ASSERT_EQ(cosine.size(), 5u);
  EXPECT_DOUBLE_EQ(cosine.front(), kCosineMaxTime);
  EXPECT_DOUBLE_EQ(cosine[2], kCosineMaxTime / 2);
  EXPECT_EQ(cosine.back(), 0.0);
  std::vector<double> flow = samplingTimes(Sampler::Euler, 2);
  EXPECT_EQ(flow, (std::vector<double>{1.0, 0.5, 0.0}));
  EXPECT_EQ(signalScale(0), 1.0);
  EXPECT_EQ(noiseScale(0), 0.0);
}

TEST(SampleConversions, EpsilonAndV) {
  for (double t : {0.05, 0.3, 0.7, 0.99}) {
    double c = signalScale(t), s = noiseScale(t);
    EXPECT_NEAR(c * c + s * s, 1.0, 1e-15);
    double x0 = 0.4, noise = -1.3;
    double x = c * x0 + s * noise;
    Decomposed eps = decompose(Prediction::Epsilon, t, x, noise);
    EXPECT_NEAR(eps.x0, x0, 1e-12);
    EXPECT_EQ(eps.noise, noise);
    // v = cos·noise − sin·x0 (what @loss trains v models on).
    double v = c * noise - s * x0;
    Decomposed fromV = decompose(Prediction::VPrediction, t, x, v);
    EXPECT_NEAR(fromV.x0, x0, 1e-12);
    EXPECT_NEAR(fromV.noise, noise, 1e-12);
  }
}

TEST(SampleGuidance, LinearInTheScale) {
  std::vector<float> cond = {1, 2, -3}, uncond = {0.5, 2, 1}, out(3);
  applyGuidance(cond, uncond, 0.0, out);
  EXPECT_EQ(out, uncond);
  applyGuidance(cond, uncond, 1.0, out);
  EXPECT_EQ(out, cond);
  applyGuidance(cond, uncond, 2.0, out);
  EXPECT_EQ(out, (std::vector<float>{1.5, 2, -7}));
  // In place, as the driver combines the halves of a prediction.
  applyGuidance(cond, uncond, 3.0, cond);
  EXPECT_EQ(cond, (std::vector<float>{2, 2, -11}));
}

TEST(SampleTimes, ShiftedGrid) {
  // s·t / (1 + (s − 1)·t): the ends stay, the middle moves toward noise.
  EXPECT_EQ(shiftedTime(0.0, 5.0), 0.0);
  EXPECT_EQ(shiftedTime(1.0, 5.0), 1.0);
  EXPECT_DOUBLE_EQ(shiftedTime(0.5, 5.0), 2.5 / 3.0);
  EXPECT_DOUBLE_EQ(shiftedTime(0.25, 3.0), 0.75 / 1.5);
  EXPECT_EQ(shiftedTime(0.3, 1.0), 0.3);
  // A shift below 1 spends the steps near the clean end.
  EXPECT_LT(shiftedTime(0.5, 0.5), 0.5);
  std::vector<double> times = samplingTimes(Sampler::Euler, 4, 3.0);
  ASSERT_EQ(times.size(), 5u);
  EXPECT_EQ(times.front(), 1.0);
  EXPECT_EQ(times.back(), 0.0);
  EXPECT_DOUBLE_EQ(times[2], 1.5 / 2.0);
  for (size_t k = 1; k < times.size(); ++k)
    EXPECT_LT(times[k], times[k - 1]);
}

TEST(SampleTimes, FluxResolutionShift) {
  // e^base_shift at 256 image tokens, e^max_shift at 4096, linear in mu
  // between (diffusers' calculate_shift).
  EXPECT_DOUBLE_EQ(resolutionShift(256), std::exp(0.5));
  EXPECT_DOUBLE_EQ(resolutionShift(4096), std::exp(1.15));
  EXPECT_NEAR(std::log(resolutionShift(2176)), 0.825, 1e-12);
  // Fewer tokens than 256 extrapolate below base_shift, as diffusers does.
  EXPECT_NEAR(std::log(resolutionShift(16, 0.5, 1.15)),
              0.5 - 0.65 * 240.0 / 3840.0, 1e-12);
  EXPECT_DOUBLE_EQ(resolutionShift(1024, 1.0, 1.0), std::exp(1.0));
}

/// A predictor that knows the clean samples `x0` (one per sample, in
/// order) exactly and returns what the model would: ε = (x − cos·x0)/sin,
/// v = cos·ε − sin·x0, or the flow velocity (x − x0)/t.
Denoiser perfectPredictor(Prediction prediction, std::vector<float> x0) {
  return [prediction, x0](llvm::ArrayRef<float> x,
                          double t) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> pred(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (prediction == Prediction::Flow) {
        pred[i] = static_cast<float>((x[i] - x0[i]) / t);
        continue;
      }
      double c = signalScale(t), s = noiseScale(t);
      double eps = (x[i] - c * x0[i]) / s;
      pred[i] = static_cast<float>(
          prediction == Prediction::Epsilon ? eps : c * eps - s * x0[i]);
    }
    return pred;
  };
}

struct SamplerCase {
  Sampler sampler;
  Prediction prediction;
  bool clip;
  double shift = 1.0;
};

class PerfectPredictorTest : public ::testing::TestWithParam<SamplerCase> {};

TEST_P(PerfectPredictorTest, RecoversTheCleanSample) {
  SamplerCase c = GetParam();
  std::vector<int64_t> ids = {0, 1, 2};
  const int64_t elements = 5;
  std::vector<float> x0(ids.size() * elements);
  for (size_t i = 0; i < x0.size(); ++i)
    x0[i] = static_cast<float>(std::sin(1.7 * i)) * 0.9f;
  SamplerOptions options{c.sampler, c.prediction, c.clip, /*seed=*/3, c.shift};
  for (int64_t steps : {1, 7, 50}) {
    absl::StatusOr<std::vector<float>> x = sample(
        options, steps, ids, elements, perfectPredictor(c.prediction, x0));
    ASSERT_TRUE(x.ok()) << x.status();
    // One step goes from the noise straight to x0 = (x − sin·ε)/cos, where
    // 1/cos(0.999·π/2) ≈ 637 magnifies the f32 rounding of ε.
    double tolerance = steps == 1 ? 1e-4 : 2e-5;
    for (size_t i = 0; i < x0.size(); ++i)
      EXPECT_NEAR((*x)[i], x0[i], tolerance)
          << samplerName(c.sampler).str() << " " << steps << " steps, " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Samplers, PerfectPredictorTest,
    ::testing::Values(
        SamplerCase{Sampler::Ddim, Prediction::Epsilon, true},
        SamplerCase{Sampler::Ddim, Prediction::Epsilon, false},
        SamplerCase{Sampler::Ddim, Prediction::VPrediction, true},
        SamplerCase{Sampler::Ddpm, Prediction::Epsilon, true},
        SamplerCase{Sampler::Ddpm, Prediction::VPrediction, false},
        SamplerCase{Sampler::Euler, Prediction::Flow, false},
        SamplerCase{Sampler::Euler, Prediction::Flow, false, 5.0}));

TEST(SampleClip, DdimTakesTheNoiseOfTheClippedX0) {
  // x0 = 3 lies outside [−1, 1]: DDIM moves from the clipped x0 = 1 and the
  // noise that x_t and it imply, not the network's.
  const double t = 0.5, next = 0.25, x = 2.0;
  double c = signalScale(t), s = noiseScale(t);
  std::vector<float> pred = {static_cast<float>((x - c * 3.0) / s)};
  std::vector<float> state = {static_cast<float>(x)};
  samplerStep({Sampler::Ddim, Prediction::Epsilon, true, 0}, 0, t, next, {0}, 1,
              pred, state);
  double noise = (x - c * 1.0) / s;
  EXPECT_NEAR(state[0], signalScale(next) + noiseScale(next) * noise, 1e-6);
  // Unclipped, the same step keeps x0 = 3 and the network's noise.
  state = {static_cast<float>(x)};
  samplerStep({Sampler::Ddim, Prediction::Epsilon, false, 0}, 0, t, next, {0},
              1, pred, state);
  EXPECT_NEAR(state[0], signalScale(next) * 3 + noiseScale(next) * pred[0],
              1e-6);
}

/// The exact prediction for data x0 ~ N(mu, sd²) (one element): the
/// conditional mean of the target given x_t, for each prediction type.
Denoiser gaussianPredictor(Prediction prediction, double mu, double sd) {
  return [=](llvm::ArrayRef<float> x,
             double t) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> pred(x.size());
    double var0 = sd * sd;
    for (size_t i = 0; i < x.size(); ++i) {
      if (prediction == Prediction::Flow) {
        // x_t = (1−t)·x0 + t·n; E[n − x0 | x_t].
        double a = 1 - t, var = a * a * var0 + t * t;
        double cov = t - a * var0;
        pred[i] = static_cast<float>(-mu + cov / var * (x[i] - a * mu));
        continue;
      }
      double c = signalScale(t), s = noiseScale(t);
      double var = c * c * var0 + s * s;
      double eps = s / var * (x[i] - c * mu);
      double x0 = mu + c * var0 / var * (x[i] - c * mu);
      pred[i] = static_cast<float>(
          prediction == Prediction::Epsilon ? eps : c * eps - s * x0);
    }
    return pred;
  };
}

class GaussianDataTest : public ::testing::TestWithParam<SamplerCase> {};

TEST_P(GaussianDataTest, SamplesTheDataDistribution) {
  SamplerCase c = GetParam();
  const double mu = 0.3, sd = 0.4;
  std::vector<int64_t> ids(4000);
  std::iota(ids.begin(), ids.end(), 0);
  SamplerOptions options{c.sampler, c.prediction, c.clip, /*seed=*/11};
  absl::StatusOr<std::vector<float>> x =
      sample(options, 100, ids, 1, gaussianPredictor(c.prediction, mu, sd));
  ASSERT_TRUE(x.ok()) << x.status();
  double mean = 0, square = 0;
  for (float v : *x) {
    mean += v;
    square += double(v) * v;
  }
  mean /= x->size();
  double deviation = std::sqrt(square / x->size() - mean * mean);
  // 4000 samples: the mean's standard error is 0.4/63 ≈ 0.0063.
  EXPECT_NEAR(mean, mu, 0.025) << samplerName(c.sampler).str();
  EXPECT_NEAR(deviation, sd, 0.025) << samplerName(c.sampler).str();
}

INSTANTIATE_TEST_SUITE_P(
    Samplers, GaussianDataTest,
    ::testing::Values(
        SamplerCase{Sampler::Ddim, Prediction::Epsilon, false},
        SamplerCase{Sampler::Ddim, Prediction::VPrediction, false},
        SamplerCase{Sampler::Ddpm, Prediction::Epsilon, false},
        SamplerCase{Sampler::Ddpm, Prediction::VPrediction, false},
        SamplerCase{Sampler::Euler, Prediction::Flow, false}));

TEST(SampleNoise, KeyedBySeedAndSample) {
  std::vector<float> both = initialNoise(5, {4, 9}, 3);
  std::vector<float> alone = initialNoise(5, {9}, 3);
  EXPECT_EQ(std::vector<float>(both.begin() + 3, both.end()), alone);
  EXPECT_NE(initialNoise(6, {9}, 3), alone);
  EXPECT_NE(initialNoise(5, {8}, 3), alone);
}

TEST(SampleNoise, DdpmRunsAreReproducibleAndPerSample) {
  // A predictor that treats each sample on its own, so that sample 9's
  // trajectory must not depend on what is sampled beside it.
  Denoiser predictor = [](llvm::ArrayRef<float> x, double t) {
    std::vector<float> pred(x.begin(), x.end());
    for (float &v : pred)
      v = static_cast<float>(0.5 * v + 0.1 * t);
    return absl::StatusOr<std::vector<float>>(pred);
  };
  SamplerOptions options{Sampler::Ddpm, Prediction::Epsilon, true, 21};
  auto both = sample(options, 10, {3, 9}, 4, predictor);
  auto again = sample(options, 10, {3, 9}, 4, predictor);
  auto alone = sample(options, 10, {9}, 4, predictor);
  ASSERT_TRUE(both.ok() && again.ok() && alone.ok());
  EXPECT_EQ(*both, *again);
  EXPECT_EQ(std::vector<float>(both->begin() + 4, both->end()), *alone);
  options.seed = 22;
  auto other = sample(options, 10, {9}, 4, predictor);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *alone);
}

TEST(SampleNoise, DenoiserErrorsStopTheSampler) {
  int calls = 0;
  Denoiser failing = [&](llvm::ArrayRef<float>, double) {
    ++calls;
    return absl::StatusOr<std::vector<float>>(
        absl::InternalError("device 1 failed"));
  };
  auto x = sample(SamplerOptions{}, 5, {0}, 2, failing);
  EXPECT_EQ(x.status().message(), "device 1 failed");
  EXPECT_EQ(calls, 1);
}

TEST(SampleGrid, LayoutAndValues) {
  // Two rows of three 2×1 gray samples, zoom 3: cells 3 wide and 6 high
  // with 2 pixels between and around them.
  std::vector<float> samples(6 * 2);
  for (size_t i = 0; i < samples.size(); ++i)
    samples[i] = i % 2 ? 1.0f : -1.0f;
  samples[2] = 0.0f;
  Image image = sampleGrid(samples, 2, 3, /*height=*/2, /*width=*/1,
                           /*channels=*/1, /*zoom=*/3);
  EXPECT_EQ(image.width, 3 * (3 + 2) + 2);
  EXPECT_EQ(image.height, 2 * (6 + 2) + 2);
  ASSERT_EQ(image.rgb.size(), size_t(image.width * image.height * 3));
  auto at = [&](int64_t x, int64_t y) {
    return image.rgb[(y * image.width + x) * 3];
  };
  EXPECT_EQ(at(0, 0), 64);  // the gap
  EXPECT_EQ(at(2, 2), 0);   // sample 0, pixel 0: −1
  EXPECT_EQ(at(4, 7), 255); // sample 0, pixel 1 (rows 3..5 zoomed): +1
  EXPECT_EQ(at(7, 2), 128); // sample 1, pixel 0: 0
  EXPECT_EQ(at(2, 10), 0);  // row 1 (sample 3), pixel 0
  EXPECT_EQ(defaultZoom(8, 8), 4);
  EXPECT_EQ(defaultZoom(16, 16), 2);
  EXPECT_EQ(defaultZoom(64, 64), 1);

  // Three channels are RGB.
  std::vector<float> rgb = {1.0f, -1.0f, 0.0f};
  Image color = sampleGrid(rgb, 1, 1, 1, 1, 3, 1);
  EXPECT_EQ(color.rgb[(2 * color.width + 2) * 3 + 0], 255);
  EXPECT_EQ(color.rgb[(2 * color.width + 2) * 3 + 1], 0);
  EXPECT_EQ(color.rgb[(2 * color.width + 2) * 3 + 2], 128);
}

} // namespace
