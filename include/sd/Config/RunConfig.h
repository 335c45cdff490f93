//===- RunConfig.h - MaxDiffusion-style run configs -------------*- C++ -*-===//
//
// `sdrun --config=FILE.yml` reads a MaxDiffusion config file (base_xl.yml,
// base_wan_14b.yml, ...) and the `key=value` overrides that follow it on the
// command line. This header holds what such a file sets, with MaxDiffusion's
// key names and semantics, and the reader. Keys of MaxDiffusion's configs
// that sd does not use are collected rather than rejected, so MaxDiffusion's
// own files load as they are; a key that neither knows is a typo and an
// error, and a key that changes what is trained in a way sd cannot do yet
// (pretrained_model_name_or_path, enable_lora, ...) is refused by
// verifyRunConfig. MLIR-free: LLVM is used only for its YAML and JSON parsers.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_RUNCONFIG_H
#define SD_CONFIG_RUNCONFIG_H

#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/Mesh.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sd {

/// MaxDiffusion's mesh axes, major to minor; RunConfig::ici and ::dcn are
/// indexed in this order.
inline constexpr std::array<std::string_view, 4> kConfigMeshAxes = {
    "data", "fsdp", "context", "tensor"};

/// The remat_policy values MaxDiffusion accepts.
inline constexpr std::array<std::string_view, 7> kRematPolicies = {
    "NONE",
    "FULL",
    "MATMUL_WITHOUT_BATCH",
    "OFFLOAD_MATMUL_WITHOUT_BATCH",
    "HIDDEN_STATE_WITH_OFFLOAD",
    "FLUX_OPTIMIZED",
    "CUSTOM"};

/// The learning_rate_schedule values (sd's key; MaxDiffusion decays
/// linearly).
inline constexpr std::array<std::string_view, 3> kLrSchedules = {
    "constant", "linear", "cosine"};

/// Splash-attention block sizes (`flash_block_sizes`). A field the config
/// leaves out gets MaxDiffusion's default: 512 for the forward sizes, and
/// the matching forward size for a backward one (block_q_dkv and block_q_dq
/// follow block_q, block_kv_dkv and block_kv_dq follow block_kv,
/// block_kv_dkv_compute follows block_kv_compute).
struct FlashBlockSizes {
  int64_t blockQ = 512;
  int64_t blockKvCompute = 512;
  int64_t blockKv = 512;
  int64_t blockQDkv = 512;
  int64_t blockKvDkv = 512;
  int64_t blockKvDkvCompute = 512;
  int64_t blockQDq = 512;
  int64_t blockKvDq = 512;
  /// When true the dq sizes are unused.
  bool useFusedBwdKernel = false;

  /// JSON with MaxDiffusion's field names, which flash_block_sizes accepts
  /// back: {"block_q": 512, ..., "use_fused_bwd_kernel": false}.
  std::string toString() const;

  bool operator==(const FlashBlockSizes &other) const;
  bool operator!=(const FlashBlockSizes &other) const {
    return !(*this == other);
  }
};

/// The value of a MaxDiffusion key that chooses *what* is trained or
/// loaded: released weights (pretrained_model_name_or_path, unet_checkpoint,
/// ...), LoRA adapters (enable_lora, lora_config), the text encoder
/// (train_text_encoder). sd cannot do
/// what any of them asks yet, so a value other than MaxDiffusion's default
/// (`active`) is an error rather than a key quietly ignored.
struct ModelKeyValue {
  /// The value as messages show it: 'stabilityai/...', True, [a, b].
  std::string shown;
  /// The value asks for something (a non-empty name, true, a LoRA to
  /// load).
  bool active = false;
};

/// MaxDiffusion's `lora_config` mapping, with PEFT's LoraConfig fields for
/// training: `rank` (a number or a one-element list, MaxDiffusion's
/// spelling), `lora_alpha` (or `alpha`), `target_modules` (a list of module
/// names, or one regular expression as a string). MaxDiffusion's fields for
/// loading released adapters (`lora_model_name_or_path`, `weight_name`,
/// `adapter_name`, `scale`, `from_pt`) are read so that a LoRA to load is
/// refused rather than ignored.
struct LoraConfig {
  std::optional<int64_t> rank;
  std::optional<double> alpha;
  std::optional<std::vector<std::string>> targetModules;
  std::optional<std::string> targetRegex;
  /// lora_model_name_or_path: adapters to load.
  std::vector<std::string> load;
};

/// MaxDiffusion's `timestep_bias` mapping (diffusers' --timestep_bias_*
/// flags): `strategy` (none, earlier, later, range), `multiplier` (> 0),
/// `begin` and `end` (the range's timesteps, 0 to 1000) and `portion` (the
/// share of the timesteps earlier or later biases, in (0, 1]). Each field
/// is checked as it is read; their combination when the run is resolved.
struct TimestepBiasConfig {
  std::optional<std::string> strategy;
  std::optional<double> multiplier, portion;
  std::optional<int64_t> begin, end;
};

/// What a config file plus key=value overrides set. Every field is optional:
/// unset means the config did not give the key, and the caller applies its
/// own default. Values are checked as they are read (ranges, enums), so a
/// set field is always valid on its own.
struct RunConfig {
  /// The file read, or "" for a config made only of overrides.
  std::string fileName;

  /// `ici_<axis>_parallelism` / `dcn_<axis>_parallelism`, indexed like
  /// kConfigMeshAxes; each >= 1 or -1 ("fill").
  std::array<std::optional<int64_t>, 4> ici, dcn;
  /// Positive; may be fractional (0.25 on 4 devices is a global batch of 1).
  std::optional<double> perDeviceBatchSize;
  /// One of kRematPolicies.
  std::optional<std::string> rematPolicy;
  /// `names_which_can_be_saved` / `names_which_can_be_offloaded`.
  std::optional<std::vector<std::string>> namesSaved, namesOffloaded;
  /// Defaults filled in as FlashBlockSizes describes.
  std::optional<FlashBlockSizes> flashBlockSizes;
  std::optional<LogicalAxisRules> rules;

  std::optional<double> learningRate;                 ///< >= 0.
  std::optional<double> adamB1, adamB2;               ///< In [0, 1).
  std::optional<double> adamEps;                      ///< > 0.
  std::optional<double> adamWeightDecay, maxGradNorm; ///< >= 0.
  /// `max_grad_value` (>= 0; 0 clips nothing).
  std::optional<double> maxGradValue;
  /// `learning_rate_schedule` (one of kLrSchedules) and
  /// `learning_rate_schedule_steps` (-1: the run's length, or >= 1).
  std::optional<std::string> learningRateSchedule;
  std::optional<int64_t> learningRateScheduleSteps;
  std::optional<double> warmupStepsFraction;          ///< In [0, 1].
  /// DiT's class_dropout_prob, in [0, 1]; ema_decay, in [0, 1).
  std::optional<double> classDropoutProb, emaDecay;
  /// timestep_sampling (uniform, logit_normal, shift), logit_mean,
  /// logit_std (> 0).
  std::optional<std::string> timestepSampling;
  std::optional<double> logitMean, logitStd;
  /// `snr_gamma`: min-SNR-γ loss weighting (positive), -1 or 0 for none.
  std::optional<double> snrGamma;
  /// `resolution` (pixels) and `norm_num_groups`: the UNet a UNet config
  /// (base_2_base.yml, base_xl.yml) trains; sdrun checks them against a
  /// UNet program (> 0).
  std::optional<int64_t> resolution, normNumGroups;
  /// `timestep_bias`: more (or fewer) of the training timesteps in a part
  /// of [0, 1).
  std::optional<TimestepBiasConfig> timestepBias;
  /// diffusers' EMA warm-up: `ema_warmup` (use_ema_warmup), `ema_inv_gamma`
  /// and `ema_power` (> 0).
  std::optional<bool> emaWarmup;
  std::optional<double> emaInvGamma, emaPower;
  /// Fine-tuning: `enable_lora` and `lora_config` (MaxDiffusion's keys),
  /// and sd's `trainable_parameters`, `freeze_parameters` and
  /// `weight_decay_exclude` (glob patterns of parameter names).
  std::optional<bool> enableLora;
  std::optional<LoraConfig> loraConfig;
  std::optional<std::vector<std::string>> trainableParameters, freezeParameters,
      weightDecayExclude;
  /// Sampling (sdsample reads them; sdrun only checks them):
  /// `guidance_scale` (>= 0) and `num_inference_steps` (in [1,
  /// kMaxInferenceSteps]).
  std::optional<double> guidanceScale;
  std::optional<int64_t> numInferenceSteps;
  /// `flow_shift` (> 0), `time_shift`, `base_shift` and `max_shift`: the
  /// flow sampler's time shift.
  std::optional<double> flowShift, baseShift, maxShift;
  std::optional<bool> timeShift;
  /// `opt_enable_grad_global_norm_clipping`.
  std::optional<bool> gradNormClipping;
  std::optional<uint64_t> seed;
  std::optional<int64_t> maxTrainSteps; ///< >= 1.
  /// `gradient_accumulation_steps` (MaxText's): microbatches per optimizer
  /// step, >= 1.
  std::optional<int64_t> gradientAccumulationSteps;
  /// -1 or 0 turn checkpointing off; otherwise >= 1.
  std::optional<int64_t> checkpointEvery;
  /// `enable_profiler`, `skip_first_n_steps_for_profiler` (>= 0) and
  /// `profiler_steps` (>= 1): sdrun's trace of a window of steps.
  std::optional<bool> enableProfiler;
  std::optional<int64_t> skipFirstNStepsForProfiler, profilerSteps;
  /// `ulysses_shards` (>= 1, or -1 for unset as in MaxDiffusion's configs):
  /// devices per Ulysses group of `attention: ulysses_ring`.
  std::optional<int64_t> ulyssesShards;
  /// `flash_min_seq_length` (>= 0): attention whose query is shorter stays
  /// dot_product under a tiled `attention`.
  std::optional<int64_t> flashMinSeqLength;
  /// `eval_every` (-1 or 0: never): steps between held-out losses.
  std::optional<int64_t> evalEvery;
  /// `bucket_cap_mb` (PyTorch DDP's name; in [0, 1048576]): MiB of gradient
  /// reductions that run back to back, 0 for none.
  std::optional<double> bucketCapMb;
  /// Strings as given ('' allowed); the caller interprets the dtypes and
  /// the attention kernel.
  std::optional<std::string> outputDir, runName, pretrained, weightsDtype,
      activationsDtype, gradReduceDtype, attention, datasetType, trainDataDir,
      predictionType;

  /// Keys of MaxDiffusion's configs that sd does not use, in order of first
  /// appearance, each once. The tools name them in a warning for each
  /// origin (the file, the command line).
  std::vector<std::string> ignoredKeys;
  /// The keys that choose what is trained or loaded (ModelKeyValue), in
  /// order of first appearance; a later value replaces an earlier one, so
  /// the override `pretrained_model_name_or_path=''` undoes the file's.
  std::vector<std::pair<std::string, ModelKeyValue>> modelKeys;
  /// Where each key got its value: "FILE:LINE" or "command line". Lets
  /// later checks (batch divisibility, ...) point at the line to fix.
  std::map<std::string, std::string, std::less<>> origins;

  /// "data:2,fsdp:1,context:1,tensor:1" from the ICI sizes (axes not given
  /// are 1, -1 stays -1), in parseMesh's syntax; "" when no ICI key was
  /// given. dcnMeshString() is the same for the DCN sizes.
  std::string iciMeshString() const;
  std::string dcnMeshString() const;
  /// The MaxDiffusion mesh: parseMesh over all four axes (those not given
  /// have ICI size 1) with dcnMeshString() and opts, which fill the -1s.
  absl::StatusOr<MeshSpec> buildMesh(const MeshOptions &opts = {}) const;
  /// The origin of a key, or "" when it was not set.
  std::string originOf(std::string_view key) const;
};

/// Reads a config: a YAML mapping of MaxDiffusion keys. Errors are
/// InvalidArgument prefixed with `fileName:line: ` of the offending value
/// (the first problem only): YAML syntax, a non-mapping document, a key that
/// neither sd nor MaxDiffusion's configs have (with the nearest key that
/// does: `unknown key 'max_train_step'; did you mean 'max_train_steps'?`), a
/// value of the wrong type or out of range, two -1 axes. Duplicate keys: the
/// last one wins, as with PyYAML. A key that asks for what sd cannot do
/// (ModelKeyValue) is read, not refused: an override may still undo it, and
/// verifyRunConfig, which resolving a run calls after the overrides,
/// refuses it.
absl::StatusOr<RunConfig> parseRunConfig(std::string_view yamlText,
                                         std::string_view fileName);

/// Reads and parses a file; NotFound naming the path when it cannot be read.
absl::StatusOr<RunConfig> loadRunConfig(std::string_view path);

/// Applies one MaxDiffusion command-line override `key=value` on top of
/// config. The value is a YAML value (0.25, 'x', [a, b], {...}, True) and is
/// checked as in a file; a MaxDiffusion key sd does not use is added to
/// ignoredKeys. Errors (InvalidArgument, `command line: ...`): no '=', a key
/// neither sd nor MaxDiffusion knows (with a suggestion, as in a file), or a
/// bad value (the message names the key).
/// Checks that involve several keys (two -1 axes) are left to
/// verifyRunConfig, since a later override may fix what an earlier one
/// broke (`ici_data_parallelism=1 ici_fsdp_parallelism=-1` on base_xl.yml).
absl::Status applyOverride(RunConfig &config, std::string_view keyEqualsValue);

/// applyOverride for each override in order, then verifyRunConfig.
absl::Status applyOverrides(RunConfig &config,
                            const std::vector<std::string> &overrides);

/// The checks across keys, for a config with its overrides applied: at most
/// one ICI and one DCN axis set to -1 (the message names both keys and where
/// they were set), and no key that asks for what sd cannot do yet
/// (ModelKeyValue; the message names the key, its value, where it was set,
/// what sd cannot do and the value that goes on without it).
absl::Status verifyRunConfig(const RunConfig &config);

/// Whether `key` is a config key: one sd reads or one of MaxDiffusion's
/// configs has.
bool isConfigKey(std::string_view key);
/// The config key nearest to `key` by edit distance, when one is near
/// enough to be the key meant (`max_train_step` → `max_train_steps`); ""
/// otherwise.
std::string nearestConfigKey(std::string_view key);

/// Limits on what a run may ask for, far above any real run, so that a
/// mistyped value gets an error instead of an overflow, an allocation that
/// cannot succeed or a run that never ends (docs/sdrun.md).
/// The global batch (--batch, per_device_batch_size × devices): 2^24.
constexpr int64_t kMaxGlobalBatch = int64_t(1) << 24;
/// The largest LoRA rank a flag may ask for.
constexpr int64_t kMaxLoraRank = int64_t(1) << 16;
/// Steps of a run (--steps, max_train_steps).
constexpr int64_t kMaxTrainSteps = 1'000'000'000;
/// OpenMP threads per device (--threads-per-device).
constexpr int64_t kMaxThreadsPerDevice = 1024;
/// Sampler steps (num_inference_steps, sdsample's --num-inference-steps).
constexpr int64_t kMaxInferenceSteps = 100000;

} // namespace sd

#endif // SD_CONFIG_RUNCONFIG_H
