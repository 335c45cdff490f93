//===- Sample.h - Sampling images from a trained model ----------*- C++ -*-===//
//
// What `sdsample` does: run a model's @denoise, partitioned for a mesh and
// compiled like sdrun's training step, inside a DDPM, DDIM or Euler sampler
// loop with classifier-free guidance, and write the samples as a PNG grid
// and a safetensors file.
//
// The sampler math (namespace `sampling`) is plain C++ on float vectors and
// knows nothing of MLIR or the runtime, so it is tested on its own with
// hand-made predictors. Everything random is drawn on the host from sd's
// counter-based RNG keyed by the seed, the step and the sample's index, and
// the device program only computes the network's prediction, so the samples
// do not depend on the mesh, the batch or the chunk a sample falls in.
//
// Time runs as in training (docs/sdgen.md, "Prediction types"): t in [0, 1]
// with t = 0 clean. Epsilon and v models use the cosine schedule
// x_t = cos(πt/2)·x0 + sin(πt/2)·noise; flow models x_t = (1−t)·x0 + t·noise.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_SAMPLE_H
#define SD_DRIVER_SAMPLE_H

#include "sd/Driver/TrainProgram.h"
#include "sd/Passes/Passes.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Runtime/Session.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sd {
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
/// (noise) to 0: t_k = T·k/N for k = N, ..., 0 on a uniform grid, where T is
/// kCosineMaxTime for DDPM and DDIM and 1 for Euler. Step k (0-based) goes
/// from times[k] to times[k + 1]; the network is evaluated at the first N.
std::vector<double> samplingTimes(Sampler sampler, int64_t steps);

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

//===----------------------------------------------------------------------===//
// The model's @denoise on a mesh
//===----------------------------------------------------------------------===//

/// `shape` as messages write it: "[2, 4, 8]".
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// A model's @denoise, built for a mesh, compiled, loaded and fed with
/// weights: each predict() is one step of the device program on a whole
/// batch.
class DenoiseProgram {
public:
  /// Builds @denoise of `module` with `pipeline` (mesh, rules, batch),
  /// compiles it (or finds it in the cache) and starts a session. Errors
  /// from the compiler are reported on the module first.
  static absl::StatusOr<std::unique_ptr<DenoiseProgram>>
  create(ModuleOp module, const PipelineOptions &pipeline,
         const DeviceSettings &settings);
  ~DenoiseProgram();

  /// The global batch of one call, the sample shape [H, W, C], the classes
  /// (label columns − 1; 0 for a model without labels) and the mesh.
  int64_t batch() const { return batchSize; }
  const std::vector<int64_t> &sampleShape() const { return shape; }
  int64_t sampleElements() const { return elements; }
  int64_t numClasses() const { return classes; }
  const ::sd::MeshSpec &mesh() const;
  ::sd::rt::TrainingSession &session() { return *trainingSession; }
  /// The parameters: name and global shape, in argument order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> parameters() const;
  int64_t parameterCount() const;

  /// Hands every device its blocks of the parameters (`weights[name]`, each
  /// of its global shape) and zeros for the inputs. InvalidArgument naming
  /// the first parameter missing from `weights`.
  absl::Status
  setWeights(const std::map<std::string, std::vector<float>> &weights);

  /// The prediction [batch, H, W, C] for x_t [batch, H, W, C], t [batch]
  /// and one-hot labels [batch, classes + 1] (empty without labels).
  absl::StatusOr<std::vector<float>> predict(const std::vector<float> &x,
                                             const std::vector<float> &t,
                                             const std::vector<float> &labels);

private:
  DenoiseProgram() = default;

  std::unique_ptr<::sd::rt::TrainingSession> trainingSession;
  int64_t batchSize = 0, elements = 0, classes = 0;
  std::vector<int64_t> shape;
  /// Argument indices of the inputs (-1: absent).
  int64_t latentsArg = -1, timestepArg = -1, labelsArg = -1;
};

/// The guided prediction of `program` for a chunk of samples, `classes[i]`
/// being sample i's class (ignored without labels): one device call holds
/// the conditional rows and, unless `guidanceScale` is 1 or the model has
/// no labels, the unconditional rows (the null class, the last label
/// column) below them; padding rows repeat x = 0 at the same t. The chunk
/// must fit: classes.size() ≤ samplesPerCall(program, guidanceScale).
sampling::Denoiser guidedDenoiser(DenoiseProgram &program,
                                  std::vector<int64_t> classes,
                                  double guidanceScale);
/// The samples one device call holds: the batch, or half of it with
/// guidance.
int64_t samplesPerCall(const DenoiseProgram &program, double guidanceScale);

/// The weights of a model by name, from a safetensors file or the latest
/// checkpoint of a directory.
struct WeightSource {
  /// What was read ("w.safetensors", "ckpt/step_00000020 (step 20)").
  std::string description;
  /// A checkpoint (its EMA weights are "ema NAME"), or a safetensors file.
  bool checkpoint = false;
  /// Tensors by name (checkpoints: every argument, "ema NAME" included).
  std::map<std::string, std::vector<float>> tensors;
  std::map<std::string, std::vector<int64_t>> shapes;
};
absl::StatusOr<WeightSource> readWeightsFile(const std::string &path);
absl::StatusOr<WeightSource> readLatestCheckpoint(const std::string &dir);

/// The parameters `program` needs from `source`: the EMA weights ("ema
/// NAME") when `ema` is true, or when it is unset and the source has them;
/// the raw ones otherwise. InvalidArgument naming the missing tensor, a
/// shape that differs or a weight that is not finite. `usedEma` says which.
absl::StatusOr<std::map<std::string, std::vector<float>>>
selectWeights(const WeightSource &source, const DenoiseProgram &program,
              std::optional<bool> ema, bool &usedEma);

struct SampleOptions {
  std::string modelPath;
  /// @denoise's pipeline: mesh, rules, batch (train is ignored).
  PipelineOptions pipeline;
  DeviceSettings device;
  /// Exactly one: a safetensors file or a checkpoint directory.
  std::string weightsPath, checkpointDir;
  /// The EMA weights: yes, no, or when present (unset).
  std::optional<bool> ema;
  /// Unset: the model's `sd.prediction_type`, else epsilon.
  std::optional<sampling::Prediction> prediction;
  /// Unset: sampling::defaultSampler of the prediction.
  std::optional<sampling::Sampler> sampler;
  /// Unset: on for DDPM and DDIM.
  std::optional<bool> clipX0;
  int64_t steps = 50;
  double guidanceScale = 1.0;
  uint64_t seed = 0;
  int64_t samplesPerClass = 1;
  /// The classes to sample, a grid row each; empty: every class.
  std::vector<int64_t> classes;
  /// Outputs ("" for none); `gridZoom` 0 for defaultZoom.
  std::string gridPath, outputPath;
  int64_t gridZoom = 0;
};

/// The sampling keys of a MaxDiffusion-style config file
/// (configs/dit_digits.yml): `num_inference_steps`, `guidance_scale` and
/// `prediction_type`, unset when the file does not give them; other keys
/// are left to the run spec. InvalidArgument `FILE:LINE: ...` for a value
/// of the wrong type.
struct SamplingConfig {
  std::optional<int64_t> steps;
  std::optional<double> guidanceScale;
  std::optional<sampling::Prediction> prediction;
};
absl::StatusOr<SamplingConfig> readSamplingConfig(const std::string &path);

/// The most samples one run makes, and the most steps.
constexpr int64_t kMaxSamples = int64_t(1) << 20;
constexpr int64_t kMaxSamplingSteps = 100000;

/// The model's prediction type as its @loss or @denoise records it in
/// `sd.prediction_type`, if it does; InvalidArgument for a value that is
/// not one.
absl::StatusOr<std::optional<sampling::Prediction>>
modelPrediction(ModuleOp module);

/// Runs sdsample on `module`: checks the options, reads the weights, builds
/// and compiles @denoise, samples every class's samples in chunks of
/// samplesPerCall and writes the outputs (process 0 of a multi-process run
/// only), printing its progress. Errors come back as the message the tool
/// prints after `sdsample: error: `, or as a reportedFailure
/// (sd/Driver/TrainRun.h) when the compiler has printed a diagnostic.
absl::Status runSampling(ModuleOp module, const SampleOptions &options);

/// Parses `options.modelPath` and runs runSampling on it.
absl::Status sampleModelFile(const SampleOptions &options);

} // namespace mlir::sd

#endif // SD_DRIVER_SAMPLE_H
