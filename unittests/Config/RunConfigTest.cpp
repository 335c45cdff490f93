//===- RunConfigTest.cpp - Tests for MaxDiffusion-style run configs -------===//

#include "sd/Config/RunConfig.h"

#include "../Sharding/ShardingTestUtils.h"

#include "absl/strings/str_format.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>

using namespace sd;

namespace {

const std::string kMaxDiffusionDir = SD_TEST_MAXDIFFUSION_DIR;
const std::string kConfigsDir = SD_CONFIGS_DIR;

::testing::AssertionResult failsWith(const absl::Status &status,
                                     const std::string &expected) {
  if (status.ok())
    return ::testing::AssertionFailure() << "succeeded, expected an error";
  return isInvalidArgumentWith(status, expected);
}

template <typename T>
::testing::AssertionResult failsWith(const absl::StatusOr<T> &result,
                                     const std::string &expected) {
  return failsWith(result.status(), expected);
}

/// Whether the config `text` (file "t.yml") fails to parse with `expected`.
::testing::AssertionResult configFailsWith(const std::string &text,
                                           const std::string &expected) {
  return failsWith(parseRunConfig(text, "t.yml"), expected);
}

RunConfig parse(const std::string &text) {
  absl::StatusOr<RunConfig> config = parseRunConfig(text, "t.yml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : RunConfig();
}

RunConfig load(const std::string &path) {
  absl::StatusOr<RunConfig> config = loadRunConfig(path);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : RunConfig();
}

bool contains(const std::vector<std::string> &list, const std::string &item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

LogicalAxisRules preset(std::string_view name) {
  absl::StatusOr<LogicalAxisRules> rules = presetRules(name);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *rules : LogicalAxisRules();
}

FlashBlockSizes uniformFlash(int64_t size) {
  FlashBlockSizes sizes;
  sizes.blockQ = sizes.blockKvCompute = sizes.blockKv = sizes.blockQDkv =
      sizes.blockKvDkv = sizes.blockKvDkvCompute = sizes.blockQDq =
          sizes.blockKvDq = size;
  return sizes;
}

//===----------------------------------------------------------------------===//
// MaxDiffusion's own files
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, BaseXl) {
  RunConfig c = load(kMaxDiffusionDir + "/base_xl.yml");
  EXPECT_EQ(c.fileName, kMaxDiffusionDir + "/base_xl.yml");
  EXPECT_EQ(c.learningRate, 4e-7);
  EXPECT_EQ(c.perDeviceBatchSize, 2.0);
  EXPECT_EQ(c.maxTrainSteps, 200);
  EXPECT_EQ(c.ici[0], -1);
  EXPECT_EQ(c.ici[1], 1);
  EXPECT_EQ(c.dcn[0], -1);
  EXPECT_EQ(c.iciMeshString(), "data:-1,fsdp:1,context:1,tensor:1");
  EXPECT_EQ(c.dcnMeshString(), "data:-1,fsdp:1,context:1,tensor:1");
  EXPECT_EQ(c.adamWeightDecay, 1e-2);
  EXPECT_EQ(c.adamB1, 0.9);
  EXPECT_EQ(c.adamB2, 0.999);
  EXPECT_EQ(c.adamEps, 1e-8);
  EXPECT_EQ(c.maxGradNorm, 1.0);
  EXPECT_EQ(c.gradNormClipping, false);
  EXPECT_EQ(c.warmupStepsFraction, 0.0);
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.checkpointEvery, -1);
  EXPECT_EQ(c.outputDir, "sdxl-model-finetuned");
  EXPECT_EQ(c.runName, "");
  EXPECT_EQ(c.weightsDtype, "float32");
  EXPECT_EQ(c.activationsDtype, "bfloat16");
  EXPECT_FALSE(c.rematPolicy.has_value());         // base_xl.yml has none.
  EXPECT_EQ(c.flashBlockSizes, FlashBlockSizes()); // `{}`: the defaults.
  ASSERT_TRUE(c.rules.has_value());
  EXPECT_EQ(*c.rules, preset("sdxl"));
  // The released weights are read (as a local folder), not ignored.
  EXPECT_EQ(c.pretrained, "stabilityai/stable-diffusion-xl-base-1.0");
  EXPECT_FALSE(contains(c.ignoredKeys, "pretrained_model_name_or_path"));
  EXPECT_FALSE(contains(c.ignoredKeys, "learning_rate"));
  EXPECT_FALSE(contains(c.ignoredKeys, "logical_axis_rules"));
  EXPECT_EQ(c.originOf("learning_rate"), kMaxDiffusionDir + "/base_xl.yml:187");
}

TEST(RunConfigTest, BaseWan14b) {
  RunConfig c = load(kMaxDiffusionDir + "/base_wan_14b.yml");
  EXPECT_EQ(c.ici[2], -1);
  EXPECT_EQ(c.dcn[2], -1);
  EXPECT_EQ(c.iciMeshString(), "data:1,fsdp:1,context:-1,tensor:1");
  EXPECT_EQ(c.learningRate, 1e-5);
  EXPECT_EQ(c.perDeviceBatchSize, 1.0);
  EXPECT_EQ(c.maxTrainSteps, 1500);
  EXPECT_EQ(c.warmupStepsFraction, 0.1);
  EXPECT_EQ(c.adamWeightDecay, 0.0);
  EXPECT_EQ(c.rematPolicy, "NONE");
  EXPECT_EQ(c.namesSaved, std::vector<std::string>());
  EXPECT_EQ(c.namesOffloaded, std::vector<std::string>());
  EXPECT_EQ(c.flashBlockSizes, uniformFlash(512));
  EXPECT_EQ(c.weightsDtype, "bfloat16");
  EXPECT_EQ(*c.rules, preset("wan"));
  EXPECT_EQ(c.pretrained, "Wan-AI/Wan2.1-T2V-14B-Diffusers");
  EXPECT_TRUE(contains(c.ignoredKeys, "vae_logical_axis_rules"));
  EXPECT_TRUE(contains(c.ignoredKeys, "opt_enable_grad_clipping"));
  // Both -1 axes are filled: context takes everything.
  absl::StatusOr<MeshSpec> mesh = c.buildMesh({/*devices=*/8,
                                               /*processes=*/2});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->findAxis("context")->ici, 4);
  EXPECT_EQ(mesh->findAxis("context")->dcn, 2);
}

TEST(RunConfigTest, BaseFluxDev) {
  RunConfig c = load(kMaxDiffusionDir + "/base_flux_dev.yml");
  EXPECT_EQ(c.ici[0], -1);
  EXPECT_EQ(c.dcn[1], -1);
  EXPECT_EQ(c.dcnMeshString(), "data:1,fsdp:-1,context:1,tensor:1");
  EXPECT_EQ(c.rematPolicy, "FLUX_OPTIMIZED");
  EXPECT_EQ(c.flashBlockSizes, uniformFlash(1536));
  EXPECT_EQ(c.perDeviceBatchSize, 1.0);
  EXPECT_EQ(c.learningRate, 1e-5);
  EXPECT_EQ(c.adamWeightDecay, 0.0);
  EXPECT_EQ(*c.rules, preset("flux"));
  EXPECT_EQ(c.enableProfiler, false);
  EXPECT_EQ(c.skipFirstNStepsForProfiler, 5);
  EXPECT_EQ(c.profilerSteps, 10);
  EXPECT_EQ(c.pretrained, "black-forest-labs/FLUX.1-dev");
  EXPECT_FALSE(contains(c.ignoredKeys, "profiler_steps"));
}

TEST(RunConfigTest, ProfilerKeys) {
  absl::StatusOr<RunConfig> c = parseRunConfig(
      "enable_profiler: True\nskip_first_n_steps_for_profiler: 0\n"
      "profiler_steps: 3\n",
      "p.yml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->enableProfiler, true);
  EXPECT_EQ(c->skipFirstNStepsForProfiler, 0);
  EXPECT_EQ(c->profilerSteps, 3);
  absl::StatusOr<RunConfig> bad = parseRunConfig("profiler_steps: 0\n", "p.yml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(std::string(bad.status().message()),
            "p.yml:1: profiler_steps: '0' must be at least 1");
}

TEST(RunConfigTest, Base2Base) {
  RunConfig c = load(kMaxDiffusionDir + "/base_2_base.yml");
  EXPECT_EQ(c.learningRate, 1e-7);
  EXPECT_EQ(c.maxTrainSteps, 20);
  EXPECT_EQ(c.outputDir, "sd-model-finetuned");
  EXPECT_EQ(c.ici[0], -1);
  EXPECT_EQ(c.flashBlockSizes, FlashBlockSizes());
  EXPECT_EQ(*c.rules, preset("sdxl"));
  EXPECT_FALSE(contains(c.ignoredKeys, "per_device_batch_size"));
}

TEST(RunConfigTest, IgnoredKeysInFileOrderOnce) {
  RunConfig c = parse("jax_cache_dir: 1\nlearning_rate: 1.e-3\n"
                      "dataset_name: [x]\njax_cache_dir: 2\n");
  EXPECT_EQ(c.ignoredKeys,
            (std::vector<std::string>{"jax_cache_dir", "dataset_name"}));
  // Each names where it came from.
  EXPECT_EQ(c.originOf("jax_cache_dir"), "t.yml:4");
  EXPECT_EQ(c.originOf("dataset_name"), "t.yml:3");
}

//===----------------------------------------------------------------------===//
// Keys that no config knows, and keys that change what is trained
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, UnknownKeysAreErrorsWithASuggestion) {
  EXPECT_TRUE(
      configFailsWith("seed: 1\nmax_train_step: 5\n",
                      "t.yml:2: unknown key 'max_train_step'; did you mean "
                      "'max_train_steps'?"));
  EXPECT_TRUE(configFailsWith("learnig_rate: 1.e-4\n",
                              "t.yml:1: unknown key 'learnig_rate'; did you "
                              "mean 'learning_rate'?"));
  // A MaxDiffusion key sd does not use is suggested too.
  EXPECT_TRUE(configFailsWith("jax_cach_dir: x\n",
                              "t.yml:1: unknown key 'jax_cach_dir'; did you "
                              "mean 'jax_cache_dir'?"));
  EXPECT_TRUE(configFailsWith("my_custom_key: 3\n",
                              "t.yml:1: unknown key 'my_custom_key': neither "
                              "sd nor MaxDiffusion's configs have it"));
  // On the command line.
  RunConfig c;
  EXPECT_TRUE(failsWith(applyOverride(c, "max_train_step=5"),
                        "command line: unknown key 'max_train_step'; did you "
                        "mean 'max_train_steps'?"));
  EXPECT_TRUE(failsWith(applyOverride(c, "nokey=[1"),
                        "command line: unknown key 'nokey': neither sd nor "
                        "MaxDiffusion's configs have it"));
  EXPECT_TRUE(c.ignoredKeys.empty());
}

TEST(RunConfigTest, NearestConfigKey) {
  EXPECT_EQ(nearestConfigKey("max_train_step"), "max_train_steps");
  EXPECT_EQ(nearestConfigKey("ici_dat_parallelism"), "ici_data_parallelism");
  EXPECT_EQ(nearestConfigKey("per_device_batch"), "");
  EXPECT_EQ(nearestConfigKey("x"), "");
  EXPECT_TRUE(isConfigKey("ema_decay")); // sd's own.
  EXPECT_TRUE(isConfigKey("snr_gamma")); // MaxDiffusion's.
  EXPECT_TRUE(isConfigKey("logical_axis_rules"));
  EXPECT_FALSE(isConfigKey("max_train_step"));
}

TEST(RunConfigTest, WhatIsTrainedKeysAreRefusedAfterTheOverrides) {
  const std::pair<const char *, const char *> cases[] = {
      {"wan_transformer_pretrained_model_name_or_path: x",
       "t.yml:2: wan_transformer_pretrained_model_name_or_path: 'x' names a "
       "transformer folder to override the repository's, which sd does not "
       "read (give that folder as pretrained_model_name_or_path); "
       "wan_transformer_pretrained_model_name_or_path='' trains the model "
       "file's own parameters (seeded, or --init-from's) instead"},
      {"unet_checkpoint: 'gs://b/c'",
       "t.yml:2: unet_checkpoint: 'gs://b/c' names a checkpoint to start "
       "from, which sd cannot load yet; unet_checkpoint=''"},
      {"pretrained_orbax_dir: /d",
       "t.yml:2: pretrained_orbax_dir: '/d' names converted weights"},
      {"train_text_encoder: True",
       "t.yml:2: train_text_encoder: True trains the text encoder too, which "
       "sd cannot do yet; train_text_encoder=False trains the model file's "
       "parameters alone"},
  };
  for (const auto &[line, message] : cases) {
    // Read without complaint (an override may undo it), refused after.
    RunConfig c = parse(std::string("seed: 1\n") + line + "\n");
    EXPECT_TRUE(failsWith(verifyRunConfig(c), message)) << line;
    EXPECT_TRUE(failsWith(applyOverrides(c, {}), message)) << line;
  }
  // MaxDiffusion's defaults ask for nothing.
  RunConfig defaults = parse("wan_transformer_pretrained_model_name_or_path: "
                             "''\n"
                             "unet_checkpoint:\n"
                             "train_text_encoder: False\n"
                             "enable_lora: False\n"
                             "lora_config: {lora_model_name_or_path: [], "
                             "weight_name: []}\n"
                             "snr_gamma: -1.0\n");
  EXPECT_TRUE(verifyRunConfig(defaults).ok());
  // enable_lora and lora_config are read (sd trains LoRA adapters), and
  // snr_gamma (min-SNR weighting).
  EXPECT_EQ(defaults.ignoredKeys.size(), 3u);
  EXPECT_EQ(defaults.snrGamma, -1.0);
  EXPECT_EQ(defaults.enableLora, false);
  ASSERT_TRUE(defaults.loraConfig.has_value());
  EXPECT_TRUE(defaults.loraConfig->load.empty());
  // An override undoes the file's value, and sets one.
  RunConfig c = parse("unet_checkpoint: 'gs://b/c'\n");
  EXPECT_TRUE(applyOverrides(c, {"unet_checkpoint="}).ok());
  EXPECT_TRUE(failsWith(applyOverrides(c, {"train_text_encoder=True"}),
                        "command line: train_text_encoder: True trains"));
  // A value of the wrong type is an error as it is read.
  EXPECT_TRUE(configFailsWith("enable_lora: maybe\n",
                              "t.yml:1: enable_lora: 'maybe' is not a "
                              "boolean"));
  EXPECT_TRUE(configFailsWith("lora_config: [a]\n",
                              "t.yml:1: lora_config: expected a mapping, got "
                              "a list"));
}

TEST(RunConfigTest, LoraConfig) {
  // MaxDiffusion's one-element lists, PEFT's names.
  RunConfig c = parse("enable_lora: True\n"
                      "lora_config: {rank: [8], lora_alpha: 16, "
                      "target_modules: [to_q, to_k], "
                      "lora_model_name_or_path: [a/b], scale: [0.5]}\n");
  ASSERT_TRUE(c.loraConfig.has_value());
  EXPECT_EQ(c.enableLora, true);
  EXPECT_EQ(c.loraConfig->rank, 8);
  EXPECT_EQ(c.loraConfig->alpha, 16.0);
  EXPECT_EQ(c.loraConfig->targetModules,
            (std::vector<std::string>{"to_q", "to_k"}));
  EXPECT_EQ(c.loraConfig->load, (std::vector<std::string>{"a/b"}));
  // A string of target modules is PEFT's regular expression.
  RunConfig regex = parse("lora_config: {rank: 4, alpha: 2.5, "
                          "target_modules: '.*attn.*'}\n");
  EXPECT_EQ(regex.loraConfig->targetRegex, ".*attn.*");
  EXPECT_EQ(regex.loraConfig->alpha, 2.5);
  EXPECT_TRUE(configFailsWith("lora_config: {rank: [0]}\n",
                              "t.yml:1: lora_config: rank: '0' must be at "
                              "least 1"));
  EXPECT_TRUE(configFailsWith("lora_config: {rank: [4, 8]}\n",
                              "t.yml:1: lora_config: rank: trains one "
                              "adapter: give one value, not"));
  EXPECT_TRUE(configFailsWith("lora_config: {lora_alpha: 0}\n",
                              "t.yml:1: lora_config: lora_alpha: '0' must be "
                              "positive"));
  EXPECT_TRUE(configFailsWith("lora_config: {target_modules: []}\n",
                              "t.yml:1: lora_config: target_modules: names "
                              "no module"));
  EXPECT_TRUE(configFailsWith("lora_config: {ranks: 4}\n",
                              "t.yml:1: lora_config: unknown field 'ranks'; "
                              "expected rank, lora_alpha"));
}

TEST(RunConfigTest, MaxDiffusionConfigsNameReleasedWeights) {
  // Each of MaxDiffusion's configs loads (its other keys are used or
  // ignored) and names the released weights it fine-tunes, a hub id: the
  // run resolver checks it (a local folder, or an error saying to download
  // it), and an override trains the model file's parameters instead.
  const std::pair<const char *, const char *> configs[] = {
      {"base_xl.yml", "stabilityai/stable-diffusion-xl-base-1.0"},
      {"base_2_base.yml", "stabilityai/stable-diffusion-2-base"},
      {"base_flux_dev.yml", "black-forest-labs/FLUX.1-dev"},
      {"base_wan_14b.yml", "Wan-AI/Wan2.1-T2V-14B-Diffusers"}};
  for (const auto &[name, weights] : configs) {
    std::string path = kMaxDiffusionDir + "/" + name;
    RunConfig c = load(path);
    EXPECT_FALSE(c.ignoredKeys.empty()) << name;
    EXPECT_TRUE(verifyRunConfig(c).ok()) << name;
    EXPECT_EQ(c.pretrained, weights) << name;
    EXPECT_EQ(c.originOf("pretrained_model_name_or_path"), path + ":30")
        << name;
    EXPECT_TRUE(applyOverrides(c, {"pretrained_model_name_or_path=''"}).ok())
        << name;
    EXPECT_EQ(c.pretrained, "") << name;
  }
}

//===----------------------------------------------------------------------===//
// The shipped configs
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, ShippedConfigs) {
  RunConfig tiny = load(kConfigsDir + "/dit_tiny.yml");
  EXPECT_TRUE(tiny.ignoredKeys.empty());
  EXPECT_EQ(tiny.iciMeshString(), "data:2,fsdp:1,context:1,tensor:1");
  EXPECT_EQ(tiny.dcnMeshString(), "");
  EXPECT_EQ(tiny.perDeviceBatchSize, 2.0);
  EXPECT_EQ(tiny.learningRate, 1e-3);
  EXPECT_EQ(tiny.maxTrainSteps, 20);
  EXPECT_EQ(tiny.checkpointEvery, 5);
  EXPECT_EQ(tiny.outputDir, "runs");
  EXPECT_EQ(tiny.runName, "dit_tiny");
  EXPECT_EQ(*tiny.rules, preset("dit"));

  RunConfig s2 = load(kConfigsDir + "/dit_s2.yml");
  EXPECT_TRUE(s2.ignoredKeys.empty());
  EXPECT_EQ(s2.iciMeshString(), "data:2,fsdp:1,context:1,tensor:1");
  absl::StatusOr<MeshSpec> mesh = s2.buildMesh();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->numDevices(), 2);
  EXPECT_EQ(*s2.rules, preset("dit"));

  RunConfig wan = load(kConfigsDir + "/wan.yml");
  EXPECT_TRUE(wan.ignoredKeys.empty());
  EXPECT_EQ(wan.ici[1], 2);
  EXPECT_EQ(wan.ici[2], -1);
  EXPECT_EQ(wan.dcn[2], -1);
  EXPECT_EQ(wan.rematPolicy, "CUSTOM");
  EXPECT_EQ(wan.namesOffloaded, std::vector<std::string>{"ffn_activation"});
  EXPECT_EQ(wan.flashBlockSizes, uniformFlash(512));
  EXPECT_EQ(*wan.rules, preset("wan"));

  RunConfig flux = load(kConfigsDir + "/flux.yml");
  EXPECT_TRUE(flux.ignoredKeys.empty());
  EXPECT_EQ(flux.ici[1], -1);
  EXPECT_EQ(flux.rematPolicy, "FLUX_OPTIMIZED");
  EXPECT_EQ(flux.flashBlockSizes, uniformFlash(1536));
  EXPECT_EQ(flux.learningRate, 1e-5);
  EXPECT_EQ(*flux.rules, preset("flux"));
}

//===----------------------------------------------------------------------===//
// Every key
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, EveryKey) {
  RunConfig c = parse(R"(
ici_data_parallelism: 2
ici_fsdp_parallelism: -1
ici_context_parallelism: 3
ici_tensor_parallelism: 4
dcn_data_parallelism: -1
dcn_fsdp_parallelism: 1
dcn_context_parallelism: 1
dcn_tensor_parallelism: 5
per_device_batch_size: 0.25
remat_policy: CUSTOM
names_which_can_be_saved: [attn_output, 'query_proj']
names_which_can_be_offloaded: "ffn_activation, xq_out"
flash_block_sizes: '{"block_q": 1024, "use_fused_bwd_kernel": true}'
logical_axis_rules: [['batch', 'data'], ['embed', ['fsdp', 'tensor']]]
learning_rate: 1.e-5
adam_b1: 0.8
adam_b2: 0.99
adam_eps: 1e-6
adam_weight_decay: 0
max_grad_norm: 2.5
opt_enable_grad_global_norm_clipping: yes
warmup_steps_fraction: 1
seed: 42
max_train_steps: 7
checkpoint_every: 0
output_dir: out/dir
run_name: 'r1'
weights_dtype: bf16
activations_dtype: "bfloat16"
grad_reduce_dtype: float32
snr_gamma: 5.0
)");
  EXPECT_EQ(c.ici, (std::array<std::optional<int64_t>, 4>{2, -1, 3, 4}));
  EXPECT_EQ(c.dcn, (std::array<std::optional<int64_t>, 4>{-1, 1, 1, 5}));
  EXPECT_EQ(c.iciMeshString(), "data:2,fsdp:-1,context:3,tensor:4");
  EXPECT_EQ(c.dcnMeshString(), "data:-1,fsdp:1,context:1,tensor:5");
  EXPECT_EQ(c.perDeviceBatchSize, 0.25);
  EXPECT_EQ(c.rematPolicy, "CUSTOM");
  EXPECT_EQ(c.namesSaved,
            (std::vector<std::string>{"attn_output", "query_proj"}));
  EXPECT_EQ(c.namesOffloaded,
            (std::vector<std::string>{"ffn_activation", "xq_out"}));
  FlashBlockSizes flash;
  flash.blockQ = flash.blockQDkv = flash.blockQDq = 1024;
  flash.useFusedBwdKernel = true;
  EXPECT_EQ(c.flashBlockSizes, flash);
  ASSERT_TRUE(c.rules.has_value());
  EXPECT_EQ(c.rules->rules,
            (std::vector<LogicalAxisRule>{{"batch", {"data"}},
                                          {"embed", {"fsdp", "tensor"}}}));
  EXPECT_EQ(c.rules->name, "t.yml");
  EXPECT_EQ(c.learningRate, 1e-5);
  EXPECT_EQ(c.adamB1, 0.8);
  EXPECT_EQ(c.adamB2, 0.99);
  EXPECT_EQ(c.adamEps, 1e-6);
  EXPECT_EQ(c.adamWeightDecay, 0.0);
  EXPECT_EQ(c.maxGradNorm, 2.5);
  EXPECT_EQ(c.gradNormClipping, true);
  EXPECT_EQ(c.warmupStepsFraction, 1.0);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.maxTrainSteps, 7);
  EXPECT_EQ(c.checkpointEvery, 0);
  EXPECT_EQ(c.outputDir, "out/dir");
  EXPECT_EQ(c.runName, "r1");
  EXPECT_EQ(c.weightsDtype, "bf16");
  EXPECT_EQ(c.activationsDtype, "bfloat16");
  EXPECT_EQ(c.gradReduceDtype, "float32");
  EXPECT_EQ(c.snrGamma, 5.0);
  EXPECT_TRUE(c.ignoredKeys.empty());
  EXPECT_EQ(c.originOf("seed"), "t.yml:24");
  EXPECT_EQ(c.originOf("logical_axis_rules"), "t.yml:15");
  EXPECT_EQ(c.originOf("unknown"), "");
}

TEST(RunConfigTest, NothingGiven) {
  RunConfig c = parse("# only a comment\n");
  EXPECT_EQ(c.iciMeshString(), "");
  EXPECT_EQ(c.dcnMeshString(), "");
  EXPECT_FALSE(c.learningRate.has_value());
  EXPECT_FALSE(c.rules.has_value());
  absl::StatusOr<MeshSpec> mesh = c.buildMesh();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->numDevices(), 1);
}

TEST(RunConfigTest, Booleans) {
  for (const char *yes : {"true", "True", "TRUE", "yes"})
    EXPECT_EQ(parse(std::string("opt_enable_grad_global_norm_clipping: ") + yes)
                  .gradNormClipping,
              true)
        << yes;
  for (const char *no : {"false", "False", "FALSE", "no"})
    EXPECT_EQ(parse(std::string("opt_enable_grad_global_norm_clipping: ") + no)
                  .gradNormClipping,
              false)
        << no;
}

TEST(RunConfigTest, DuplicateKeysLastWins) {
  RunConfig c = parse("learning_rate: 1.e-3\n"
                      "logical_axis_rules: [['batch', 'data']]\n"
                      "learning_rate: 2.e-3\n"
                      "logical_axis_rules: [['embed', 'fsdp']]\n"
                      "seed: 1\n");
  EXPECT_EQ(c.learningRate, 2e-3);
  EXPECT_EQ(c.originOf("learning_rate"), "t.yml:3");
  ASSERT_TRUE(c.rules.has_value());
  EXPECT_EQ(c.rules->rules,
            (std::vector<LogicalAxisRule>{{"embed", {"fsdp"}}}));
  EXPECT_EQ(c.originOf("logical_axis_rules"), "t.yml:4");
  EXPECT_EQ(c.seed, 1u);
}

TEST(RunConfigTest, RulesInBlockStyleAndAtEnd) {
  RunConfig c = parse("seed: 3\n"
                      "logical_axis_rules:\n"
                      "  - [batch, [data, fsdp]]\n"
                      "  - [embed, null]\n");
  ASSERT_TRUE(c.rules.has_value());
  EXPECT_EQ(c.rules->rules, (std::vector<LogicalAxisRule>{
                                {"batch", {"data", "fsdp"}}, {"embed", {}}}));
}

TEST(RunConfigTest, RulesErrorsKeepFileLines) {
  EXPECT_TRUE(
      configFailsWith("seed: 1\n"
                      "logical_axis_rules: [\n"
                      "  ['batch', 'data'],\n"
                      "  ['embed'],\n"
                      "]\n"
                      "seed: 2\n",
                      "t.yml:4: rule must be [logical_name, mesh_axes]"));
  // An indented root mapping keeps its columns too.
  RunConfig indented = parse("  seed: 1\n  logical_axis_rules:\n"
                             "    - [batch, data]\n");
  ASSERT_TRUE(indented.rules.has_value());
  EXPECT_EQ(indented.rules->rules,
            (std::vector<LogicalAxisRule>{{"batch", {"data"}}}));
}

TEST(RunConfigTest, FlowRootMapping) {
  RunConfig c = parse("{seed: 5, logical_axis_rules: [[batch, data]], "
                      "learning_rate: 1.e-4}\n");
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(c.learningRate, 1e-4);
  ASSERT_TRUE(c.rules.has_value());
  EXPECT_EQ(c.rules->rules,
            (std::vector<LogicalAxisRule>{{"batch", {"data"}}}));
}

//===----------------------------------------------------------------------===//
// Flash block sizes
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, FlashBackwardSizesDefaultToForward) {
  RunConfig c = parse("flash_block_sizes: {block_q: 1024, block_kv: 256,\n"
                      "  block_kv_compute: 128, block_q_dq: 64}\n");
  ASSERT_TRUE(c.flashBlockSizes.has_value());
  const FlashBlockSizes &f = *c.flashBlockSizes;
  EXPECT_EQ(f.blockQ, 1024);
  EXPECT_EQ(f.blockKv, 256);
  EXPECT_EQ(f.blockKvCompute, 128);
  EXPECT_EQ(f.blockQDkv, 1024);
  EXPECT_EQ(f.blockKvDkv, 256);
  EXPECT_EQ(f.blockKvDkvCompute, 128);
  EXPECT_EQ(f.blockQDq, 64);
  EXPECT_EQ(f.blockKvDq, 256);
  EXPECT_FALSE(f.useFusedBwdKernel);

  // The same through JSON, and toString() reads back.
  RunConfig j = parse("flash_block_sizes: '{\"block_q\": 1024, \"block_kv\": "
                      "256, \"block_kv_compute\": 128, \"block_q_dq\": 64}'\n");
  EXPECT_EQ(j.flashBlockSizes, f);
  RunConfig back = parse("flash_block_sizes: '" + f.toString() + "'\n");
  EXPECT_EQ(back.flashBlockSizes, f);
  EXPECT_EQ(FlashBlockSizes().toString(),
            "{\"block_q\": 512, \"block_kv_compute\": 512, \"block_kv\": 512, "
            "\"block_q_dkv\": 512, \"block_kv_dkv\": 512, "
            "\"block_kv_dkv_compute\": 512, \"block_q_dq\": 512, "
            "\"block_kv_dq\": 512, \"use_fused_bwd_kernel\": false}");
}

TEST(RunConfigTest, FlashErrors) {
  // A value the YAML parser cannot read (a directive where a value should
  // be) is an error, not a crash (a fuzzer input).
  EXPECT_TRUE(configFailsWith(
      "flash_block_sizes: \n%flash\n",
      "t.yml:1: flash_block_sizes: expected a mapping or a JSON string of "
      "block sizes, got null"));
  EXPECT_TRUE(
      configFailsWith("flash_block_sizes: {\n"
                      "  block_q: 512,\n"
                      "  block_z: 1}\n",
                      "t.yml:3: flash_block_sizes: unknown field 'block_z'; "
                      "expected one of block_q, block_kv_compute"));
  EXPECT_TRUE(
      configFailsWith("flash_block_sizes: {\n"
                      "  block_kv: 0}\n",
                      "t.yml:2: flash_block_sizes: block_kv: '0' must be "
                      "positive"));
  EXPECT_TRUE(configFailsWith(
      "flash_block_sizes: {use_fused_bwd_kernel: maybe}\n",
      "t.yml:1: flash_block_sizes: use_fused_bwd_kernel: 'maybe' is not a "
      "boolean"));
  EXPECT_TRUE(
      configFailsWith("\nflash_block_sizes: '{\"block_x\": 1}'\n",
                      "t.yml:2: flash_block_sizes: unknown field 'block_x'"));
  EXPECT_TRUE(configFailsWith(
      "flash_block_sizes: '{\"block_q\": -4}'\n",
      "t.yml:1: flash_block_sizes: block_q must be a positive integer"));
  EXPECT_TRUE(configFailsWith("flash_block_sizes: '{\"block_q\": '\n",
                              "t.yml:1: flash_block_sizes: invalid JSON"));
  EXPECT_TRUE(
      configFailsWith("flash_block_sizes: [1]\n",
                      "t.yml:1: flash_block_sizes: expected a mapping or a "
                      "JSON string of block sizes, got a list"));
}

//===----------------------------------------------------------------------===//
// Invalid values: each names the key and the line of the value
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, InvalidValues) {
  const std::pair<const char *, const char *> cases[] = {
      {"ici_data_parallelism: 0", "ici_data_parallelism: '0' must be -1 "
                                  "(fill) or at least 1"},
      {"dcn_tensor_parallelism: two",
       "dcn_tensor_parallelism: 'two' is not an integer"},
      {"ici_fsdp_parallelism: 2.0",
       "ici_fsdp_parallelism: '2.0' is not an integer"},
      {"per_device_batch_size: 0", "per_device_batch_size: '0' must be "
                                   "positive"},
      {"per_device_batch_size: [1]",
       "per_device_batch_size: expected a number, got a list"},
      {"remat_policy: SOME",
       "remat_policy: unknown policy 'SOME'; expected one of NONE, FULL, "
       "MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
       "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM"},
      {"names_which_can_be_saved: {a: 1}",
       "names_which_can_be_saved: expected a list of names or a "
       "comma-separated string, got a mapping"},
      {"names_which_can_be_offloaded: [a, [b]]",
       "names_which_can_be_offloaded: expected a name, got a list"},
      {"logical_axis_rules: [['batch']]",
       "rule must be [logical_name, mesh_axes]"},
      {"learning_rate: abc", "learning_rate: 'abc' is not a number"},
      {"learning_rate: '1e-4'",
       "learning_rate: '1e-4' is a string; write numbers without quotes"},
      {"learning_rate: -1", "learning_rate: '-1' must not be negative"},
      {"learning_rate: .inf", "learning_rate: '.inf' is not a number"},
      {"adam_b1: 1", "adam_b1: '1' must be in [0, 1)"},
      {"adam_b2: -0.1", "adam_b2: '-0.1' must be in [0, 1)"},
      {"adam_eps: 0", "adam_eps: '0' must be positive"},
      {"adam_weight_decay: -1e-2",
       "adam_weight_decay: '-1e-2' must not be negative"},
      {"max_grad_norm: -1", "max_grad_norm: '-1' must not be negative"},
      {"snr_gamma: -0.5", "snr_gamma: '-0.5' must be -1 or 0 (off), or "
                          "positive"},
      {"opt_enable_grad_global_norm_clipping: 1",
       "opt_enable_grad_global_norm_clipping: '1' is not a boolean"},
      {"warmup_steps_fraction: 1.5",
       "warmup_steps_fraction: '1.5' must be in [0, 1]"},
      {"seed: -1", "seed: '-1' must not be negative"},
      {"seed: \"7\"", "seed: \"7\" is a string; write integers without "
                      "quotes"},
      {"max_train_steps: 0", "max_train_steps: '0' must be at least 1"},
      {"checkpoint_every: -2",
       "checkpoint_every: '-2' must be -1, 0 or at least 1"},
      {"output_dir: [a]", "output_dir: expected a string, got a list"},
      {"run_name: {a: b}", "run_name: expected a string, got a mapping"},
      {"weights_dtype: [f32]", "weights_dtype: expected a string, got a list"},
      {"activations_dtype: {}",
       "activations_dtype: expected a string, got a mapping"},
      // float16 is a dtype MaxDiffusion knows and sd does not compute in.
      {"activations_dtype: float16",
       "activations_dtype: unknown dtype 'float16'; expected one of "
       "float32, bfloat16, f32, fp32, bf16"},
      {"grad_reduce_dtype: ''",
       "grad_reduce_dtype: unknown dtype ''; expected one of float32, "
       "bfloat16, f32, fp32, bf16"},
  };
  for (const auto &[line, message] : cases) {
    // A valid key first, so that the line number is checked too.
    std::string text = std::string("seed: 1\n") + line + "\n";
    EXPECT_TRUE(failsWith(parseRunConfig(text, "bad.yml"),
                          std::string("bad.yml:2: ") + message))
        << line;
  }
}

TEST(RunConfigTest, FirstErrorOnly) {
  EXPECT_TRUE(configFailsWith("seed: x\nlearning_rate: y\n",
                              "t.yml:1: seed: 'x' is not an integer"));
}

TEST(RunConfigTest, ValueLineNotKeyLine) {
  EXPECT_TRUE(configFailsWith("learning_rate:\n  abc\n",
                              "t.yml:2: learning_rate: 'abc' is not a number"));
}

TEST(RunConfigTest, EmptyValueLineIsItsKeys) {
  EXPECT_TRUE(configFailsWith("seed:\nlearning_rate: 1\n",
                              "t.yml:1: seed: expected an integer, got null"));
  RunConfig c = parse("run_name:\nseed: 1\n");
  EXPECT_EQ(c.runName, "");
  EXPECT_EQ(c.originOf("run_name"), "t.yml:1");
}

TEST(RunConfigTest, TwoFillAxes) {
  EXPECT_TRUE(configFailsWith(
      "ici_data_parallelism: -1\n"
      "ici_fsdp_parallelism: -1\n",
      "t.yml:2: ici_fsdp_parallelism: only one ICI axis may be -1, but "
      "ici_data_parallelism is -1 too (t.yml:1)"));
  EXPECT_TRUE(configFailsWith(
      "dcn_context_parallelism: -1\n"
      "ici_data_parallelism: -1\n"
      "dcn_tensor_parallelism: -1\n",
      "t.yml:3: dcn_tensor_parallelism: only one DCN axis may be -1, but "
      "dcn_context_parallelism is -1 too (t.yml:1)"));
  // One ICI and one DCN -1 is what base_wan_14b.yml does.
  EXPECT_TRUE(parseRunConfig("ici_data_parallelism: -1\n"
                             "dcn_data_parallelism: -1\n",
                             "t.yml")
                  .ok());
}

TEST(RunConfigTest, DocumentErrors) {
  EXPECT_TRUE(configFailsWith("seed: 1\ndataset_name: [1, 2\n",
                              "t.yml:2: could not find closing ]"));
  EXPECT_TRUE(configFailsWith("- a\n- b\n",
                              "t.yml:1: expected a mapping of config keys"));
  EXPECT_TRUE(configFailsWith("just text\n",
                              "t.yml:1: expected a mapping of config keys"));
  EXPECT_TRUE(configFailsWith("seed: 1\n---\nseed: 2\n",
                              "t.yml:3: expected one YAML document"));
  EXPECT_TRUE(configFailsWith("[a]: 1\n",
                              "t.yml:1: expected a config key, got a list"));
  // A syntax error inside a key sd ignores is still an error.
  EXPECT_TRUE(configFailsWith("seed: 1\nlora_config: {a: 'x\n",
                              "t.yml:2: expected quote at end of scalar"));
  // An explicit key ('?') the parser gives no node for (a fuzzer's input:
  // it crashed the reader).
  EXPECT_TRUE(configFailsWith("#0l ?\n?\n%\x17%\x17",
                              "t.yml:2: expected a config key"));
}

TEST(RunConfigTest, MissingFile) {
  absl::StatusOr<RunConfig> config = loadRunConfig("/nonexistent/x.yml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("/nonexistent/x.yml"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Command-line overrides
//===----------------------------------------------------------------------===//

TEST(RunConfigTest, Overrides) {
  RunConfig c = load(kConfigsDir + "/dit_tiny.yml");
  ASSERT_TRUE(applyOverride(c, "per_device_batch_size=0.25").ok());
  EXPECT_EQ(c.perDeviceBatchSize, 0.25);
  EXPECT_EQ(c.originOf("per_device_batch_size"), "command line");
  ASSERT_TRUE(applyOverride(c, "learning_rate=1.e-3").ok());
  EXPECT_EQ(c.learningRate, 1e-3);
  ASSERT_TRUE(applyOverride(c, "names_which_can_be_saved=[a,b]").ok());
  EXPECT_EQ(c.namesSaved, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(applyOverride(c, "names_which_can_be_offloaded=x,y").ok());
  EXPECT_EQ(c.namesOffloaded, (std::vector<std::string>{"x", "y"}));
  ASSERT_TRUE(applyOverride(c, "flash_block_sizes={\"block_q\":1024}").ok());
  ASSERT_TRUE(c.flashBlockSizes.has_value());
  EXPECT_EQ(c.flashBlockSizes->blockQ, 1024);
  EXPECT_EQ(c.flashBlockSizes->blockQDkv, 1024);
  EXPECT_EQ(c.flashBlockSizes->blockKv, 512);
  ASSERT_TRUE(applyOverride(c, "flash_block_sizes='{\"block_kv\": 256}'").ok());
  EXPECT_EQ(c.flashBlockSizes->blockQ, 512);
  EXPECT_EQ(c.flashBlockSizes->blockKvDq, 256);
  ASSERT_TRUE(applyOverride(c, "run_name='x y'").ok());
  EXPECT_EQ(c.runName, "x y");
  ASSERT_TRUE(applyOverride(c, "output_dir=").ok());
  EXPECT_EQ(c.outputDir, "");
  ASSERT_TRUE(
      applyOverride(c, "opt_enable_grad_global_norm_clipping=False").ok());
  EXPECT_EQ(c.gradNormClipping, false);
  ASSERT_TRUE(applyOverride(c, "remat_policy=FULL").ok());
  EXPECT_EQ(c.rematPolicy, "FULL");
  ASSERT_TRUE(
      applyOverride(c, "logical_axis_rules=[[batch, data], [embed, fsdp]]")
          .ok());
  EXPECT_EQ(c.rules->rules, (std::vector<LogicalAxisRule>{
                                {"batch", {"data"}}, {"embed", {"fsdp"}}}));
  // MaxDiffusion's keys that sd does not use are collected, once.
  ASSERT_TRUE(applyOverride(c, "dataset_name=foo").ok());
  ASSERT_TRUE(applyOverride(c, "dataset_name=bar").ok());
  EXPECT_EQ(c.ignoredKeys, std::vector<std::string>{"dataset_name"});
}

TEST(RunConfigTest, OverrideErrors) {
  RunConfig c;
  EXPECT_TRUE(failsWith(applyOverride(c, "novalue"),
                        "command line: override 'novalue' is not key=value"));
  EXPECT_TRUE(failsWith(applyOverride(c, "=3"), "is not key=value"));
  EXPECT_TRUE(failsWith(applyOverride(c, "learning_rate=abc"),
                        "command line: learning_rate: 'abc' is not a number"));
  EXPECT_TRUE(failsWith(applyOverride(c, "seed=[1"), "command line: "));
  EXPECT_TRUE(failsWith(applyOverride(c, "max_train_steps="),
                        "command line: max_train_steps: expected an integer, "
                        "got null"));
  EXPECT_TRUE(failsWith(applyOverride(c, "logical_axis_rules=[[batch]]"),
                        "command line: rule must be [logical_name, "
                        "mesh_axes]"));
  EXPECT_TRUE(failsWith(applyOverride(c, "flash_block_sizes={\"block_z\":1}"),
                        "command line: flash_block_sizes: unknown field"));
  // Nothing was set by the failed overrides.
  EXPECT_FALSE(c.learningRate.has_value());
  EXPECT_FALSE(c.rules.has_value());
}

TEST(RunConfigTest, OverridesCheckFillAxesAfterAll) {
  // base_xl.yml fills data; moving the fill to fsdp takes two overrides, and
  // only the state after both is checked.
  RunConfig c = load(kMaxDiffusionDir + "/base_xl.yml");
  EXPECT_TRUE(
      applyOverrides(c, {"pretrained_model_name_or_path=''",
                         "ici_fsdp_parallelism=-1", "ici_data_parallelism=1"})
          .ok());
  EXPECT_EQ(c.iciMeshString(), "data:1,fsdp:-1,context:1,tensor:1");
  EXPECT_TRUE(failsWith(
      applyOverrides(c, {"ici_tensor_parallelism=-1"}),
      "command line: ici_tensor_parallelism: only one ICI axis may be -1, but "
      "ici_fsdp_parallelism is -1 too (command line)"));
}

} // namespace
