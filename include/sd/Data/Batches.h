//===- Batches.h - The inputs of each training step -------------*- C++ -*-===//
//
// What a training step trains on: the samples of a data set (or of a
// generated one), fresh noise, fresh timesteps and labels with
// classifier-free-guidance dropout, every step.
//
// The step reads the stream of samples at positions q = 0, 1, 2, ...: the
// batch of B samples that starts at position p holds positions p .. p+B-1.
// Position q is sample perm_e[q mod N] of the data set's N samples, where
// e = q div N is its epoch and perm_e a seeded permutation of the epoch (a
// new order every epoch). Everything else about a sample is drawn from
// sd's counter-based RNG keyed by the seed and q alone: its noise, its
// timestep in [0, 1), whether its label is dropped to the null class. So a
// step's batch depends on nothing but the seed and the position, never on
// the mesh, the process or what ran before: a resumed run continues
// bitwise, and each process makes only the rows its devices hold.
//
// Synthetic data (dataset_type: synthetic) is a generated data set of
// `syntheticSamples` samples (normal latents, context and pooled vectors,
// uniform class labels, drawn from the seed by sample id), read the same
// way. A guidance input holds one strength for every sample.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DATA_BATCHES_H
#define SD_DATA_BATCHES_H

#include "sd/Data/Dataset.h"
#include "sd/Runtime/ArgumentSpec.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sd::data {

/// What one input of a training step holds (the runtime's typed argument
/// description says it).
using ::sd::rt::InputRole;

/// An input of the step: which argument, what it holds, its global shape
/// (batch-major: dimension 0 is the batch).
struct StepInput {
  size_t argument = 0;
  InputRole role = InputRole::Latents;
  std::string name;
  std::vector<int64_t> globalShape;
};

/// Whether data set `index` fits the model's inputs, compared after their
/// batch dimension: the latents' sample shape, one label column per class
/// plus the null class, the text embeddings' shape. The error names the
/// input and the data set. BatchMaker::create checks it, and sdrun does
/// before it compiles anything (from the model's own argument types).
absl::Status checkDatasetFits(const std::vector<StepInput> &inputs,
                              const DatasetIndex &index);

/// The VAE's spatial factor: a latent position is 8×8 pixels.
constexpr int64_t kVaeFactor = 8;

/// SDXL's micro-conditioning (input role time_ids) of a sample neither
/// resized nor cropped: [original height, original width, crop top, crop
/// left, target height, target width] in pixels, the image being its
/// latents [B, H, W, C] × kVaeFactor. Nullopt unless `latentShape` has
/// rank 4.
std::optional<std::array<float, 6>>
sdxlTimeIds(const std::vector<int64_t> &latentShape);
/// sdxlTimeIds of the step's latents input; nullopt without one.
std::optional<std::array<float, 6>>
sdxlTimeIds(const std::vector<StepInput> &inputs);

/// How a flow model's training timesteps t in [0, 1) are drawn
/// (timestep_sampling): uniform; logit-normal, t = sigmoid(mean + std·n)
/// for a standard normal n (SD3's and diffusers' flow-matching scripts);
/// or uniform u shifted by s, t = s·u / (1 + (s − 1)·u) (flow_shift, as the
/// sampler's shift: more of the noisier steps for s > 1).
enum class TimestepSampling { Uniform, LogitNormal, Shift };

/// "uniform", "logit_normal", "shift"; and back (nullopt for others).
const char *timestepSamplingName(TimestepSampling sampling);
std::optional<TimestepSampling> parseTimestepSampling(std::string_view name);

/// timestep_bias (diffusers' SDXL training scripts, MaxDiffusion's key):
/// uniform timesteps drawn `multiplier` times as often in [begin, end) as
/// elsewhere in [0, 1). The density is piecewise constant and is sampled
/// through its inverse CDF, so a draw stays a function of one uniform.
struct TimestepBias {
  double multiplier = 1;
  double begin = 0, end = 0;

  /// The bias of a strategy: "none", "earlier" (the first `portion` of
  /// [0, 1)), "later" (the last `portion`) or "range" ([begin, end) of
  /// kBiasTimesteps steps, diffusers' slice); nullopt for another name.
  static std::optional<TimestepBias> fromStrategy(std::string_view strategy,
                                                  double multiplier,
                                                  double portion, int64_t begin,
                                                  int64_t end);
  bool active() const { return multiplier != 1 && end > begin; }
  /// The timestep of uniform `u` in [0, 1).
  double apply(double u) const;
};
/// The discrete timesteps timestep_bias's range counts (DDPM's 1000).
inline constexpr int64_t kBiasTimesteps = 1000;

struct BatchOptions {
  uint64_t seed = 0;
  TimestepSampling timesteps = TimestepSampling::Uniform;
  /// Applied to Uniform's draws (timestep_bias).
  TimestepBias bias;
  /// LogitNormal's mean and standard deviation; Shift's s.
  double logitMean = 0, logitStd = 1, shift = 1;
  /// Probability that a sample's label is replaced by the null class (the
  /// last column of the one-hot labels): DiT's class_dropout_prob.
  double labelDropout = 0;
  /// The split to read; null for synthetic data.
  std::shared_ptr<const DatasetReader> dataset;
  /// Its index (classes, feature names) when `dataset` is set.
  std::optional<DatasetIndex> index;
  /// Synthetic data: the generated data set's size (>= 1).
  int64_t syntheticSamples = 1;
  /// The guidance strength of every sample, for a model with a guidance
  /// input (Flux.1-dev's distilled guidance; the model's sd.guidance).
  double guidance = 0;
};

/// Rows [begin, end) of the batch.
struct RowRange {
  int64_t begin = 0, end = 0;
};

/// Makes the inputs of a step (see the file comment).
class BatchMaker {
public:
  /// Checks that the inputs fit the data set: latents of its sample shape,
  /// one-hot labels with a column per class plus the null class, context of
  /// its embeddings' shape and pooled vectors of its pooled embeddings'
  /// shape (or none of them). InvalidArgument naming the
  /// input, the data set and both shapes.
  static absl::StatusOr<std::unique_ptr<BatchMaker>>
  create(std::vector<StepInput> inputs, int64_t batch, BatchOptions options);

  int64_t batch() const { return globalBatch; }
  /// Samples in the data set (N).
  int64_t numSamples() const;
  /// e = q div N.
  int64_t epochOf(int64_t position) const { return position / numSamples(); }
  const std::vector<StepInput> &inputs() const { return stepInputs; }

  /// The inputs (one global row-major tensor per StepInput, in order) of
  /// the batch starting at `position`, with only `rows` of the batch
  /// filled (the others zero); all rows when `rows` is empty.
  absl::StatusOr<std::vector<std::vector<float>>>
  make(int64_t position, const std::vector<RowRange> &rows = {}) const;

private:
  BatchMaker(std::vector<StepInput> inputs, int64_t batch,
             BatchOptions options);
  /// The data set's sample at stream position `q`.
  int64_t sampleAt(int64_t q) const;

  std::vector<StepInput> stepInputs;
  int64_t globalBatch;
  BatchOptions options;
  /// The permutation of the last epoch asked for (guarded: the loader
  /// thread and the verifier both make batches).
  mutable std::mutex epochMutex;
  mutable int64_t cachedEpoch = -1;
  mutable std::vector<int64_t> cachedOrder;
};

/// A batch made ahead of its step, and when the loader made it.
struct PreparedBatch {
  int64_t position = 0;
  std::vector<std::vector<float>> inputs;
  std::chrono::steady_clock::time_point begin, end;
};

/// Makes the next batch on a thread of its own while the current step
/// runs: next() returns the batch made ahead and starts the one after.
class Prefetcher {
public:
  /// Batches start at `position` and advance by the maker's batch size.
  Prefetcher(const BatchMaker &maker, int64_t position,
             std::vector<RowRange> rows);
  ~Prefetcher();
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  /// Waits for the batch made ahead (the maker's error, if it failed).
  absl::StatusOr<PreparedBatch> next();

private:
  void run();

  const BatchMaker &maker;
  std::vector<RowRange> rows;
  std::mutex mutex;
  std::condition_variable changed;
  /// The position of the batch to make next; the made batch, if any.
  int64_t wanted;
  std::optional<absl::StatusOr<PreparedBatch>> ready;
  bool stopping = false;
  std::thread thread;
};

} // namespace sd::data

#endif // SD_DATA_BATCHES_H
