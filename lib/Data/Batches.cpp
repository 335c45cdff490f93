//===- Batches.cpp - The inputs of each training step ---------------------===//

#include "sd/Data/Batches.h"

#include "sd/Data/Split.h"
#include "sd/Reference/Random.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>

using namespace sd;
using namespace sd::data;

const char *sd::data::timestepSamplingName(TimestepSampling sampling) {
  switch (sampling) {
  case TimestepSampling::Uniform:
    return "uniform";
  case TimestepSampling::LogitNormal:
    return "logit_normal";
  case TimestepSampling::Shift:
    return "shift";
  }
  return "uniform";
}

std::optional<TimestepSampling>
sd::data::parseTimestepSampling(std::string_view name) {
  for (TimestepSampling sampling :
       {TimestepSampling::Uniform, TimestepSampling::LogitNormal,
        TimestepSampling::Shift})
    if (name == timestepSamplingName(sampling))
      return sampling;
  return std::nullopt;
}

std::optional<TimestepBias>
TimestepBias::fromStrategy(std::string_view strategy, double multiplier,
                           double portion, int64_t begin, int64_t end) {
  TimestepBias bias;
  bias.multiplier = multiplier;
  if (strategy == "none") {
    bias.multiplier = 1;
  } else if (strategy == "earlier") {
    bias.end = portion;
  } else if (strategy == "later") {
    bias.begin = 1 - portion;
    bias.end = 1;
  } else if (strategy == "range") {
    bias.begin = static_cast<double>(begin) / kBiasTimesteps;
    bias.end = static_cast<double>(end) / kBiasTimesteps;
  } else {
    return std::nullopt;
  }
  return bias;
}

double TimestepBias::apply(double u) const {
  if (!active())
    return u;
  // Density 1 outside [begin, end) and m inside, over the total mass z.
  double width = end - begin;
  double v = u * (1 + (multiplier - 1) * width);
  double t;
  if (v < begin)
    t = v;
  else if (v < begin + multiplier * width)
    t = begin + (v - begin) / multiplier;
  else
    t = v - (multiplier - 1) * width;
  // In [0, 1) as f32 holds it.
  return std::min(t, 1.0 - 0x1p-24);
}

namespace {

/// The RNG streams of a batch, each keyed by the seed and its tag.
enum class Stream : uint64_t {
  Noise = 1,
  Timestep,
  Dropout,
  Epoch,
  SyntheticLatents,
  SyntheticLabels,
  SyntheticContext,
  SyntheticPooled,
};

using ref::splitMix64;

uint64_t streamKey(uint64_t seed, Stream stream, uint64_t extra = 0) {
  return splitMix64(
      splitMix64(seed ^ splitMix64(static_cast<uint64_t>(stream))) ^ extra);
}

/// Timestep `index` of the stream: uniform in [0, 1), or transformed as
/// `options` asks (TimestepSampling); each a function of the seed and the
/// index alone.
double timestepAt(const BatchOptions &options, uint64_t index) {
  uint64_t key = streamKey(options.seed, Stream::Timestep);
  switch (options.timesteps) {
  case TimestepSampling::Uniform:
    return options.bias.apply(ref::uniformAt(key, index));
  case TimestepSampling::LogitNormal: {
    double z = options.logitMean + options.logitStd * ref::normalAt(key, index);
    // In [0, 1) as f32 holds it.
    return std::min(1.0 / (1.0 + std::exp(-z)), 1.0 - 0x1p-24);
  }
  case TimestepSampling::Shift: {
    double u = ref::uniformAt(key, index);
    return options.shift * u / (1.0 + (options.shift - 1.0) * u);
  }
  }
  return ref::uniformAt(key, index);
}

int64_t product(const std::vector<int64_t> &shape, size_t from) {
  int64_t n = 1;
  for (size_t d = from; d < shape.size(); ++d)
    n *= shape[d];
  return n;
}

std::string shapeText(const std::vector<int64_t> &shape, size_t from) {
  return formatShape(
      absl::Span<const int64_t>(shape.data() + from, shape.size() - from));
}

/// A conditioning input (text states, pooled vectors) against the data set's
/// feature of that name, `shape` per sample (unset: the data set has none).
absl::Status checkConditioning(const StepInput &input,
                               const std::optional<std::vector<int64_t>> &shape,
                               const char *holds, const char *feature,
                               const std::string &dataset) {
  std::string given = shapeText(input.globalShape, 1);
  if (!shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's input '", input.name, "' holds ", holds, " of shape ",
        given, " but ", dataset, " has no ", feature));
  if (given != formatShape(*shape))
    return absl::InvalidArgumentError(
        absl::StrCat("the model's input '", input.name, "' holds ", holds,
                     " of shape ", given, " but ", dataset, " has ", feature,
                     " of shape ", formatShape(*shape)));
  return absl::OkStatus();
}

} // namespace

BatchMaker::BatchMaker(std::vector<StepInput> inputs, int64_t batch,
                       BatchOptions options)
    : stepInputs(std::move(inputs)), globalBatch(batch),
      options(std::move(options)) {}

absl::Status data::checkDatasetFits(const std::vector<StepInput> &inputs,
                                    const DatasetIndex &index) {
  std::string dataset = "data set '" + index.name + "' (" + index.dir + ")";
  for (const StepInput &input : inputs) {
    switch (input.role) {
    case InputRole::Latents:
      if (shapeText(input.globalShape, 1) != formatShape(index.sampleShape))
        return absl::InvalidArgumentError(absl::StrCat(
            "the model's input '", input.name, "' holds samples of shape ",
            shapeText(input.globalShape, 1), " but ", dataset, " has ",
            index.sampleFeature, " of shape ", formatShape(index.sampleShape)));
      break;
    case InputRole::Labels: {
      int64_t columns = product(input.globalShape, 1);
      int64_t classes = static_cast<int64_t>(index.classNames.size());
      if (!index.hasLabels)
        return absl::InvalidArgumentError(
            absl::StrCat("the model's input '", input.name,
                         "' holds class labels but ", dataset, " has none"));
      if (input.globalShape.size() != 2 || columns != classes + 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "the model's input '", input.name, "' has ", columns,
            " label columns, but ", dataset, " has ", classes,
            " classes: the model needs one column per class plus the null "
            "class (",
            classes + 1, ")"));
      break;
    }
    case InputRole::Context:
      if (absl::Status status =
              checkConditioning(input, index.embeddingShape, "text context",
                                "embeddings", dataset);
          !status.ok())
        return status;
      break;
    case InputRole::Pooled:
      if (absl::Status status =
              checkConditioning(input, index.pooledShape, "pooled text vectors",
                                "pooled_embeddings", dataset);
          !status.ok())
        return status;
      break;
    case InputRole::Noise:
    case InputRole::Timestep:
    case InputRole::Guidance:
    case InputRole::TimeIds:
      break;
    }
  }
  return absl::OkStatus();
}

std::optional<std::array<float, 6>>
data::sdxlTimeIds(const std::vector<int64_t> &latentShape) {
  if (latentShape.size() != 4)
    return std::nullopt;
  auto height = static_cast<float>(latentShape[1] * kVaeFactor);
  auto width = static_cast<float>(latentShape[2] * kVaeFactor);
  return std::array<float, 6>{height, width, 0.0f, 0.0f, height, width};
}

std::optional<std::array<float, 6>>
data::sdxlTimeIds(const std::vector<StepInput> &inputs) {
  for (const StepInput &input : inputs)
    if (input.role == InputRole::Latents)
      return sdxlTimeIds(input.globalShape);
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<BatchMaker>>
BatchMaker::create(std::vector<StepInput> inputs, int64_t batch,
                   BatchOptions options) {
  if (batch < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", batch, " samples"));
  if (!(options.labelDropout >= 0 && options.labelDropout <= 1))
    return absl::InvalidArgumentError(absl::StrFormat(
        "class_dropout_prob %g is not in [0, 1]", options.labelDropout));
  if (!options.dataset && options.syntheticSamples < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "a synthetic data set of ", options.syntheticSamples, " samples"));
  for (const StepInput &input : inputs)
    if (input.globalShape.empty() || input.globalShape[0] != batch)
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input.name, "' of shape ", formatShape(input.globalShape),
          " is not batch-major with a batch of ", batch));
  for (const StepInput &input : inputs)
    if (input.role == InputRole::TimeIds && !sdxlTimeIds(inputs))
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", input.name,
          "' holds SDXL's size and crop ids [B, 6], which come from image "
          "latents [B, H, W, C]; the model has none"));
  if (options.dataset) {
    if (!options.index)
      return absl::InvalidArgumentError("a data set without its index");
    if (absl::Status status = checkDatasetFits(inputs, *options.index);
        !status.ok())
      return status;
    const DatasetIndex &index = *options.index;
    std::string dataset = "data set '" + index.name + "' (" + index.dir + ")";
    if (options.dataset->size() < 1)
      return absl::InvalidArgumentError(dataset + " has no training samples");
  }
  return std::unique_ptr<BatchMaker>(
      new BatchMaker(std::move(inputs), batch, std::move(options)));
}

int64_t BatchMaker::numSamples() const {
  return options.dataset ? options.dataset->size() : options.syntheticSamples;
}

int64_t BatchMaker::sampleAt(int64_t q) const {
  int64_t n = numSamples();
  int64_t epoch = q / n;
  std::lock_guard<std::mutex> lock(epochMutex);
  if (epoch != cachedEpoch) {
    cachedOrder = seededPermutation(n, streamKey(options.seed, Stream::Epoch,
                                                 static_cast<uint64_t>(epoch)));
    cachedEpoch = epoch;
  }
  return cachedOrder[q % n];
}

absl::StatusOr<std::vector<std::vector<float>>>
BatchMaker::make(int64_t position, const std::vector<RowRange> &rows) const {
  if (position < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("batch position ", position));
  std::vector<int64_t> wanted;
  if (rows.empty()) {
    for (int64_t r = 0; r < globalBatch; ++r)
      wanted.push_back(r);
  } else {
    std::vector<bool> seen(globalBatch, false);
    for (RowRange range : rows)
      for (int64_t r = std::max<int64_t>(range.begin, 0);
           r < std::min(range.end, globalBatch); ++r)
        if (!seen[r]) {
          seen[r] = true;
          wanted.push_back(r);
        }
    std::sort(wanted.begin(), wanted.end());
  }
  // The data set's samples of the wanted rows, read once for all inputs.
  std::vector<int64_t> ids;
  for (int64_t r : wanted)
    ids.push_back(sampleAt(position + r));
  std::vector<float> samples, labels, embeddings, pooled;
  if (options.dataset) {
    const DatasetReader &reader = *options.dataset;
    bool needSamples = false, needLabels = false, needContext = false,
         needPooled = false;
    for (const StepInput &input : stepInputs) {
      needSamples |= input.role == InputRole::Latents;
      needLabels |= input.role == InputRole::Labels;
      needContext |= input.role == InputRole::Context;
      needPooled |= input.role == InputRole::Pooled;
    }
    if (needSamples)
      samples.resize(ids.size() * reader.sampleElements());
    if (needLabels)
      labels.resize(ids.size());
    if (needContext)
      embeddings.resize(ids.size() * reader.embeddingElements());
    if (needPooled)
      pooled.resize(ids.size() * reader.pooledElements());
    if (absl::Status status =
            reader.readSamples(ids, needSamples ? samples.data() : nullptr,
                               needLabels ? labels.data() : nullptr,
                               needContext ? embeddings.data() : nullptr,
                               needPooled ? pooled.data() : nullptr);
        !status.ok())
      return status;
  }

  // Checked by create(): with a time_ids input, the latents give the ids.
  std::optional<std::array<float, 6>> timeIds = sdxlTimeIds(stepInputs);
  std::vector<std::vector<float>> result;
  for (const StepInput &input : stepInputs) {
    std::vector<float> values(globalBatch * product(input.globalShape, 1),
                              0.0f);
    int64_t per = product(input.globalShape, 1);
    for (size_t k = 0; k < wanted.size(); ++k) {
      int64_t r = wanted[k];
      uint64_t q = static_cast<uint64_t>(position + r);
      uint64_t id = static_cast<uint64_t>(ids[k]);
      float *row = values.data() + r * per;
      switch (input.role) {
      case InputRole::Latents:
        if (options.dataset) {
          std::copy_n(samples.data() + k * per, per, row);
        } else {
          uint64_t key = streamKey(options.seed, Stream::SyntheticLatents);
          for (int64_t e = 0; e < per; ++e)
            row[e] = static_cast<float>(
                ref::normalAt(key, id * static_cast<uint64_t>(per) + e));
        }
        break;
      case InputRole::Context:
      case InputRole::Pooled: {
        bool context = input.role == InputRole::Context;
        if (options.dataset) {
          std::copy_n((context ? embeddings : pooled).data() + k * per, per,
                      row);
        } else {
          uint64_t key =
              streamKey(options.seed, context ? Stream::SyntheticContext
                                              : Stream::SyntheticPooled);
          for (int64_t e = 0; e < per; ++e)
            row[e] = static_cast<float>(
                ref::normalAt(key, id * static_cast<uint64_t>(per) + e));
        }
        break;
      }
      case InputRole::Guidance:
        std::fill_n(row, per, static_cast<float>(options.guidance));
        break;
      case InputRole::TimeIds:
        std::copy_n(timeIds->data(), std::min<int64_t>(per, 6), row);
        break;
      case InputRole::Noise: {
        uint64_t key = streamKey(options.seed, Stream::Noise);
        for (int64_t e = 0; e < per; ++e)
          row[e] = static_cast<float>(
              ref::normalAt(key, q * static_cast<uint64_t>(per) + e));
        break;
      }
      case InputRole::Timestep:
        for (int64_t e = 0; e < per; ++e)
          row[e] = static_cast<float>(
              timestepAt(options, q * static_cast<uint64_t>(per) + e));
        break;
      case InputRole::Labels: {
        // One-hot over the classes and the null class (the last column).
        int64_t nullClass = per - 1;
        int64_t label;
        if (options.dataset) {
          label = static_cast<int64_t>(labels[k]);
        } else {
          double u = ref::uniformAt(
              streamKey(options.seed, Stream::SyntheticLabels), id);
          label = std::min<int64_t>(
              std::max<int64_t>(nullClass, 1) - 1,
              static_cast<int64_t>(u * std::max<int64_t>(nullClass, 1)));
        }
        if (options.labelDropout > 0 &&
            ref::uniformAt(streamKey(options.seed, Stream::Dropout), q) <
                options.labelDropout)
          label = nullClass;
        if (label < 0 || label >= per)
          return absl::InvalidArgumentError(absl::StrCat(
              "sample ", ids[k], " has label ", label, ", which input '",
              input.name, "' has no column for"));
        row[label] = 1.0f;
        break;
      }
      }
    }
    result.push_back(std::move(values));
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Prefetcher
//===----------------------------------------------------------------------===//

Prefetcher::Prefetcher(const BatchMaker &maker, int64_t position,
                       std::vector<RowRange> rows)
    : maker(maker), rows(std::move(rows)), wanted(position) {
  thread = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
}

void Prefetcher::run() {
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    changed.wait(lock, [&] { return stopping || !ready; });
    if (stopping)
      return;
    int64_t position = wanted;
    lock.unlock();
    PreparedBatch batch;
    batch.position = position;
    batch.begin = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<std::vector<float>>> made =
        maker.make(position, rows);
    batch.end = std::chrono::steady_clock::now();
    lock.lock();
    if (made.ok()) {
      batch.inputs = std::move(*made);
      ready = std::move(batch);
    } else {
      ready = made.status();
    }
    changed.notify_all();
  }
}

absl::StatusOr<PreparedBatch> Prefetcher::next() {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return ready.has_value(); });
  absl::StatusOr<PreparedBatch> batch = std::move(*ready);
  ready.reset();
  // A failed batch is not retried: the run ends with its error.
  if (batch.ok())
    wanted = batch->position + maker.batch();
  changed.notify_all();
  return batch;
}
