//===- Sampler.h - DDPM, DDIM and Euler on float vectors --------*- C++ -*-===//
//
// The samplers of `sdsample` as plain C++ on float vectors: no MLIR, no
// runtime, so they are tested on their own with hand-made predictors.
// Everything random is drawn from sd's counter-based RNG keyed by the seed,
// the step and the sample's index, so the samples do not depend on the
// mesh, the batch or the chunk a sample falls in.
//
// Time runs as in training (docs/sdgen.md, "Prediction types"): t in [0, 1]
// with t = 0 clean. Epsilon and v models use the cosine schedule
// x_t = cos(πt/2)·x0 + sin(πt/2)·noise; flow models x_t = (1−t)·x0 + t·noise.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SAMPLING_SAMPLER_H
#define SD_SAMPLING_SAMPLER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace sd {
namespace sampling {

/// The sampler: DDPM (ancestral) and DDIM (η = 0) for epsilon and v models,
/// Euler for flow models.
enum class Sampler { Ddpm, Ddim, Euler };
/// What the network predicts (sdgen's --prediction-type).
enum class Prediction { Epsilon, VPrediction, Flow };

/// "ddpm", "ddim", "euler".
llvm::StringRef samplerName(Sampler sampler);
std::optional<Sampler> parseSampler(llvm::StringRef name);
/// "epsilon", "v_prediction", "flow".
llvm::StringRef predictionName(Prediction prediction);
std::optional<Prediction> parsePrediction(llvm::StringRef name);

/// The sampler a model of `prediction` gets without --sampler: DDIM, or
/// Euler for flow.
Sampler defaultSampler(Prediction prediction);

/// InvalidArgument unless `sampler` fits `prediction` (DDPM and DDIM need
/// the cosine schedule of epsilon and v models, Euler a flow model).
absl::Status checkSampler(Sampler sampler, Prediction prediction);

/// Where the cosine samplers start: at t = 1 the signal is gone and an
/// epsilon model's x0 = (x_t − sin·ε) / cos is undefined, so they start
/// just below it (cos(π/2 · 0.999) ≈ 0.0016).
constexpr double kCosineMaxTime = 0.999;

/// The N + 1 times a sampler of `steps` steps visits, from the first
/// (noise) to 0: t_k = shiftedTime(T·k/N, shift) for k = N, ..., 0, where T
/// is kCosineMaxTime for DDPM and DDIM and 1 for Euler (a uniform grid when
/// `shift` is 1). Step k (0-based) goes from times[k] to times[k + 1]; the
/// network is evaluated at the first N.
std::vector<double> samplingTimes(Sampler sampler, int64_t steps,
                                  double shift = 1.0);

/// The flow-matching time shift of diffusers' FlowMatchEulerDiscreteScheduler
/// (Wan's flow_shift; Flux's shift e^mu): t' = s·t / (1 + (s − 1)·t), which
/// keeps 0 and 1 and spends more steps at high noise when s > 1.
double shiftedTime(double t, double shift);

/// Flux's resolution-dependent shift e^mu, mu linear in the image's token
/// count from `baseShift` at 256 tokens to `maxShift` at 4096 (MaxDiffusion's
/// base_shift 0.5 and max_shift 1.15 with time_shift).
double resolutionShift(int64_t imageTokens, double baseShift = 0.5,
                       double maxShift = 1.15);

/// sqrt(ᾱ(t)) = cos(πt/2) and sqrt(1 − ᾱ(t)) = sin(πt/2).
double signalScale(double t);
double noiseScale(double t);

/// The clean sample and the noise that a prediction of an epsilon or v
/// model implies at time t for one element x of x_t:
///   epsilon: x0 = (x − sin·ε) / cos,  noise = ε
///   v:       x0 = cos·x − sin·v,      noise = sin·x + cos·v
struct Decomposed {
  double x0 = 0, noise = 0;
};
Decomposed decompose(Prediction prediction, double t, double x, double pred);

/// Classifier-free guidance: out = uncond + scale · (cond − uncond), element
/// by element (scale 1 gives cond, 0 uncond). `out` may alias either input.
void applyGuidance(llvm::ArrayRef<float> cond, llvm::ArrayRef<float> uncond,
                   double scale, llvm::MutableArrayRef<float> out);

struct SamplerOptions {
  Sampler sampler = Sampler::Ddim;
  Prediction prediction = Prediction::Epsilon;
  /// Clip each x0 estimate to [−1, 1] (pixel data in that range) before
  /// DDPM's posterior or DDIM's update, DDIM then taking the noise that
  /// x_t and the clipped x0 imply, (x_t − cos·x0) / sin; unused by Euler.
  bool clipX0 = true;
  /// Keys the initial noise and DDPM's fresh noise.
  uint64_t seed = 0;
  /// Euler's time shift (shiftedTime; 1: the uniform grid).
  double timeShift = 1.0;
};

/// The starting x of the samples `ids` (each `elements` floats, in order):
/// element e of sample n is normalAt(key(seed), n·elements + e), the same
/// for a sample whatever else is sampled with it.
std::vector<float> initialNoise(uint64_t seed, llvm::ArrayRef<int64_t> ids,
                                int64_t elements);

/// Step `step` of the sampler: moves `x` (the samples `ids`, `elements`
/// floats each) from time `t` to time `next` < t, given the network's
/// (guided) prediction `pred` at x_t:
///   DDIM:  x ← cos(next)·x0 + sin(next)·noise
///   DDPM:  x ← the mean of q(x_next | x_t, x0) plus its standard deviation
///          times fresh noise keyed by (seed, step, sample, element); with
///          a = ᾱ(t), b = ᾱ(next), β = 1 − a/b:
///            mean = sqrt(b)·β/(1−a)·x0 + sqrt(a/b)·(1−b)/(1−a)·x,
///            variance = (1−b)/(1−a)·β (0 at next = 0)
///   Euler: x ← x + (next − t)·v
/// Computed in double, rounded to f32.
void samplerStep(const SamplerOptions &options, int64_t step, double t,
                 double next, llvm::ArrayRef<int64_t> ids, int64_t elements,
                 llvm::ArrayRef<float> pred, llvm::MutableArrayRef<float> x);

/// The network's prediction for x_t (samples in order) at time t.
using Denoiser = std::function<absl::StatusOr<std::vector<float>>(
    llvm::ArrayRef<float> x, double t)>;

/// Runs the whole sampler of `steps` steps from initialNoise on the samples
/// `ids` and returns their final x. `afterStep` (if set) is called after
/// each step with its index.
absl::StatusOr<std::vector<float>>
sample(const SamplerOptions &options, int64_t steps,
       llvm::ArrayRef<int64_t> ids, int64_t elements, const Denoiser &denoise,
       const std::function<void(int64_t)> &afterStep = nullptr);

/// An RGB image, rows top first.
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

/// The grid of `rows` × `columns` samples (row-major: sample r·columns + c
/// in row r, column c; each [height, width, channels], values in [−1, 1]
/// mapped to 0..255), each enlarged `zoom` times (nearest), 2 pixels of
/// dark gray between cells and around them, as sddata's contact sheet
/// lays them out. 3 channels show as RGB, other counts as the first channel
/// in gray.
Image sampleGrid(llvm::ArrayRef<float> samples, int64_t rows, int64_t columns,
                 int64_t height, int64_t width, int64_t channels, int64_t zoom);

/// The zoom that makes a cell of height × width at least 32 pixels.
int64_t defaultZoom(int64_t height, int64_t width);

} // namespace sampling
} // namespace sd

#endif // SD_SAMPLING_SAMPLER_H
