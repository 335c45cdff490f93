//===- Sampler.cpp - The samplers of sdsample -----------------------------===//
//
// DDPM, DDIM and Euler on plain float vectors, guidance, the noise and the
// grid image: no MLIR, no runtime. The model's @denoise on a mesh and
// sdsample's run are in lib/Driver.
//
//===----------------------------------------------------------------------===//

#include "sd/Sampling/Sampler.h"

#include "sd/Reference/Random.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>

using namespace sd;
using namespace sd::sampling;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

static constexpr std::pair<Sampler, llvm::StringLiteral> kSamplers[] = {
    {Sampler::Ddpm, "ddpm"},
    {Sampler::Ddim, "ddim"},
    {Sampler::Euler, "euler"}};
static constexpr std::pair<Prediction, llvm::StringLiteral> kPredictions[] = {
    {Prediction::Epsilon, "epsilon"},
    {Prediction::VPrediction, "v_prediction"},
    {Prediction::Flow, "flow"}};

llvm::StringRef sampling::samplerName(Sampler sampler) {
  for (auto [value, name] : kSamplers)
    if (value == sampler)
      return name;
  return "?";
}

std::optional<Sampler> sampling::parseSampler(llvm::StringRef name) {
  for (auto [value, text] : kSamplers)
    if (name == text)
      return value;
  return std::nullopt;
}

llvm::StringRef sampling::predictionName(Prediction prediction) {
  for (auto [value, name] : kPredictions)
    if (value == prediction)
      return name;
  return "?";
}

std::optional<Prediction> sampling::parsePrediction(llvm::StringRef name) {
  for (auto [value, text] : kPredictions)
    if (name == text)
      return value;
  return std::nullopt;
}

Sampler sampling::defaultSampler(Prediction prediction) {
  return prediction == Prediction::Flow ? Sampler::Euler : Sampler::Ddim;
}

absl::Status sampling::checkSampler(Sampler sampler, Prediction prediction) {
  bool flow = prediction == Prediction::Flow;
  if ((sampler == Sampler::Euler) == flow)
    return absl::OkStatus();
  if (flow)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--sampler=%s needs an epsilon or v_prediction model; this model "
        "predicts flow (use --sampler=euler)",
        samplerName(sampler).str()));
  return absl::InvalidArgumentError(absl::StrFormat(
      "--sampler=euler needs a flow model; this model predicts %s (use "
      "--sampler=ddim or ddpm)",
      predictionName(prediction).str()));
}

//===----------------------------------------------------------------------===//
// The sampler
//===----------------------------------------------------------------------===//

namespace {

/// The RNG streams of the sampler, each keyed by the seed and its tag.
enum class Stream : uint64_t { Initial = 1, Ddpm };

uint64_t streamKey(uint64_t seed, Stream stream, uint64_t extra = 0) {
  using ::sd::ref::splitMix64;
  return splitMix64(
      splitMix64(seed ^ splitMix64(static_cast<uint64_t>(stream) + 0x5a3d)) ^
      extra);
}

/// ᾱ(t) = cos²(πt/2).
double alphaBar(double t) {
  double c = signalScale(t);
  return c * c;
}

} // namespace

std::vector<double> sampling::samplingTimes(Sampler sampler, int64_t steps,
                                            double shift) {
  double top = sampler == Sampler::Euler ? 1.0 : kCosineMaxTime;
  std::vector<double> times;
  times.reserve(static_cast<size_t>(steps + 1));
  for (int64_t k = steps; k >= 0; --k)
    times.push_back(shiftedTime(
        top * static_cast<double>(k) / static_cast<double>(steps), shift));
  return times;
}

double sampling::shiftedTime(double t, double shift) {
  // Exact at the ends: 0 stays 0 and 1 stays 1.
  if (shift == 1.0 || t == 0.0 || t == 1.0)
    return t;
  return shift * t / (1.0 + (shift - 1.0) * t);
}

double sampling::resolutionShift(int64_t imageTokens, double baseShift,
                                 double maxShift) {
  // mu is linear in the image's token count: base_shift at 256 tokens,
  // max_shift at 4096.
  constexpr double kBaseTokens = 256, kMaxTokens = 4096;
  double slope = (maxShift - baseShift) / (kMaxTokens - kBaseTokens);
  double mu =
      baseShift + slope * (static_cast<double>(imageTokens) - kBaseTokens);
  return std::exp(mu);
}

double sampling::signalScale(double t) {
  // Exactly 1 at t = 0 (cos(0)), where a sampler ends.
  return std::cos(M_PI / 2 * t);
}

double sampling::noiseScale(double t) { return std::sin(M_PI / 2 * t); }

Decomposed sampling::decompose(Prediction prediction, double t, double x,
                               double pred) {
  double c = signalScale(t), s = noiseScale(t);
  if (prediction == Prediction::VPrediction)
    return {c * x - s * pred, s * x + c * pred};
  return {(x - s * pred) / c, pred};
}

void sampling::applyGuidance(llvm::ArrayRef<float> cond,
                             llvm::ArrayRef<float> uncond, double scale,
                             llvm::MutableArrayRef<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    double u = uncond[i];
    out[i] = static_cast<float>(u + scale * (cond[i] - u));
  }
}

std::vector<float> sampling::initialNoise(uint64_t seed,
                                          llvm::ArrayRef<int64_t> ids,
                                          int64_t elements) {
  uint64_t key = streamKey(seed, Stream::Initial);
  std::vector<float> x(ids.size() * static_cast<size_t>(elements));
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t e = 0; e < elements; ++e)
      x[i * elements + e] = static_cast<float>(::sd::ref::normalAt(
          key, static_cast<uint64_t>(ids[i]) * elements + e));
  return x;
}

void sampling::samplerStep(const SamplerOptions &options, int64_t step,
                           double t, double next, llvm::ArrayRef<int64_t> ids,
                           int64_t elements, llvm::ArrayRef<float> pred,
                           llvm::MutableArrayRef<float> x) {
  if (options.sampler == Sampler::Euler) {
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(x[i] + (next - t) * pred[i]);
    return;
  }
  double a = alphaBar(t), b = alphaBar(next);
  uint64_t key =
      streamKey(options.seed, Stream::Ddpm, static_cast<uint64_t>(step));
  // DDPM's posterior q(x_next | x_t, x0) between two times of the cosine
  // schedule (Ho et al. eq. 7 with ᾱ_t / ᾱ_next in place of α_t).
  double beta = 1 - a / b;
  double meanX0 = std::sqrt(b) * beta / (1 - a);
  double meanX = std::sqrt(a / b) * (1 - b) / (1 - a);
  double deviation = std::sqrt(std::max(0.0, (1 - b) / (1 - a) * beta));
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t e = 0; e < elements; ++e) {
      size_t at = i * elements + e;
      Decomposed d = decompose(options.prediction, t, x[at], pred[at]);
      if (options.clipX0 && std::abs(d.x0) > 1) {
        d.x0 = std::clamp(d.x0, -1.0, 1.0);
        // The noise that x_t and the clipped x0 imply (GLIDE's and
        // diffusers' use_clipped_model_output): keeping the network's
        // noise beside a clipped x0 leaves DDIM's deterministic path off
        // the model's and speckles the samples.
        d.noise = (x[at] - signalScale(t) * d.x0) / noiseScale(t);
      }
      double value;
      if (options.sampler == Sampler::Ddim) {
        value = signalScale(next) * d.x0 + noiseScale(next) * d.noise;
      } else {
        value = meanX0 * d.x0 + meanX * x[at];
        if (deviation > 0)
          value += deviation *
                   ::sd::ref::normalAt(
                       key, static_cast<uint64_t>(ids[i]) * elements + e);
      }
      x[at] = static_cast<float>(value);
    }
  }
}

absl::StatusOr<std::vector<float>>
sampling::sample(const SamplerOptions &options, int64_t steps,
                 llvm::ArrayRef<int64_t> ids, int64_t elements,
                 const Denoiser &denoise,
                 const std::function<void(int64_t)> &afterStep) {
  std::vector<double> times =
      samplingTimes(options.sampler, steps, options.timeShift);
  std::vector<float> x = initialNoise(options.seed, ids, elements);
  for (int64_t k = 0; k < steps; ++k) {
    absl::StatusOr<std::vector<float>> pred = denoise(x, times[k]);
    if (!pred.ok())
      return pred.status();
    if (pred->size() != x.size())
      return absl::InternalError(absl::StrFormat(
          "the denoiser returned %d values for %d", pred->size(), x.size()));
    samplerStep(options, k, times[k], times[k + 1], ids, elements, *pred, x);
    if (afterStep)
      afterStep(k);
  }
  return x;
}

int64_t sampling::defaultZoom(int64_t height, int64_t width) {
  int64_t side = std::max<int64_t>(1, std::max(height, width));
  return std::max<int64_t>(1, (32 + side - 1) / side);
}

Image sampling::sampleGrid(llvm::ArrayRef<float> samples, int64_t rows,
                           int64_t columns, int64_t height, int64_t width,
                           int64_t channels, int64_t zoom) {
  constexpr int64_t kGap = 2;
  constexpr uint8_t kBackground = 64;
  Image image;
  int64_t cellWidth = width * zoom + kGap, cellHeight = height * zoom + kGap;
  image.width = columns * cellWidth + kGap;
  image.height = rows * cellHeight + kGap;
  image.rgb.assign(static_cast<size_t>(image.width * image.height * 3),
                   kBackground);
  auto toByte = [](float value) {
    double scaled = (static_cast<double>(value) + 1) / 2 * 255;
    return static_cast<uint8_t>(std::lround(std::clamp(scaled, 0.0, 255.0)));
  };
  int64_t elements = height * width * channels;
  for (int64_t s = 0; s < rows * columns; ++s) {
    const float *sample = samples.data() + s * elements;
    int64_t left = kGap + (s % columns) * cellWidth;
    int64_t top = kGap + (s / columns) * cellHeight;
    for (int64_t y = 0; y < height * zoom; ++y)
      for (int64_t x = 0; x < width * zoom; ++x) {
        const float *pixel =
            sample + ((y / zoom) * width + x / zoom) * channels;
        uint8_t *out =
            image.rgb.data() + ((top + y) * image.width + left + x) * 3;
        for (int64_t c = 0; c < 3; ++c)
          out[c] = toByte(pixel[channels == 3 ? c : 0]);
      }
  }
  return image;
}
