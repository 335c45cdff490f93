//===- RunDigestTest.cpp - Tests for what the ranks must agree on ---------===//

#include "sd/Config/RunDigest.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <string>

using namespace sd;

namespace {

HostInfo host() {
  HostInfo info;
  info.cores = 8;
  info.startTime = "20261122-110512";
  return info;
}

/// The flags of one rank of a 2-rank job on data:2(dcn=2),fsdp:2.
RunSpecFlags rankFlags() {
  RunSpecFlags flags;
  flags.modelPath = "dit_tiny.mlir";
  flags.mesh = "data:1,fsdp:2";
  flags.dcnMesh = "data:2";
  flags.processes = 2;
  flags.processesFromMpi = true;
  return flags;
}

RunDigest digestOf(const RunSpecFlags &flags,
                   DigestScope scope = DigestScope::Training) {
  absl::StatusOr<RunSpec> spec = resolveRunSpec(flags, host());
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? runSpecDigest(*spec, scope) : RunDigest();
}

/// What rank 1 given `change` reports against rank 0 given the base flags.
std::string differenceFor(const std::function<void(RunSpecFlags &)> &change,
                          RunSpecFlags base = rankFlags(),
                          DigestScope scope = DigestScope::Training) {
  RunSpecFlags changed = base;
  change(changed);
  std::optional<std::string> difference =
      firstDifference(digestOf(base, scope), 0, digestOf(changed, scope), 1);
  return difference.value_or("");
}

TEST(RunDigestTest, SameFlagsAgree) {
  EXPECT_EQ(differenceFor([](RunSpecFlags &) {}), "");
  EXPECT_FALSE(firstDisagreement(
      {digestOf(rankFlags()), digestOf(rankFlags()), digestOf(rankFlags())}));
}

// Every setting that changes what the ranks compute, or which collectives
// they take part in, is named with both values.
TEST(RunDigestTest, EverySettingThatMustAgree) {
  struct Case {
    std::function<void(RunSpecFlags &)> change;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](RunSpecFlags &f) { f.mesh = "data:1,tensor:2"; },
       "rank 1's mesh is data:1,tensor:2, rank 0's is data:1,fsdp:2"},
      {[](RunSpecFlags &f) { f.dcnMesh = "fsdp:2"; },
       "rank 1's dcn_mesh is fsdp:2, rank 0's is data:2"},
      {[](RunSpecFlags &f) { f.iciBandwidth = "100GB/s"; },
       "rank 1's ici_bandwidth is 1e+11, rank 0's is 1e+10"},
      {[](RunSpecFlags &f) { f.dcnBandwidth = "100GB/s"; },
       "rank 1's dcn_bandwidth is 1e+11, rank 0's is 3.125e+09"},
      {[](RunSpecFlags &f) { f.iciLatency = "2us"; },
       "rank 1's ici_latency is 2e-06, rank 0's is 1e-06"},
      {[](RunSpecFlags &f) { f.dcnLatency = "2us"; },
       "rank 1's dcn_latency is 2e-06, rank 0's is 2.5e-05"},
      {[](RunSpecFlags &f) { f.rules = "sdxl"; },
       "rank 1's logical_axis_rules is 'sdxl', rank 0's is 'dit'"},
      {[](RunSpecFlags &f) { f.batch = 8; },
       "rank 1's batch is 8, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.bucketCapMb = 25.0; },
       "rank 1's bucket_cap_mb is 25, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.attention = "flash"; },
       "rank 1's attention is flash, rank 0's is dot_product"},
      {[](RunSpecFlags &f) { f.flashMinSeqLength = 64; },
       "rank 1's flash_min_seq_length is 64, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.remat = "full"; },
       "rank 1's remat_policy is FULL, rank 0's is NONE"},
      {[](RunSpecFlags &f) { f.steps = 20; },
       "rank 1's max_train_steps is 20, rank 0's is 10"},
      {[](RunSpecFlags &f) { f.learningRate = 0.002; },
       "rank 1's learning_rate is 0.002, rank 0's is 0.0001"},
      {[](RunSpecFlags &f) { f.warmupSteps = 3; },
       "rank 1's warmup_steps is 3, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.adamB1 = 0.8; },
       "rank 1's adam_b1 is 0.8, rank 0's is 0.9"},
      {[](RunSpecFlags &f) { f.adamB2 = 0.99; },
       "rank 1's adam_b2 is 0.99, rank 0's is 0.999"},
      {[](RunSpecFlags &f) { f.adamEps = 1e-6; },
       "rank 1's adam_eps is 1e-06, rank 0's is 1e-08"},
      {[](RunSpecFlags &f) { f.weightDecay = 0; },
       "rank 1's adam_weight_decay is 0, rank 0's is 0.01"},
      {[](RunSpecFlags &f) { f.maxGradNorm = 1; },
       "rank 1's max_grad_norm is 1, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.emaDecay = 0.999; },
       "rank 1's ema_decay is 0.999, rank 0's is 0"},
      {[](RunSpecFlags &f) {
         f.datasetType = "sd";
         f.trainDataDir = "data/digits";
       },
       "rank 1's dataset_type is sd, rank 0's is synthetic"},
      {[](RunSpecFlags &f) { f.classDropoutProb = 0.1; },
       "rank 1's class_dropout_prob is 0.1, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.evalEvery = 5; },
       "rank 1's eval_every is 5, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.seed = 7; },
       "rank 1's seed is 7, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.checkpointDir = "/tmp/b"; },
       "rank 1's checkpoint_dir is '/tmp/b', rank 0's is none"},
      {[](RunSpecFlags &f) { f.checkpointEvery = 5; },
       "rank 1's checkpoint_every is 5, rank 0's is 0"},
      {[](RunSpecFlags &f) { f.initFrom = "w.safetensors"; },
       "rank 1's init_from is 'w.safetensors', rank 0's is none"},
      {[](RunSpecFlags &f) { f.exportPath = "out.safetensors"; },
       "rank 1's export is true, rank 0's is false"},
      {[](RunSpecFlags &f) { f.verify = true; },
       "rank 1's verify is true, rank 0's is false"},
      {[](RunSpecFlags &f) { f.allowNonfiniteLoss = true; },
       "rank 1's allow_nonfinite_loss is true, rank 0's is false"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(differenceFor(c.change), c.message);
  // --export-ema needs ema_decay on both.
  RunSpecFlags withEma = rankFlags();
  withEma.emaDecay = 0.999;
  EXPECT_EQ(differenceFor(
                [](RunSpecFlags &f) { f.exportEmaPath = "ema.safetensors"; },
                withEma),
            "rank 1's export_ema is true, rank 0's is false");
}

// Settings that need a base of their own to differ on their own.
TEST(RunDigestTest, SettingsWithinOthers) {
  RunSpecFlags batch = rankFlags();
  batch.batch = 8;
  EXPECT_EQ(differenceFor([](RunSpecFlags &f) { f.gradAccum = 2; }, batch),
            "rank 1's grad_accum is 2, rank 0's is 1");

  RunSpecFlags custom = rankFlags();
  custom.remat = "custom";
  custom.namesSaved = std::vector<std::string>{"query_proj"};
  EXPECT_EQ(differenceFor(
                [](RunSpecFlags &f) {
                  f.namesSaved = std::vector<std::string>{"key_proj"};
                },
                custom),
            "rank 1's names_which_can_be_saved is key_proj, rank 0's is "
            "query_proj");
  EXPECT_EQ(differenceFor(
                [](RunSpecFlags &f) {
                  f.namesOffloaded = std::vector<std::string>{"key_proj"};
                },
                custom),
            "rank 1's names_which_can_be_offloaded is key_proj, rank 0's is "
            "none");

  RunSpecFlags data = rankFlags();
  data.datasetType = "sd";
  data.trainDataDir = "a/digits";
  EXPECT_EQ(
      differenceFor([](RunSpecFlags &f) { f.trainDataDir = "b/digits"; }, data),
      "rank 1's train_data_dir is 'b/digits', rank 0's is 'a/digits'");

  RunSpecFlags checkpoints = rankFlags();
  checkpoints.checkpointDir = "ckpt";
  EXPECT_EQ(
      differenceFor([](RunSpecFlags &f) { f.resume = true; }, checkpoints),
      "rank 1's resume is true, rank 0's is false");

  RunSpecFlags ulysses = rankFlags();
  ulysses.attention = "ulysses_ring";
  ulysses.ulyssesShards = 2;
  EXPECT_EQ(
      differenceFor([](RunSpecFlags &f) { f.ulyssesShards = 1; }, ulysses),
      "rank 1's ulysses_shards is 1, rank 0's is 2");

  RunSpecFlags flash = rankFlags();
  flash.attention = "flash";
  std::string blocks = differenceFor(
      [](RunSpecFlags &f) {
        f.flashBlockSizes = "{\"block_q\": "
                            "256}";
      },
      flash);
  EXPECT_EQ(blocks.rfind("rank 1's flash_block_sizes is {", 0), 0u) << blocks;
  EXPECT_NE(blocks.find("rank 0's is none"), std::string::npos) << blocks;
}

// What a rank may hold alone: its threads, budgets, cache, timeout and the
// outputs only rank 0 writes.
TEST(RunDigestTest, PerRankSettingsNeedNotAgree) {
  EXPECT_EQ(differenceFor([](RunSpecFlags &f) {
              f.threadsPerDevice = 1;
              f.cacheDir = "/tmp/cache";
              f.deviceMemory = "1GiB";
              f.hostMemory = "2GiB";
              f.hostMemoryLimit = "4GiB";
              f.collectiveTimeout = 5;
              f.metricsPath = "m.jsonl";
              f.tracePath = "t.json";
              f.traceAllRanks = true;
              f.outputDir = "out";
              f.runName = "mine";
              f.exportPath = std::nullopt;
            }),
            "");
}

// Sampling compares the forward program's settings only.
TEST(RunDigestTest, SamplingScope) {
  EXPECT_EQ(differenceFor([](RunSpecFlags &f) { f.learningRate = 0.5; },
                          rankFlags(), DigestScope::Sampling),
            "");
  EXPECT_EQ(differenceFor([](RunSpecFlags &f) { f.batch = 8; }, rankFlags(),
                          DigestScope::Sampling),
            "rank 1's batch is 8, rank 0's is 0");
}

TEST(RunDigestTest, Values) {
  EXPECT_EQ(digestValue(0.001), "0.001");
  EXPECT_EQ(digestValue(1e-4), "0.0001");
  EXPECT_EQ(digestValue(3.125e9), "3.125e+09");
  EXPECT_EQ(digestValue(1e-8), "1e-08");
  EXPECT_EQ(digestValue(0.1), "0.1");
  // Exact: a difference in the last bit is a difference.
  EXPECT_NE(digestValue(0.1), digestValue(std::nextafter(0.1, 1.0)));
  EXPECT_EQ(digestValue(int64_t(-3)), "-3");
  EXPECT_EQ(digestValue(true), "true");
  EXPECT_EQ(digestQuoted("a b"), "'a b'");
}

TEST(RunDigestTest, Differences) {
  RunDigest model = {{"model", "xxh3 01", "'a.mlir'"}, {"seed", "0", ""}};
  RunDigest otherFile = {{"model", "xxh3 02", "'b.mlir'"}, {"seed", "0", ""}};
  RunDigest otherContent = {{"model", "xxh3 02", "'a.mlir'"},
                            {"seed", "0", ""}};
  RunDigest sameContent = {{"model", "xxh3 01", "'copy.mlir'"},
                           {"seed", "0", ""}};
  RunDigest noSeed = {{"model", "xxh3 01", "'a.mlir'"}};
  RunDigest extra = {
      {"model", "xxh3 01", "'a.mlir'"}, {"seed", "0", ""}, {"new", "1", ""}};
  EXPECT_EQ(firstDifference(model, 0, otherFile, 2),
            "rank 2's model is 'b.mlir', rank 0's is 'a.mlir'");
  EXPECT_EQ(firstDifference(model, 0, otherContent, 1),
            "rank 1's model 'a.mlir' differs from rank 0's");
  // Compared by value: the same content under another path agrees.
  EXPECT_EQ(firstDifference(model, 0, sameContent, 1), std::nullopt);
  EXPECT_EQ(firstDifference(model, 0, noSeed, 1),
            "rank 1 has no seed, rank 0's is 0");
  EXPECT_EQ(firstDifference(model, 0, extra, 1),
            "rank 1's new is 1, rank 0 has none");
  // The first rank that differs, in rank order.
  EXPECT_EQ(firstDisagreement({model, sameContent, otherFile, noSeed}),
            "rank 2's model is 'b.mlir', rank 0's is 'a.mlir'");
  // The first entry that differs, in the digest's order.
  RunDigest both = {{"model", "xxh3 02", "'b.mlir'"}, {"seed", "1", ""}};
  EXPECT_EQ(firstDifference(model, 0, both, 1),
            "rank 1's model is 'b.mlir', rank 0's is 'a.mlir'");
}

TEST(RunDigestTest, EncodeDecode) {
  RunDigest digest = digestOf(rankFlags());
  digest.push_back({"with:colons", "1:2:3", ""});
  digest.push_back({"empty", "", ""});
  absl::StatusOr<RunDigest> decoded = decodeDigest(encodeDigest(digest));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, digest);
  EXPECT_TRUE(decodeDigest("").ok());
  EXPECT_FALSE(decodeDigest("5:model").ok());
  EXPECT_FALSE(decodeDigest("x:model").ok());
  EXPECT_FALSE(decodeDigest("5:model3:abc").ok());
  absl::StatusOr<RunDigest> truncated =
      decodeDigest(encodeDigest(digest).substr(0, 40));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("malformed run digest"),
            std::string::npos);
}

} // namespace
