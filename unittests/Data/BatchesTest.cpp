//===- BatchesTest.cpp - Text-conditioned data sets and their batches -----===//
//
// A data set of video latents [F, H, W, C] with cached text states and
// pooled text vectors (as a user's pipeline writes one, without sddata),
// read by the reader and fed to a step's latents, context, pooled and
// guidance inputs by the batch maker.
//
//===----------------------------------------------------------------------===//

#include "DataTestUtils.h"

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Data/Batches.h"
#include "sd/Data/Dataset.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>

using namespace sd;
using namespace sd::data;
using namespace sd::data::testing;

namespace {

/// Sample i: latents [2, 1, 1, 2] = 4 values i·10 + k, text states [2, 2]
/// = i·100 + k, a pooled vector [3] = −i − k/10.
std::vector<float> values(int64_t i, int64_t n, double base, double step) {
  std::vector<float> out;
  for (int64_t k = 0; k < n; ++k)
    out.push_back(static_cast<float>(base * static_cast<double>(i) +
                                     step * static_cast<double>(k)));
  return out;
}

/// Writes `count` samples as one shard of split "train" and the index.
DatasetIndex writeTextDataset(const fs::path &dir, int64_t count) {
  DatasetIndex index;
  index.dir = dir.string();
  index.name = "text";
  index.source = "the tests";
  index.sampleFeature = "latents";
  index.sampleShape = {2, 1, 1, 2};
  index.hasLabels = false;
  index.embeddingShape = std::vector<int64_t>{2, 2};
  index.pooledShape = std::vector<int64_t>{3};
  std::vector<float> latents, states, pooled;
  for (int64_t i = 0; i < count; ++i) {
    for (float v : values(i, 4, 10, 1))
      latents.push_back(v);
    for (float v : values(i, 4, 100, 1))
      states.push_back(v);
    for (float v : values(i, 3, -1, -0.1))
      pooled.push_back(v);
  }
  std::string file = "train-00000.safetensors";
  absl::StatusOr<ckpt::WrittenFile> written =
      ckpt::writeSafetensors((dir / file).string(),
                             {{"latents", {count, 2, 1, 1, 2}, latents.data()},
                              {"embeddings", {count, 2, 2}, states.data()},
                              {"pooled_embeddings", {count, 3}, pooled.data()}},
                             {});
  EXPECT_TRUE(written.ok()) << written.status();
  SplitInfo &split = index.splits["train"];
  split.count = count;
  split.shards.push_back({file, count, written->sizeBytes, written->crc32});
  EXPECT_TRUE(writeDatasetIndex(index, dir.string()).ok());
  return index;
}

TEST(TextDatasetTest, VideoLatentsAndPooledEmbeddingsRoundTrip) {
  fs::path dir = freshDir();
  writeTextDataset(dir, 3);
  absl::StatusOr<DatasetIndex> index = readDatasetIndex(dir.string());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->sampleShape, (std::vector<int64_t>{2, 1, 1, 2}));
  EXPECT_EQ(index->pooledShape, (std::vector<int64_t>{3}));
  EXPECT_EQ(index->pooledElements(), 3);
  EXPECT_EQ(formatDatasetIndex(*index), readFile(dir / "index.json"));
  absl::Status verified = verifyDataset(*index);
  ASSERT_TRUE(verified.ok()) << verified;

  absl::StatusOr<DatasetReader> reader = DatasetReader::open(*index, "train");
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->pooledElements(), 3);
  std::vector<float> pooled(6), latents(8);
  ASSERT_TRUE(
      reader
          ->readSamples({2, 0}, latents.data(), nullptr, nullptr, pooled.data())
          .ok());
  EXPECT_EQ(latents, (std::vector<float>{20, 21, 22, 23, 0, 1, 2, 3}));
  EXPECT_EQ(pooled, (std::vector<float>{-2, -2.1f, -2.2f, 0, -0.1f, -0.2f}));
}

TEST(TextDatasetTest, SampleRanksAndPooledShapesAreChecked) {
  DatasetIndex index;
  index.name = "x";
  index.source = "s";
  index.sampleFeature = "images";
  index.range = std::array<double, 2>{-1, 1};
  index.sampleShape = {1, 2, 3, 4};
  index.hasLabels = false;
  index.splits["train"];
  // Images are [H, W, C]; latents may be video.
  EXPECT_EQ(
      parseDatasetIndex(formatDatasetIndex(index), "i.json").status().message(),
      "'i.json': features.images.shape must be an array of 3 positive "
      "sizes (at most 2^24 each)");
  index.sampleFeature = "latents";
  absl::StatusOr<DatasetIndex> video =
      parseDatasetIndex(formatDatasetIndex(index), "i.json");
  EXPECT_TRUE(video.ok()) << video.status();
  index.sampleShape = {1, 1, 2, 3, 4};
  EXPECT_EQ(
      parseDatasetIndex(formatDatasetIndex(index), "i.json").status().message(),
      "'i.json': features.latents.shape must be an array of 3 or 4 "
      "positive sizes (at most 2^24 each)");
  // Four sizes of up to 2^24 each: the product is checked as it grows.
  index.sampleShape = {1 << 24, 1 << 24, 1 << 15, 1};
  EXPECT_EQ(
      parseDatasetIndex(formatDatasetIndex(index), "i.json").status().message(),
      "'i.json': features.latents.shape has more than 2^31 elements");
  index.sampleShape = {2, 3, 4};
  index.pooledShape = std::vector<int64_t>{4, 4};
  EXPECT_EQ(
      parseDatasetIndex(formatDatasetIndex(index), "i.json").status().message(),
      "'i.json': features.pooled_embeddings.shape must be an array of 1 "
      "positive sizes (at most 2^24 each)");
}

/// A Flux-like step: latents, noise, timestep, text states, pooled text
/// vector and the distilled guidance, batch 2.
std::vector<StepInput> fluxInputs() {
  return {{0, InputRole::Latents, "latents.0", {2, 2, 1, 1, 2}},
          {1, InputRole::Noise, "noise.0", {2, 2, 1, 1, 2}},
          {2, InputRole::Timestep, "timestep.0", {2}},
          {3, InputRole::Context, "context.0", {2, 2, 2}},
          {4, InputRole::Pooled, "pooled.0", {2, 3}},
          {5, InputRole::Guidance, "guidance.0", {2}}};
}

TEST(TextBatchesTest, PooledAndGuidanceInputsAreFed) {
  fs::path dir = freshDir();
  DatasetIndex index = writeTextDataset(dir, 2);
  absl::StatusOr<DatasetReader> reader = DatasetReader::open(index, "train");
  ASSERT_TRUE(reader.ok()) << reader.status();
  BatchOptions options;
  options.dataset = std::make_shared<const DatasetReader>(std::move(*reader));
  options.index = index;
  options.guidance = 3.5;
  absl::StatusOr<std::unique_ptr<BatchMaker>> maker =
      BatchMaker::create(fluxInputs(), 2, options);
  ASSERT_TRUE(maker.ok()) << maker.status();
  absl::StatusOr<std::vector<std::vector<float>>> batch = (*maker)->make(0);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const std::vector<std::vector<float>> &in = *batch;
  // Each row's latents, states and pooled vector are one sample's.
  for (int64_t r = 0; r < 2; ++r) {
    int64_t sample = static_cast<int64_t>(in[0][r * 4] / 10);
    EXPECT_EQ(
        std::vector<float>(in[0].begin() + r * 4, in[0].begin() + r * 4 + 4),
        values(sample, 4, 10, 1));
    EXPECT_EQ(
        std::vector<float>(in[3].begin() + r * 4, in[3].begin() + r * 4 + 4),
        values(sample, 4, 100, 1));
    EXPECT_EQ(
        std::vector<float>(in[4].begin() + r * 3, in[4].begin() + r * 3 + 3),
        values(sample, 3, -1, -0.1));
  }
  EXPECT_EQ(in[5], (std::vector<float>{3.5f, 3.5f}));

  // Synthetic data fills the pooled input too (normal values), apart from
  // the text states.
  BatchOptions synthetic;
  synthetic.syntheticSamples = 4;
  synthetic.guidance = 1.0;
  maker = BatchMaker::create(fluxInputs(), 2, synthetic);
  ASSERT_TRUE(maker.ok()) << maker.status();
  batch = (*maker)->make(0);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_NE(std::vector<float>((*batch)[3].begin(), (*batch)[3].begin() + 3),
            (*batch)[4]);
  EXPECT_NE((*batch)[4][0], 0.0f);
  EXPECT_EQ((*batch)[5], (std::vector<float>{1.0f, 1.0f}));
}

// SDXL's size and crop ids: an uncropped image of the latents' size (8
// pixels a latent position), the same in every row; refused without image
// latents to size them.
TEST(TextBatchesTest, TimeIdsAreThoseOfTheLatentsImage) {
  std::vector<StepInput> inputs = {
      {0, InputRole::Latents, "latents.0", {2, 16, 12, 4}},
      {1, InputRole::Noise, "noise.0", {2, 16, 12, 4}},
      {2, InputRole::Timestep, "timestep.0", {2}},
      {3, InputRole::TimeIds, "time_ids.0", {2, 6}}};
  BatchOptions synthetic;
  synthetic.syntheticSamples = 4;
  absl::StatusOr<std::unique_ptr<BatchMaker>> maker =
      BatchMaker::create(inputs, 2, synthetic);
  ASSERT_TRUE(maker.ok()) << maker.status();
  absl::StatusOr<std::vector<std::vector<float>>> batch = (*maker)->make(3);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ((*batch)[3], (std::vector<float>{128, 96, 0, 0, 128, 96, 128, 96, 0,
                                             0, 128, 96}));
  inputs.erase(inputs.begin());
  maker = BatchMaker::create(inputs, 2, synthetic);
  ASSERT_FALSE(maker.ok());
  EXPECT_EQ(maker.status().message(),
            "input 'time_ids.0' holds SDXL's size and crop ids [B, 6], which "
            "come from image latents [B, H, W, C]; the model has none");
}

TEST(TextBatchesTest, DataSetsWithoutPooledEmbeddingsAreRefused) {
  fs::path dir = freshDir();
  DatasetIndex index = writeTextDataset(dir, 2);
  index.pooledShape.reset();
  EXPECT_EQ(checkDatasetFits(fluxInputs(), index).message(),
            "the model's input 'pooled.0' holds pooled text vectors of shape "
            "[3] but data set 'text' (" +
                dir.string() + ") has no pooled_embeddings");
  index.pooledShape = std::vector<int64_t>{4};
  EXPECT_EQ(checkDatasetFits(fluxInputs(), index).message(),
            "the model's input 'pooled.0' holds pooled text vectors of shape "
            "[3] but data set 'text' (" +
                dir.string() + ") has pooled_embeddings of shape [4]");
}

/// The timesteps of `batch` samples (synthetic data) drawn as `options`
/// ask.
std::vector<float> timesteps(BatchOptions options, int64_t batch) {
  options.syntheticSamples = batch;
  std::vector<StepInput> inputs = {
      {0, InputRole::Timestep, "timestep.0", {batch}}};
  absl::StatusOr<std::unique_ptr<BatchMaker>> maker =
      BatchMaker::create(inputs, batch, options);
  EXPECT_TRUE(maker.ok()) << maker.status();
  absl::StatusOr<std::vector<std::vector<float>>> made = (*maker)->make(0);
  EXPECT_TRUE(made.ok()) << made.status();
  return made->front();
}

TEST(TimestepSamplingTest, Distributions) {
  constexpr int64_t n = 20000;
  BatchOptions uniform;
  std::vector<float> u = timesteps(uniform, n);
  // Logit-normal: sigmoid(mean + std·z); its median is sigmoid(mean), and
  // with std 1 about 68% of the draws lie in [sigmoid(-1), sigmoid(1)].
  BatchOptions logit = uniform;
  logit.timesteps = TimestepSampling::LogitNormal;
  logit.logitMean = 0.5;
  std::vector<float> l = timesteps(logit, n);
  std::vector<float> sorted = l;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NEAR(sorted[n / 2], 1 / (1 + std::exp(-0.5)), 0.01);
  EXPECT_GE(sorted.front(), 0.0f);
  EXPECT_LT(sorted.back(), 1.0f);
  int64_t inside = std::count_if(l.begin(), l.end(), [](float t) {
    return t >= 1 / (1 + std::exp(0.5)) && t <= 1 / (1 + std::exp(-1.5));
  });
  EXPECT_NEAR(static_cast<double>(inside) / n, 0.6827, 0.01);
  // Shift s: each draw is the uniform one, shifted (s·u / (1 + (s−1)·u)).
  BatchOptions shift = uniform;
  shift.timesteps = TimestepSampling::Shift;
  shift.shift = 3.0;
  std::vector<float> s = timesteps(shift, n);
  for (int64_t i = 0; i < n; i += 997)
    EXPECT_NEAR(s[i], 3.0 * u[i] / (1.0 + 2.0 * u[i]), 1e-6) << i;
  // The names round-trip; others are refused.
  for (TimestepSampling kind :
       {TimestepSampling::Uniform, TimestepSampling::LogitNormal,
        TimestepSampling::Shift})
    EXPECT_EQ(parseTimestepSampling(timestepSamplingName(kind)), kind);
  EXPECT_FALSE(parseTimestepSampling("logit-normal").has_value());
}

/// timestep_bias: a piecewise-constant density, m times higher in
/// [begin, end); the share of draws there is m·w / (1 + (m − 1)·w) for
/// width w, each draw a monotone function of the uniform one.
TEST(TimestepSamplingTest, Bias) {
  constexpr int64_t n = 20000;
  BatchOptions uniform;
  std::vector<float> u = timesteps(uniform, n);
  auto share = [&](const std::vector<float> &t, double lo, double hi) {
    return static_cast<double>(
               std::count_if(t.begin(), t.end(),
                             [&](float x) { return x >= lo && x < hi; })) /
           n;
  };
  struct Case {
    const char *strategy;
    double multiplier, portion;
    int64_t begin, end;
    double lo, hi;
  };
  for (const Case &c : {Case{"later", 2.0, 0.25, 0, 1000, 0.75, 1.0},
                        Case{"earlier", 3.0, 0.5, 0, 1000, 0.0, 0.5},
                        Case{"range", 0.5, 0.25, 200, 600, 0.2, 0.6}}) {
    std::optional<TimestepBias> bias = TimestepBias::fromStrategy(
        c.strategy, c.multiplier, c.portion, c.begin, c.end);
    ASSERT_TRUE(bias.has_value()) << c.strategy;
    EXPECT_DOUBLE_EQ(bias->begin, c.lo) << c.strategy;
    EXPECT_DOUBLE_EQ(bias->end, c.hi) << c.strategy;
    BatchOptions biased = uniform;
    biased.bias = *bias;
    std::vector<float> t = timesteps(biased, n);
    double w = c.hi - c.lo;
    double expected = c.multiplier * w / (1 + (c.multiplier - 1) * w);
    EXPECT_NEAR(share(t, c.lo, c.hi), expected, 0.01) << c.strategy;
    // Uniform inside the interval: its halves hold the same share.
    double mid = (c.lo + c.hi) / 2;
    EXPECT_NEAR(share(t, c.lo, mid), expected / 2, 0.01) << c.strategy;
    for (int64_t i = 1; i < n; i += 991) {
      EXPECT_GE(t[i], 0.0f);
      EXPECT_LT(t[i], 1.0f);
      EXPECT_EQ(u[i] < u[i - 1], t[i] < t[i - 1]) << c.strategy << " " << i;
    }
  }
  // none (or a multiplier of 1) leaves the draws as they are.
  BatchOptions none = uniform;
  none.bias = *TimestepBias::fromStrategy("none", 2.0, 0.25, 0, 1000);
  EXPECT_EQ(timesteps(none, n), u);
  EXPECT_FALSE(TimestepBias::fromStrategy("late", 2.0, 0.25, 0, 1000));
}

} // namespace
