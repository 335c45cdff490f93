//===- RunSpecTest.cpp - Tests for the run specification resolver ---------===//

#include "sd/Config/RunSpec.h"

#include "gtest/gtest.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <fstream>
#include <string>

using namespace sd;

namespace {

const std::string kConfigsDir = SD_CONFIGS_DIR;
const std::string kDitTiny = kConfigsDir + "/dit_tiny.yml";

HostInfo host(int64_t cores = 8) {
  HostInfo info;
  info.cores = cores;
  info.startTime = "20261122-110512";
  return info;
}

RunSpec resolve(const RunSpecFlags &flags, const HostInfo &info = host()) {
  absl::StatusOr<RunSpec> spec = resolveRunSpec(flags, info);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : RunSpec();
}

/// The message of the error resolving `flags`, or "" when it resolves.
std::string errorOf(const RunSpecFlags &flags, const HostInfo &info = host()) {
  absl::StatusOr<RunSpec> spec = resolveRunSpec(flags, info);
  if (spec.ok())
    return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

/// A config file in the test's temporary directory.
std::string writeConfig(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

RunSpecFlags withConfig(const std::string &path,
                        std::vector<std::string> overrides = {}) {
  RunSpecFlags flags;
  flags.config = path;
  flags.overrides = std::move(overrides);
  return flags;
}

LogicalAxisRules preset(std::string_view name) {
  absl::StatusOr<LogicalAxisRules> rules = presetRules(name);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *rules : LogicalAxisRules();
}

TEST(RunSpecTest, DefaultsWithoutFlagsOrConfig) {
  RunSpec spec = resolve(RunSpecFlags());
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:1");
  EXPECT_EQ(spec.mesh.ici, "");
  EXPECT_EQ(spec.mesh.origin, "default");
  EXPECT_EQ(spec.rules.value, preset("dit"));
  EXPECT_EQ(spec.rules.source, SettingSource::Default);
  EXPECT_EQ(spec.batch.global.value, 0);
  EXPECT_EQ(spec.batch.gradAccum.value, 1);
  EXPECT_EQ(spec.remat.policy.value, RematPolicyKind::None);
  EXPECT_EQ(spec.optimizer.learningRate.value, 1e-4);
  EXPECT_EQ(spec.optimizer.adamB1.value, 0.9);
  EXPECT_EQ(spec.optimizer.adamB2.value, 0.999);
  EXPECT_EQ(spec.optimizer.adamEps.value, 1e-8);
  EXPECT_EQ(spec.optimizer.weightDecay.value, 1e-2);
  EXPECT_EQ(spec.optimizer.maxGradNorm.value, 0.0);
  EXPECT_EQ(spec.optimizer.warmupSteps.value, 0);
  EXPECT_EQ(spec.run.steps.value, 10);
  EXPECT_EQ(spec.run.steps.origin, "default");
  EXPECT_EQ(spec.run.traceSteps.value, 10);
  EXPECT_EQ(spec.run.deviceMemoryBudget, 0);
  EXPECT_TRUE(spec.notes.empty());
  EXPECT_TRUE(spec.warnings.empty());
}

TEST(RunSpecTest, ConfigValuesAndTheirLines) {
  RunSpec spec = resolve(withConfig(kDitTiny));
  EXPECT_EQ(spec.configFile, kDitTiny);
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:2");
  EXPECT_EQ(spec.mesh.origin, "dit_tiny.yml:10");
  EXPECT_EQ(spec.batch.perDevice.value, 2.0);
  EXPECT_EQ(spec.batch.global.value, 4);
  EXPECT_EQ(spec.optimizer.learningRate.value, 1e-3);
  EXPECT_EQ(spec.optimizer.learningRate.origin, "dit_tiny.yml:19");
  EXPECT_EQ(spec.optimizer.learningRate.source, SettingSource::Config);
  // warmup_steps_fraction 0.1 × 20 steps.
  EXPECT_EQ(spec.optimizer.warmupSteps.value, 2);
  EXPECT_EQ(spec.optimizer.warmupSteps.origin, "dit_tiny.yml:20");
  EXPECT_EQ(spec.run.runDir, "runs/dit_tiny");
  EXPECT_EQ(spec.rules.source, SettingSource::Config);
  EXPECT_EQ(spec.rules.origin, "dit_tiny.yml:37");
  EXPECT_EQ(spec.rules.value.rules.size(), 12u);
}

TEST(RunSpecTest, FlagBeatsOverrideBeatsFile) {
  RunSpecFlags flags =
      withConfig(kDitTiny, {"learning_rate=1.e-2", "adam_b1=0.7"});
  flags.learningRate = 0.5;
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.optimizer.learningRate.value, 0.5);
  EXPECT_EQ(spec.optimizer.learningRate.origin, "--lr");
  EXPECT_EQ(spec.optimizer.learningRate.source, SettingSource::Flag);
  EXPECT_EQ(spec.optimizer.adamB1.value, 0.7);
  EXPECT_EQ(spec.optimizer.adamB1.origin, "command line");
  EXPECT_EQ(spec.optimizer.adamB2.origin, "dit_tiny.yml:22");
  EXPECT_EQ(spec.run.seed.origin, "dit_tiny.yml:28");
}

TEST(RunSpecTest, StepsFlagScalesTheWarmupFraction) {
  RunSpecFlags flags = withConfig(kDitTiny);
  flags.steps = 40;
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.run.steps.origin, "--steps");
  EXPECT_EQ(spec.optimizer.warmupSteps.value, 4);
  flags.warmupSteps = 7;
  EXPECT_EQ(resolve(flags).optimizer.warmupSteps.value, 7);
  EXPECT_EQ(resolve(flags).optimizer.warmupSteps.origin, "--warmup-steps");
}

TEST(RunSpecTest, DisabledClippingIsANote) {
  RunSpec spec = resolve(
      withConfig(kDitTiny, {"opt_enable_grad_global_norm_clipping=false"}));
  EXPECT_EQ(spec.optimizer.maxGradNorm.value, 0.0);
  ASSERT_FALSE(spec.notes.empty());
  EXPECT_EQ(spec.notes.front(), "max_grad_norm: not applied, since "
                                "opt_enable_grad_global_norm_clipping is "
                                "false");
}

TEST(RunSpecTest, FlagValuesAreCheckedLikeConfigValues) {
  auto flagError = [](auto field, auto value) {
    RunSpecFlags flags;
    flags.*field = value;
    return errorOf(flags);
  };
  EXPECT_EQ(flagError(&RunSpecFlags::learningRate, std::nan("")),
            "--lr must be a finite number, not nan");
  EXPECT_EQ(flagError(&RunSpecFlags::learningRate, -1.0),
            "--lr must not be negative, not -1");
  EXPECT_EQ(flagError(&RunSpecFlags::adamB1, 5.0),
            "--adam-b1 must be in [0, 1), not 5");
  EXPECT_EQ(flagError(&RunSpecFlags::adamB2, 1.0),
            "--adam-b2 must be in [0, 1), not 1");
  EXPECT_EQ(flagError(&RunSpecFlags::adamEps, 0.0),
            "--adam-eps must be positive, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::weightDecay, -0.5),
            "--adam-weight-decay must not be negative, not -0.5");
  EXPECT_EQ(flagError(&RunSpecFlags::maxGradNorm, -1.0),
            "--max-grad-norm must not be negative, not -1");
  EXPECT_EQ(flagError(&RunSpecFlags::warmupSteps, int64_t(-10)),
            "--warmup-steps must not be negative, not -10");
  EXPECT_EQ(flagError(&RunSpecFlags::perDeviceBatch, 0.0),
            "--per-device-batch must be positive, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::steps, int64_t(0)),
            "--steps must be at least 1, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::checkpointEvery, int64_t(-5)),
            "--checkpoint-every must be -1, 0 or at least 1, not -5");
  EXPECT_EQ(flagError(&RunSpecFlags::traceSkipSteps, int64_t(-1)),
            "--trace-skip-steps must not be negative, not -1");
  EXPECT_EQ(flagError(&RunSpecFlags::traceSteps, int64_t(0)),
            "--trace-steps must be at least 1, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::threadsPerDevice, int64_t(-1)),
            "--threads-per-device must not be negative, not -1");
  EXPECT_EQ(flagError(&RunSpecFlags::batch, int64_t(-3)),
            "--batch must be positive, not -3");
  EXPECT_EQ(flagError(&RunSpecFlags::gradAccum, int64_t(0)),
            "--grad-accum must be at least 1, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::devices, int64_t(0)),
            "--devices must be positive, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::collectiveTimeout, 0.0),
            "--collective-timeout must be positive, not 0");
  EXPECT_EQ(flagError(&RunSpecFlags::collectiveTimeout, std::nan("")),
            "--collective-timeout must be positive, not nan");
}

TEST(RunSpecTest, CollectiveTimeoutIsARunSetting) {
  RunSpecFlags flags;
  EXPECT_FALSE(resolve(flags).run.collectiveTimeout.has_value());
  flags.collectiveTimeout = 5.0;
  EXPECT_EQ(resolve(flags).run.collectiveTimeout, 5.0);
}

TEST(RunSpecTest, ProcessesMustMatchTheMesh) {
  RunSpecFlags flags;
  flags.processes = 2;
  flags.processesFromMpi = true;
  // Without a mesh the run is one device in one process.
  EXPECT_EQ(errorOf(flags),
            "no mesh is given, which runs one device in one process, but "
            "mpirun started 2 (give the mesh with --mesh and --dcn-mesh, or "
            "the config's ici_* and dcn_* keys)");
  flags.processesFromMpi = false;
  EXPECT_NE(errorOf(flags).find("but --processes=2 "), std::string::npos);
  // A parsed mesh is checked by parseMesh.
  flags.processesFromMpi = true;
  flags.mesh = "data:2";
  EXPECT_EQ(errorOf(flags),
            "an empty dcn mesh has 1 process but mpirun started 2");
  flags.dcnMesh = "data:2";
  EXPECT_EQ(resolve(flags).mesh.mesh.numProcesses(), 2);
  // One process without a mesh is fine.
  RunSpecFlags one;
  one.processes = 1;
  one.processesFromMpi = true;
  EXPECT_EQ(resolve(one).mesh.mesh.numProcesses(), 1);
}

TEST(RunSpecTest, FlashMinSeqLengthFromFlagOrConfig) {
  // MaxDiffusion's Wan config sets 4096; sd's default is 0 (tile all).
  EXPECT_EQ(resolve(RunSpecFlags()).model.flashMinSeqLength.value, 0);
  std::string wan = writeConfig(
      "minseq.yml", "attention: flash\nflash_min_seq_length: 4096\n");
  RunSpec spec = resolve(withConfig(wan));
  EXPECT_EQ(spec.model.flashMinSeqLength.value, 4096);
  EXPECT_EQ(spec.model.flashMinSeqLength.source, SettingSource::Config);
  RunSpecFlags flags = withConfig(wan);
  flags.flashMinSeqLength = 0;
  EXPECT_EQ(resolve(flags).model.flashMinSeqLength.value, 0);
  flags.flashMinSeqLength = -1;
  EXPECT_EQ(errorOf(flags),
            "--flash-min-seq-length must not be negative, not -1");
  std::string negative =
      writeConfig("minseq-negative.yml", "flash_min_seq_length: -2\n");
  EXPECT_NE(errorOf(withConfig(negative))
                .find("minseq-negative.yml:1: flash_min_seq_length: '-2' "
                      "must not be negative"),
            std::string::npos)
      << errorOf(withConfig(negative));
  // With dot_product it changes nothing, and a note says so.
  std::string dot = writeConfig(
      "minseq-dot.yml", "attention: dot_product\nflash_min_seq_length: 64\n");
  std::vector<std::string> notes = resolve(withConfig(dot)).notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "flash_min_seq_length: 64 (unused: attention is "
                      "dot_product)"),
            notes.end());
}

TEST(RunSpecTest, UlyssesShardsGoWithTheHybridAttention) {
  // The config keys as MaxDiffusion spells them; -1 is its "unset".
  std::string hybrid = writeConfig(
      "hybrid.yml", "attention: ulysses_ring\nulysses_shards: 2\n");
  RunSpec spec = resolve(withConfig(hybrid));
  EXPECT_EQ(spec.model.attention.value, AttentionKind::UlyssesRing);
  ASSERT_TRUE(spec.model.ulyssesShards);
  EXPECT_EQ(spec.model.ulyssesShards->value, 2);
  // Settings name their origin by the config's file name.
  EXPECT_EQ(spec.model.ulyssesShards->origin, "hybrid.yml:2");
  // The flag beats the file.
  RunSpecFlags flags = withConfig(hybrid);
  flags.ulyssesShards = 4;
  EXPECT_EQ(resolve(flags).model.ulyssesShards->value, 4);

  std::string unset = writeConfig(
      "unset.yml", "attention: ulysses_ring\nulysses_shards: -1\n");
  EXPECT_EQ(errorOf(withConfig(unset)),
            "unset.yml:1: attention ulysses_ring needs ulysses_shards "
            "(--ulysses-shards), the devices per Ulysses group");
  // A config may keep the key for another attention: a note, not an error.
  std::string flash =
      writeConfig("flash.yml", "attention: flash\nulysses_shards: 2\n");
  RunSpec flashSpec = resolve(withConfig(flash));
  EXPECT_FALSE(flashSpec.model.ulyssesShards);
  ASSERT_FALSE(flashSpec.notes.empty());
  EXPECT_EQ(flashSpec.notes.back(),
            "ulysses_shards: 2 (unused: attention is flash)");
  std::string zero = writeConfig("zero.yml", "ulysses_shards: 0\n");
  EXPECT_EQ(errorOf(withConfig(zero)),
            zero + ":1: ulysses_shards: '0' must be -1 or at least 1");
  // The flag must fit the attention, and be at least 1.
  RunSpecFlags ring;
  ring.attention = "ring";
  ring.ulyssesShards = 2;
  EXPECT_EQ(errorOf(ring), "--ulysses-shards: ulysses_shards 2 is for "
                           "attention ulysses_ring (or auto), not ring");
  RunSpecFlags none;
  none.attention = "ulysses_ring";
  none.ulyssesShards = 0;
  EXPECT_EQ(errorOf(none), "--ulysses-shards must be at least 1, not 0");
}

TEST(RunSpecTest, TheSameValueInAConfigIsAnError) {
  // What --adam-b1=5 is on the command line, adam_b1: 5 is in a file.
  std::string path = writeConfig("b1.yml", "adam_b1: 5\n");
  EXPECT_EQ(errorOf(withConfig(path)), path + ":1: adam_b1: '5' must be in "
                                              "[0, 1)");
}

TEST(RunSpecTest, MemoryBudgets) {
  RunSpecFlags flags;
  flags.deviceMemory = "512MiB";
  flags.hostMemory = "2GB";
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.run.deviceMemoryBudget, int64_t(512) << 20);
  EXPECT_GT(spec.run.hostMemoryBudget, 0);
  flags.deviceMemory = "lots";
  EXPECT_EQ(errorOf(flags),
            "--device-memory='lots' is not a size (e.g. 512MiB, 2GB)");
  // Less than a byte is not "unlimited".
  flags.deviceMemory = "0.5";
  EXPECT_EQ(errorOf(flags), "--device-memory='0.5' must be at least 1 byte "
                            "(leave it out for no limit)");
  flags.deviceMemory.reset();
  flags.hostMemory = "0.25";
  EXPECT_EQ(errorOf(flags), "--host-memory='0.25' must be at least 1 byte "
                            "(leave it out for no limit)");
}

TEST(RunSpecTest, BatchFromPerDeviceBatch) {
  RunSpecFlags flags;
  flags.mesh = "data:4";
  flags.perDeviceBatch = 0.5;
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.batch.global.value, 2);
  EXPECT_EQ(spec.batch.global.origin, "--per-device-batch");
  flags.perDeviceBatch = 0.3;
  EXPECT_EQ(errorOf(flags), "--per-device-batch=0.3 × 4 devices = 1.2 is not "
                            "a whole, positive global batch");
  flags.batch = 8;
  EXPECT_EQ(errorOf(flags), "give --batch or --per-device-batch, not both");
  EXPECT_EQ(errorOf(withConfig(kDitTiny, {"per_device_batch_size=0.25"})),
            "per_device_batch_size=0.25 × 2 devices = 0.5 is not a whole, "
            "positive global batch");
}

TEST(RunSpecTest, GradientAccumulation) {
  RunSpecFlags flags;
  flags.gradAccum = 2;
  // Without a batch, a microbatch is the model's default batch.
  EXPECT_EQ(resolve(flags).batch.global.value, 0);
  flags.batch = 8;
  EXPECT_EQ(resolve(flags).batch.gradAccum.value, 2);
  flags.gradAccum = 3;
  EXPECT_EQ(errorOf(flags), "global batch 8 (--batch) does not split into 3 "
                            "microbatches (--grad-accum)");
  // per_device_batch_size is a microbatch's: the global batch is per device
  // × devices × microbatches (MaxText's).
  RunSpec spec = resolve(withConfig(
      kDitTiny, {"per_device_batch_size=2", "gradient_accumulation_steps=4"}));
  EXPECT_EQ(spec.batch.global.value, 2 * 2 * 4);
  EXPECT_EQ(spec.batch.gradAccum.value, 4);
  EXPECT_EQ(spec.batch.gradAccum.origin, "command line");
  EXPECT_EQ(errorOf(withConfig(kDitTiny, {"gradient_accumulation_steps=0"})),
            "command line: gradient_accumulation_steps: '0' must be at least "
            "1");
}

TEST(RunSpecTest, TimestepBias) {
  // MaxDiffusion's mapping, every field with the key's line as its origin.
  std::string path = writeConfig(
      "bias.yml", "seed: 1\ntimestep_bias: {strategy: later, multiplier: 2.0, "
                  "begin: 0, end: 1000, portion: 0.5}\n");
  RunSpec spec = resolve(withConfig(path));
  EXPECT_EQ(spec.data.timestepBiasStrategy.value, "later");
  EXPECT_EQ(spec.data.timestepBiasStrategy.origin, "bias.yml:2");
  EXPECT_EQ(spec.data.timestepBiasMultiplier.value, 2.0);
  EXPECT_EQ(spec.data.timestepBiasPortion.value, 0.5);
  // A flag beats the file's field.
  RunSpecFlags flags = withConfig(path);
  flags.timestepBiasMultiplier = 3.0;
  EXPECT_EQ(resolve(flags).data.timestepBiasMultiplier.value, 3.0);
  EXPECT_EQ(resolve(flags).data.timestepBiasMultiplier.origin,
            "--timestep-bias-multiplier");
  // Defaults: none.
  EXPECT_EQ(resolve(RunSpecFlags()).data.timestepBiasStrategy.value, "none");

  // Each field checked as it is read, naming the key and its line.
  const std::pair<const char *, const char *> bad[] = {
      {"{strategy: late}", "timestep_bias: strategy: unknown strategy 'late'; "
                           "expected one of none, earlier, later, range"},
      {"{multiplier: 0}", "timestep_bias: multiplier: '0' must be positive"},
      {"{portion: 0}", "timestep_bias: portion: '0' must be in (0, 1]"},
      {"{end: 1001}", "timestep_bias: end: '1001' must be in [0, 1000]"},
      {"{begin: x}", "timestep_bias: begin: 'x' is not an integer"},
      {"{start: 1}", "timestep_bias: unknown field 'start'; expected "
                     "strategy, multiplier, begin, end or portion"},
      {"[later]", "timestep_bias: expected a mapping, got a list"},
  };
  for (const auto &[value, message] : bad) {
    std::string file = writeConfig(
        "bad_bias.yml", std::string("seed: 1\ntimestep_bias: ") + value + "\n");
    EXPECT_EQ(errorOf(withConfig(file)), file + ":2: " + message) << value;
  }
  // The combination: an empty range, and another sampling.
  RunSpecFlags range;
  range.timestepBiasStrategy = "range";
  range.timestepBiasBegin = 500;
  range.timestepBiasEnd = 500;
  EXPECT_EQ(errorOf(range), "--timestep-bias-begin: timestep_bias range "
                            "[500, 500) is empty: begin must be below end");
  RunSpecFlags both;
  both.timestepBiasStrategy = "later";
  both.timestepSampling = "logit_normal";
  EXPECT_EQ(errorOf(both),
            "--timestep-bias-strategy: timestep_bias strategy later biases "
            "uniform timesteps, and timestep_sampling logit_normal "
            "(--timestep-sampling) draws its own: give one of them");
  RunSpecFlags name;
  name.timestepBiasStrategy = "sooner";
  EXPECT_EQ(errorOf(name),
            "--timestep-bias-strategy: unknown timestep bias strategy "
            "'sooner'; expected none, earlier, later or range");
}

TEST(RunSpecTest, FillsAConfigsMinusOneAxisWithTheCores) {
  RunSpec spec =
      resolve(withConfig(kDitTiny, {"ici_data_parallelism=-1"}), host(4));
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:4");
  EXPECT_EQ(spec.mesh.devices, 4);
  ASSERT_FALSE(spec.notes.empty());
  EXPECT_EQ(spec.notes.front(),
            "mesh: the -1 axis is filled with 4 devices (one per core; "
            "--devices=N sets another count)");
  // --devices gives the count; then there is no note.
  RunSpecFlags flags = withConfig(kDitTiny, {"ici_data_parallelism=-1"});
  flags.devices = 2;
  spec = resolve(flags, host(4));
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:2");
  EXPECT_TRUE(spec.notes.empty() ||
              spec.notes.front().rfind("mesh:", 0) == std::string::npos);
}

TEST(RunSpecTest, FillsAFlagMeshFromDevices) {
  RunSpecFlags flags;
  flags.mesh = "data:2,fsdp:-1";
  flags.devices = 8;
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:2,fsdp:4");
  EXPECT_EQ(spec.mesh.origin, "--mesh");
  EXPECT_TRUE(spec.notes.empty());
  // Without --devices the -1 is filled with the cores, as a config's is.
  flags.devices.reset();
  spec = resolve(flags, host(4));
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:2,fsdp:2");
  EXPECT_EQ(spec.mesh.devices, 4);
  ASSERT_EQ(spec.notes.size(), 1u);
  EXPECT_EQ(spec.notes.front(),
            "mesh: the -1 axis is filled with 4 devices (one per core; "
            "--devices=N sets another count)");
  flags.mesh = "data:-1";
  EXPECT_EQ(resolve(flags, host(3)).mesh.mesh.toString(), "data:3");
  flags.mesh = "data:2,fsdp:-1";
  EXPECT_EQ(errorOf(flags, host(3)),
            "cannot fill mesh axis \"fsdp\": 3 devices are not divisible by 2 "
            "(the product of the other axes)");
  flags.mesh = "data:2";
  flags.devices = 4;
  EXPECT_EQ(errorOf(flags), "mesh data:2 has 2 devices but --devices=4");
}

TEST(RunSpecTest, AnEmptyMeshIsAnError) {
  RunSpecFlags flags;
  flags.mesh = "";
  EXPECT_EQ(errorOf(flags), "--mesh is empty: give the mesh's axes, e.g. "
                            "--mesh=data:2 (leave --mesh out for one device)");
  flags.mesh = " ";
  EXPECT_NE(errorOf(flags), "");
  // Also over a config's mesh.
  flags = withConfig(kDitTiny);
  flags.mesh = "";
  EXPECT_NE(errorOf(flags), "");
  flags = RunSpecFlags();
  flags.mesh = "data:2";
  flags.dcnMesh = "";
  EXPECT_EQ(errorOf(flags), "--dcn-mesh is empty: give the axes across "
                            "processes, e.g. --dcn-mesh=data:2 (leave "
                            "--dcn-mesh out for one process)");
  // A DCN part alone would have run one device.
  flags = RunSpecFlags();
  flags.dcnMesh = "data:2";
  EXPECT_EQ(errorOf(flags),
            "--dcn-mesh=data:2 needs --mesh, the axes within a process (e.g. "
            "--mesh=data:1 for one device a process)");
}

TEST(RunSpecTest, DcnMeshKeepsOneProcess) {
  RunSpec spec = resolve(withConfig(
      kDitTiny, {"dcn_data_parallelism=-1", "ici_fsdp_parallelism=2"}));
  EXPECT_EQ(spec.mesh.ici, "data:2,fsdp:2");
  EXPECT_EQ(spec.mesh.dcn, "data:-1,fsdp:1");
  EXPECT_EQ(spec.mesh.processes, 1);
  EXPECT_EQ(spec.mesh.mesh.numDevices(), 4);
}

TEST(RunSpecTest, RulesAreAnObject) {
  RunSpecFlags flags;
  flags.rules = "wan";
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.rules.value, preset("wan"));
  EXPECT_EQ(spec.rules.origin, "--rules");
  flags.rules = "nope";
  EXPECT_NE(errorOf(flags).find("nope"), std::string::npos);
  // A flag beats the config's rules.
  flags = withConfig(kDitTiny);
  flags.rules = "sdxl";
  EXPECT_EQ(resolve(flags).rules.value, preset("sdxl"));
  // Rules a key=value argument gave.
  spec = resolve(withConfig(
      kDitTiny, {"logical_axis_rules=[['batch', 'data'], ['embed', null]]"}));
  ASSERT_EQ(spec.rules.value.rules.size(), 2u);
  EXPECT_EQ(spec.rules.value.rules[0],
            (LogicalAxisRule{"batch", {std::string("data")}}));
  EXPECT_TRUE(spec.rules.value.rules[1].meshAxes.empty());
  EXPECT_EQ(spec.rules.origin, "logical_axis_rules=...");
}

TEST(RunSpecTest, RematPolicyIsAnEnum) {
  RunSpecFlags flags;
  flags.remat = "offload_matmul_without_batch";
  EXPECT_EQ(resolve(flags).remat.policy.value,
            RematPolicyKind::OffloadMatmulWithoutBatch);
  flags.remat = "BOGUS";
  EXPECT_EQ(errorOf(flags),
            "unknown remat policy 'BOGUS'; expected one of NONE, FULL, "
            "MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
            "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM");
  // Names belong to CUSTOM.
  flags.remat = "FULL";
  flags.namesSaved = std::vector<std::string>{"attn_output"};
  EXPECT_EQ(errorOf(flags),
            "names_which_can_be_saved / names_which_can_be_offloaded only "
            "apply to remat policy CUSTOM, not FULL");
  flags.remat = "CUSTOM";
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.remat.policy.value, RematPolicyKind::Custom);
  EXPECT_EQ(spec.remat.namesSaved.value,
            std::vector<std::string>{"attn_output"});
  EXPECT_EQ(spec.remat.namesSaved.origin, "--names-saved");
  EXPECT_TRUE(spec.remat.namesOffloaded.value.empty());
}

TEST(RunSpecTest, DtypesAreAppliedFromFlagOrConfig) {
  // The defaults: float32 throughout.
  RunSpec plain = resolve(RunSpecFlags());
  EXPECT_EQ(plain.model.weightsDtype.value, DType::Float32);
  EXPECT_EQ(plain.model.activationsDtype.value, DType::Float32);
  EXPECT_EQ(plain.model.gradReduceDtype.value, DType::Float32);
  EXPECT_TRUE(plain.notes.empty());
  // A config's MaxDiffusion spelling, a flag's short one; the flag wins.
  std::string path = writeConfig("dtypes.yml", "weights_dtype: 'bfloat16'\n"
                                               "activations_dtype: bfloat16\n"
                                               "grad_reduce_dtype: bfloat16\n");
  RunSpecFlags flags = withConfig(path);
  flags.gradReduceDtype = "f32";
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.model.weightsDtype.value, DType::BFloat16);
  EXPECT_EQ(spec.model.weightsDtype.origin, "dtypes.yml:1");
  EXPECT_EQ(spec.model.activationsDtype.value, DType::BFloat16);
  EXPECT_EQ(spec.model.gradReduceDtype.value, DType::Float32);
  EXPECT_EQ(spec.model.gradReduceDtype.origin, "--grad-reduce-dtype");
  // Applied: no note says otherwise.
  EXPECT_TRUE(spec.notes.empty());
  RunSpecFlags bad;
  bad.activationsDtype = "float16";
  EXPECT_EQ(errorOf(bad), "--activations-dtype: dtype 'float16' is not one "
                          "sd computes in; expected float32 or bfloat16");
}

TEST(RunSpecTest, ConfigNamesCountOnlyForCustom) {
  std::string path = writeConfig(
      "names.yml", "remat_policy: 'FULL'\nnames_which_can_be_saved: [a]\n");
  RunSpec spec = resolve(withConfig(path));
  EXPECT_EQ(spec.remat.policy.value, RematPolicyKind::Full);
  EXPECT_TRUE(spec.remat.namesSaved.value.empty());
  spec = resolve(withConfig(path, {"remat_policy=CUSTOM"}));
  EXPECT_EQ(spec.remat.namesSaved.value, std::vector<std::string>{"a"});
  EXPECT_EQ(spec.remat.namesSaved.origin, "names.yml:2");
  // The file names a setting it leaves out.
  EXPECT_EQ(spec.remat.namesOffloaded.origin, "names.yml");
}

TEST(RunSpecTest, OverridesNeedAConfig) {
  RunSpecFlags flags;
  flags.overrides = {"learning_rate=1"};
  EXPECT_EQ(errorOf(flags),
            "'learning_rate=1': key=value arguments override a config file "
            "(--config=FILE.yml, or FILE.yml after the model)");
}

TEST(RunSpecTest, AConfigFileAmongTheArgumentsIsTheConfig) {
  // MaxDiffusion's `train.py base_xl.yml key=value`.
  RunSpecFlags flags;
  flags.overrides = {kDitTiny, "learning_rate=0.5"};
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.configFile, kDitTiny);
  EXPECT_EQ(spec.optimizer.learningRate.value, 0.5);
  EXPECT_EQ(spec.optimizer.adamB2.origin, "dit_tiny.yml:22");
  // The order does not matter, and .yaml counts too.
  std::string yaml = writeConfig("run.yaml", "seed: 3\n");
  flags.overrides = {"learning_rate=0.5", yaml};
  spec = resolve(flags);
  EXPECT_EQ(spec.configFile, yaml);
  EXPECT_EQ(spec.run.seed.value, 3u);
  EXPECT_TRUE(isConfigFileArgument("a/b.yml"));
  EXPECT_FALSE(isConfigFileArgument("run_name=x.yml"));
  EXPECT_FALSE(isConfigFileArgument("novalue"));
  // One config file.
  flags.overrides = {kDitTiny, yaml};
  EXPECT_EQ(errorOf(flags), "'" + yaml + "': a second config file, after '" +
                                kDitTiny + "'; give one");
  flags = withConfig(kDitTiny, {yaml});
  EXPECT_EQ(errorOf(flags), "'" + yaml +
                                "': a second config file, after --config='" +
                                kDitTiny + "'; give one");
  // sdsample takes the file, not key=value.
  flags = RunSpecFlags();
  flags.takesOverrides = false;
  flags.overrides = {kDitTiny};
  EXPECT_EQ(resolve(flags).configFile, kDitTiny);
  flags.overrides = {kDitTiny, "guidance_scale=2"};
  EXPECT_EQ(errorOf(flags),
            "'guidance_scale=2': only sdrun takes key=value arguments; set the "
            "key in the config file, or give its flag");
}

TEST(RunSpecTest, IgnoredKeysAreOneWarningPerOrigin) {
  std::string path =
      writeConfig("extra.yml", "jax_cache_dir: 1\ndataset_name: 2\n");
  RunSpec spec = resolve(withConfig(path, {"hf_access_token=3"}));
  ASSERT_EQ(spec.warnings.size(), 2u);
  EXPECT_EQ(spec.warnings[0], "extra.yml: ignoring 2 keys sd does not use: "
                              "jax_cache_dir, dataset_name");
  EXPECT_EQ(spec.warnings[1],
            "command line: ignoring 1 key sd does not use: hf_access_token");
}

TEST(RunSpecTest, UnknownKeysAreErrors) {
  EXPECT_EQ(errorOf(withConfig(kDitTiny, {"max_train_step=3"})),
            "command line: unknown key 'max_train_step'; did you mean "
            "'max_train_steps'?");
  std::string path = writeConfig("typo.yml", "seed: 1\nmax_train_step: 3\n");
  EXPECT_EQ(errorOf(withConfig(path)),
            path + ":2: unknown key 'max_train_step'; did you mean "
                   "'max_train_steps'?");
}

TEST(RunSpecTest, MaxDiffusionConfigsNameHubIdsToDownloadFirst) {
  std::string baseXl = std::string(SD_TEST_MAXDIFFUSION_DIR) + "/base_xl.yml";
  RunSpecFlags flags = withConfig(baseXl);
  flags.devices = 2;
  EXPECT_EQ(errorOf(flags),
            std::string("base_xl.yml:30: pretrained_model_name_or_path ") +
                "'stabilityai/stable-diffusion-xl-base-1.0' is a Hugging Face "
                "hub id; sd reads local folders only (it downloads nothing): "
                "download it first (huggingface-cli download "
                "stabilityai/stable-diffusion-xl-base-1.0 --local-dir DIR) "
                "and give DIR");
  flags.overrides = {"pretrained_model_name_or_path=''"};
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.mesh.mesh.toString(), "data:2");
  EXPECT_EQ(spec.run.pretrained.value, "");
  ASSERT_EQ(spec.warnings.size(), 1u);
  EXPECT_EQ(spec.warnings[0].rfind("base_xl.yml: ignoring ", 0), 0u);
}

TEST(RunSpecTest, PretrainedFolders) {
  // A local folder is the setting's value, with its origin.
  std::string dir = ::testing::TempDir() + "sd_pretrained_folder";
  ASSERT_FALSE(llvm::sys::fs::create_directories(dir));
  RunSpecFlags flags = withConfig(writeConfig("seed.yml", "seed: 1\n"),
                                  {"pretrained_model_name_or_path=" + dir});
  RunSpec spec = resolve(flags);
  EXPECT_EQ(spec.run.pretrained.value, dir);
  EXPECT_EQ(spec.run.pretrained.origin, "command line");
  flags = RunSpecFlags();
  flags.pretrained = dir;
  EXPECT_EQ(resolve(flags).run.pretrained.origin, "--pretrained");
  // It starts a run: not with --init-from's weights, not with --resume.
  flags.initFrom = "w.safetensors";
  EXPECT_EQ(errorOf(flags),
            "--pretrained: pretrained_model_name_or_path '" + dir +
                "' and --init-from both give the starting weights; give one "
                "(pretrained_model_name_or_path='' keeps --init-from's)");
  flags.initFrom.reset();
  flags.resume = true;
  flags.checkpointDir = "ckpt";
  EXPECT_EQ(errorOf(flags),
            "--pretrained: pretrained_model_name_or_path '" + dir +
                "' starts a run; --resume continues one from its checkpoint "
                "(pretrained_model_name_or_path='' to resume)");
  flags.resume.reset();
  // --allow-missing applies to its weights too.
  flags.allowMissing = true;
  EXPECT_EQ(resolve(flags).run.allowMissing, true);
  // A path that is not a folder, and one that does not exist.
  flags.pretrained = dir + "/none";
  EXPECT_EQ(errorOf(flags), "--pretrained: pretrained_model_name_or_path '" +
                                dir + "/none' does not exist");
  std::string file = writeConfig("not_a_folder.yml", "seed: 1\n");
  flags.pretrained = file;
  EXPECT_EQ(errorOf(flags),
            "--pretrained: pretrained_model_name_or_path '" + file +
                "' is not a directory (a diffusers model folder; a single "
                "safetensors file goes to --init-from)");
}

TEST(RunSpecTest, RunFlagsThatDoNotGoTogether) {
  // The run's own checks, made before --print-config prints.
  RunSpecFlags flags;
  flags.resume = true;
  EXPECT_EQ(errorOf(flags), "--resume needs --checkpoint-dir");
  flags.checkpointDir = "ckpt";
  EXPECT_EQ(resolve(flags).run.resume, true);
  flags.initFrom = "w.safetensors";
  EXPECT_EQ(errorOf(flags),
            "give --resume or --init-from, not both (a fine-tune with frozen "
            "parameters takes both: --init-from gives the frozen ones)");
  // A fine-tune resumes its trained tensors and reads the frozen ones.
  flags.loraRank = 4;
  EXPECT_EQ(resolve(flags).fineTune.lora.value, true);
  flags.loraRank.reset();
  flags.freeze = std::vector<std::string>{"blocks.0.*"};
  EXPECT_EQ(resolve(flags).run.resume, true);
  // --export-merged needs LoRA, and LoRA excludes freezing patterns.
  flags = RunSpecFlags();
  flags.exportMergedPath = "merged.safetensors";
  EXPECT_EQ(errorOf(flags),
            "--export-merged merges LoRA adapters into their base weights: it "
            "needs LoRA (enable_lora, --lora-rank); --export writes the model");
  flags.loraRank = 4;
  flags.freeze = std::vector<std::string>{"x*"};
  EXPECT_EQ(errorOf(flags),
            "--lora-rank: LoRA trains the adapters alone and freezes every "
            "other parameter; --freeze does not apply with it");
  flags = RunSpecFlags();
  flags.exportEmaPath = "ema.safetensors";
  EXPECT_EQ(errorOf(flags), "--export-ema needs the step to keep EMA weights: "
                            "give ema_decay (--ema-decay)");
  flags.emaDecay = 0.999;
  EXPECT_EQ(resolve(flags).run.exportEmaPath, "ema.safetensors");
  // ema_decay from a config counts.
  flags = withConfig(writeConfig("ema.yml", "ema_decay: 0.9\n"));
  flags.exportEmaPath = "ema.safetensors";
  EXPECT_EQ(resolve(flags).optimizer.emaDecay.value, 0.9);
}

TEST(RunSpecTest, OutputsAndProfiler) {
  std::string path = writeConfig(
      "out.yml",
      "output_dir: 'o'\nenable_profiler: True\ncheckpoint_every: 3\n");
  RunSpec spec = resolve(withConfig(path));
  // run_name defaults to the start time.
  EXPECT_EQ(spec.run.runName.value, "");
  EXPECT_EQ(spec.run.effectiveRunName, "20261122-110512");
  EXPECT_EQ(spec.run.runDir, "o/20261122-110512");
  EXPECT_EQ(spec.run.tracePath.value, "o/20261122-110512/trace.json");
  EXPECT_EQ(spec.run.tracePath.origin, "out.yml:2");
  EXPECT_EQ(spec.notes.back(),
            "checkpoint_every: 3 needs --checkpoint-dir to write checkpoints");
  RunSpecFlags flags = withConfig(path);
  flags.tracePath = "t.json";
  EXPECT_EQ(resolve(flags).run.tracePath.value, "t.json");
}

TEST(RunSpecTest, PrintConfigListsEachSettingWithItsOrigin) {
  RunSpecFlags flags = withConfig(kDitTiny, {"learning_rate=1.e-4"});
  flags.modelPath = "m.mlir";
  flags.adamB1 = 0.8;
  std::string text;
  llvm::raw_string_ostream os(text);
  printRunSpec(resolve(flags), os);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "sdrun settings for m.mlir (" + kDitTiny + "):");
  for (const char *line :
       {"  mesh                             data:2  (dit_tiny.yml:10)\n",
        "  learning_rate                    0.0001  (command line)\n",
        "  warmup_steps                     2 (warmup_steps_fraction 0.1 × 20 "
        "steps)  (dit_tiny.yml:20)\n",
        "  adam_b1                          0.8  (--adam-b1)\n",
        "  logical_axis_rules               12 rules  (dit_tiny.yml:37)\n",
        "  profiler_steps                   10  (default)\n",
        "checkpoint_every: 5 needs --checkpoint-dir to write checkpoints\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "in\n" << text;
}

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

TEST(ParseByteSizeTest, AcceptsBytesAndUnits) {
  EXPECT_EQ(parseByteSize("1048576"), 1048576);
  EXPECT_EQ(parseByteSize("7B"), 7);
  EXPECT_EQ(parseByteSize("4k"), 4 * kKiB);
  EXPECT_EQ(parseByteSize("4KiB"), 4 * kKiB);
  EXPECT_EQ(parseByteSize("4KB"), 4000);
  EXPECT_EQ(parseByteSize("512MiB"), 512 * kMiB);
  EXPECT_EQ(parseByteSize("3m"), 3 * kMiB);
  EXPECT_EQ(parseByteSize("2mb"), 2000000);
  EXPECT_EQ(parseByteSize("1.5G"), 1536 * kMiB);
  EXPECT_EQ(parseByteSize("2gib"), 2048 * kMiB);
  EXPECT_EQ(parseByteSize("2GB"), 2000000000);
  EXPECT_EQ(parseByteSize(".5k"), 512);
  EXPECT_EQ(parseByteSize("  3 MiB \n"), 3 * kMiB);
}

TEST(ParseByteSizeTest, RejectsMalformedAndNonPositiveSizes) {
  for (const char *text :
       {"", "  ", "MiB", ".", "0", "0.0GB", "-1", "-1MiB", "+1", "1.2.3",
        "12XB", "1 0", "1e3", "1 GiB extra", "1TB", "99999999999GB"})
    EXPECT_EQ(parseByteSize(text), std::nullopt) << "'" << text << "'";
}

} // namespace
