//===- RunSpec.h - The typed specification of a run -------------*- C++ -*-===//
//
// What sdopt, sdrun and sdsample resolve their command lines into: the
// mesh, the logical axis rules, the batch, the remat policy, the optimizer,
// dtypes, attention settings and the run's settings (steps, checkpoints,
// outputs, budgets), each with the origin of its value. One function builds it
// from what the flags set, a MaxDiffusion config file (RunConfig.h) and its
// key=value overrides, with precedence flag > key=value > file > default,
// and checks every value the same way whatever its source. MLIR-free and
// free of llvm::cl: the tools' flag module (sd/Driver/ToolFlags.h) fills
// RunSpecFlags.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_RUNSPEC_H
#define SD_CONFIG_RUNSPEC_H

#include "sd/Config/AttentionKind.h"
#include "sd/Config/DType.h"
#include "sd/Config/LrSchedule.h"
#include "sd/Config/RematPolicyKind.h"
#include "sd/Config/RunConfig.h"
#include "sd/Sharding/Hardware.h"
#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/Mesh.h"
#include "sd/Sharding/Network.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace sd {

/// What the command line set: a field is set when its flag was given. Flag
/// names are those of sd/Driver/ToolFlags.h (`mesh` is --mesh, ...).
struct RunSpecFlags {
  /// --config, and the arguments that follow the model: key=value
  /// overrides of the config's keys and, MaxDiffusion's habit
  /// (`sdrun MODEL.mlir base_xl.yml key=value`), the config file itself,
  /// which resolveRunSpec reads as --config's (isConfigFileArgument).
  std::optional<std::string> config;
  std::vector<std::string> overrides;
  /// Whether key=value arguments are taken (sdrun); sdsample takes only a
  /// config file there.
  bool takesOverrides = true;

  // The mesh and the logical axis rules.
  std::optional<std::string> mesh, dcnMesh, rules;
  std::optional<int64_t> devices, processes;
  /// `processes` is the size of the MPI job the tool runs in (mpirun -np).
  bool processesFromMpi = false;

  // The batch.
  std::optional<int64_t> batch, gradAccum;
  std::optional<double> perDeviceBatch;

  // The training step: remat policy and optimizer.
  std::optional<std::string> remat;
  std::optional<std::vector<std::string>> namesSaved, namesOffloaded;
  std::optional<double> learningRate, adamB1, adamB2, adamEps, weightDecay,
      maxGradNorm, emaDecay, emaInvGamma, emaPower;
  std::optional<bool> emaWarmup;
  std::optional<int64_t> warmupSteps;
  std::optional<std::string> lrSchedule;
  std::optional<int64_t> lrScheduleSteps;
  std::optional<double> maxGradValue;
  // Fine-tuning: LoRA (--lora-rank turns it on), freezing by pattern and
  // the weight-decay mask.
  std::optional<int64_t> loraRank;
  std::optional<double> loraAlpha;
  std::optional<std::vector<std::string>> loraTargets, freeze, trainable,
      weightDecayExclude;

  // Attention: the kernel and its flash block sizes (MaxDiffusion's JSON).
  std::optional<std::string> attention, flashBlockSizes;
  // Mixed precision (MaxDiffusion's weights_dtype, activations_dtype).
  std::optional<std::string> weightsDtype, activationsDtype, gradReduceDtype;
  std::optional<double> bucketCapMb;
  std::optional<int64_t> ulyssesShards, flashMinSeqLength;

  // What the steps train on.
  std::optional<std::string> datasetType, trainDataDir;
  std::optional<double> classDropoutProb, logitMean, logitStd, snrGamma;
  std::optional<std::string> timestepBiasStrategy;
  std::optional<double> timestepBiasMultiplier, timestepBiasPortion;
  std::optional<int64_t> timestepBiasBegin, timestepBiasEnd;
  std::optional<std::string> timestepSampling;
  std::optional<int64_t> evalEvery;

  // sdrun's run.
  std::string modelPath;
  std::optional<int64_t> steps, checkpointEvery, traceSkipSteps, traceSteps,
      threadsPerDevice;
  std::optional<uint64_t> seed;
  std::optional<std::string> outputDir, runName, checkpointDir, initFrom,
      pretrained, exportPath, exportEmaPath, exportMergedPath, exportDtype,
      tracePath, metricsPath, cacheDir, deviceMemory, hostMemory,
      hostMemoryLimit;
  std::optional<bool> resume, verify, allowNonfiniteLoss, allowMissing;
  /// The network the cost model prices collectives on (sd/Sharding/
  /// Network.h): bandwidths and latencies as the flags give them.
  std::optional<std::string> iciBandwidth, dcnBandwidth, iciLatency, dcnLatency;
  /// A hardware profile (sd/Sharding/Hardware.h): a built-in name or a
  /// YAML file; its links are the network's unless the flags above say
  /// otherwise, and sdopt's report predicts the step's time on it.
  std::optional<std::string> profile;
  /// Under mpirun: seconds a collective waits for another rank.
  std::optional<double> collectiveTimeout;
  /// Under mpirun: every rank writes the trace of its devices (rank r's
  /// beside --trace's file, as FILE.rankR.json), not rank 0 alone.
  std::optional<bool> traceAllRanks;

  // sdsample's sampling: the sampler, its steps and guidance, what the
  // model predicts, the weights (--weights, or --checkpoint-dir above) and
  // the outputs.
  std::optional<std::string> sampler, predictionType, weights, grid, output,
      predict, textStates, loraWeights;
  std::optional<int64_t> numInferenceSteps, samplesPerClass, gridScale;
  std::optional<double> guidanceScale, trueCfgScale, flowShift, baseShift,
      maxShift, loraScale;
  std::optional<bool> ema, noEma, clipX0, timeShift;
  std::optional<std::vector<int64_t>> classes;
};

/// What the resolver needs to know about the machine.
struct HostInfo {
  /// Fills a config's -1 mesh axis when --devices is not given.
  int64_t cores = 1;
  /// The default run name ("20261122-110512", MaxText's): the start time.
  std::string startTime;

  /// This machine's core count and the local time now.
  static HostInfo current();
};

/// Which kind of source a setting's value came from.
enum class SettingSource { Default, Flag, Config };

/// A setting's value and where it came from, as `sdrun --print-config`
/// shows it: "--steps" (a flag), "dit_tiny.yml:19" (a config file's line),
/// "command line" (a key=value override) or "default".
template <typename T> struct Setting {
  T value{};
  SettingSource source = SettingSource::Default;
  std::string origin = "default";

  Setting() = default;
  Setting(T value) : value(std::move(value)) {}
};

/// What a fine-tune trains: LoRA adapters, or the parameters the patterns
/// leave unfrozen; and which parameters AdamW's weight decay skips.
struct FineTuneSettings {
  /// enable_lora (or --lora-rank given): adapters beside the target
  /// modules, every other parameter frozen.
  Setting<bool> lora{false};
  Setting<int64_t> loraRank{16};
  /// lora_alpha; the update is scaled by alpha / rank (default alpha =
  /// rank).
  Setting<double> loraAlpha{16.0};
  /// PEFT's target_modules: names, or one regular expression
  /// (loraTargetRegex; kDefaultLoraTargets when neither is given).
  Setting<std::vector<std::string>> loraTargets;
  std::string loraTargetRegex;
  /// Glob patterns of parameter names: frozen, and (when given) the only
  /// ones trained.
  Setting<std::vector<std::string>> freeze, trainable;
  /// Glob patterns of the parameters without weight decay: biases, norms
  /// and embedding tables by default.
  Setting<std::vector<std::string>> weightDecayExclude{
      std::vector<std::string>{"*bias", "*norm*", "*embedding_table*"}};
};

/// LoRA's default target modules as a PEFT regular expression: the
/// attention projections of DiT (attn.qkv, attn.proj), Flux (attn.to_q,
/// ..., add_q_proj, ..., to_add_out) and Wan (attn1/attn2.to_q, ...).
constexpr std::string_view kDefaultLoraTargets =
    R"(.*\.attn[0-9]*\.(to_q|to_k|to_v|to_out\.0|add_q_proj|add_k_proj|)"
    R"(add_v_proj|to_add_out|qkv|proj))";

/// The devices: the mesh and what fills its -1 axes.
struct MeshSettings {
  /// ICI and DCN sizes in parseMesh's syntax, as given by --mesh and
  /// --dcn-mesh or built from the config's ici_*/dcn_* keys; "" for one
  /// device.
  std::string ici, dcn;
  /// Device and process counts that fill -1 axes (0: not given).
  int64_t devices = 0, processes = 0;
  /// The parsed mesh; one `data:1` axis without `ici`.
  MeshSpec mesh;
  /// What its links cost (--ici-bandwidth, ...; the defaults otherwise).
  NetworkModel network;
  /// Where `ici` came from.
  SettingSource source = SettingSource::Default;
  std::string origin = "default";
};

struct BatchSettings {
  /// The global batch, 0 for the model's default: --batch, or
  /// per_device_batch_size × devices.
  Setting<int64_t> global;
  /// MaxDiffusion's per_device_batch_size (0: not given).
  Setting<double> perDevice;
  /// Microbatches accumulated per training step (>= 1; the global batch
  /// splits into them).
  Setting<int64_t> gradAccum{1};
};

struct RematSettings {
  Setting<RematPolicyKind> policy{RematPolicyKind::None};
  /// CUSTOM's names_which_can_be_saved / _offloaded; empty for the other
  /// policies, for which MaxDiffusion's configs list names that mean
  /// nothing.
  Setting<std::vector<std::string>> namesSaved, namesOffloaded;
};

/// AdamW with a linear warm-up and global-norm clipping.
struct OptimizerSettings {
  Setting<double> learningRate{1e-4};
  Setting<double> adamB1{0.9}, adamB2{0.999}, adamEps{1e-8};
  Setting<double> weightDecay{1e-2};
  /// 0: no clipping (also when opt_enable_grad_global_norm_clipping is
  /// false).
  Setting<double> maxGradNorm{0.0};
  /// max_grad_value: each gradient element clipped to [-v, v] (0: none).
  Setting<double> maxGradValue{0.0};
  Setting<int64_t> warmupSteps{0};
  /// The learning rate after warm-up (learning_rate_schedule), and the
  /// steps of warm-up and decay (learning_rate_schedule_steps, -1 resolved
  /// to the run's length; 0 for a constant rate).
  Setting<LrSchedule> lrSchedule{LrSchedule::Constant};
  Setting<int64_t> lrScheduleSteps{0};
  /// The warmup_steps_fraction the warm-up was computed from, if any.
  std::optional<double> warmupStepsFraction;
  /// ema_decay: the step keeps an exponential moving average of the
  /// parameters with this decay; 0 keeps none.
  Setting<double> emaDecay{0.0};
  /// The decay's warm-up (diffusers' EMAModel) after s steps:
  /// min(ema_decay, (1 + s)/(10 + s)), or with ema_warmup
  /// min(ema_decay, 1 − (1 + s/ema_inv_gamma)^−ema_power).
  Setting<bool> emaWarmup{false};
  Setting<double> emaInvGamma{1.0}, emaPower{2.0 / 3.0};
};

/// What the steps train on (sd/Data/Batches.h).
struct DataSettings {
  /// dataset_type: "synthetic" (a generated data set of one global batch)
  /// or "sd" (a directory sddata wrote, train_data_dir).
  Setting<std::string> type{std::string("synthetic")};
  Setting<std::string> trainDataDir;
  /// DiT's class_dropout_prob: labels dropped to the null class.
  Setting<double> classDropoutProb{0.0};
  /// eval_every: steps between losses on the held-out split (0: never).
  Setting<int64_t> evalEvery{0};
  /// timestep_sampling of a flow model: "uniform", "logit_normal" (with
  /// logit_mean, logit_std) or "shift" (by flow_shift).
  Setting<std::string> timestepSampling{std::string("uniform")};
  Setting<double> logitMean{0.0}, logitStd{1.0};
  /// snr_gamma: the loss weighted per sample by min-SNR-γ (an epsilon or
  /// v_prediction model); -1 (MaxDiffusion's default) or 0: the plain mean
  /// squared error.
  Setting<double> snrGamma{-1.0};
  /// timestep_bias: the uniform training timesteps drawn `multiplier`
  /// times as often in one part of [0, 1) (diffusers' SDXL scripts):
  /// "none", "earlier" (the first `portion`), "later" (the last
  /// `portion`) or "range" ([begin, end) of 1000 timesteps).
  Setting<std::string> timestepBiasStrategy{std::string("none")};
  Setting<double> timestepBiasMultiplier{1.0}, timestepBiasPortion{0.25};
  Setting<int64_t> timestepBiasBegin{0}, timestepBiasEnd{1000};
  /// prediction_type as a config (or sdsample's --prediction-type) gives
  /// it (the model decides; sdrun and sdsample check that they agree).
  std::optional<Setting<std::string>> predictionType;
  /// resolution and norm_num_groups as a UNet config gives them (sdrun
  /// checks them against a UNet program: its latents × 8, its group
  /// norms).
  std::optional<Setting<int64_t>> resolution, normNumGroups;
};

/// How the model's layers run: the attention kernel and its block sizes,
/// and the element types they compute in.
struct ModelSettings {
  Setting<AttentionKind> attention{AttentionKind::DotProduct};
  /// Given sizes (defaults filled in as FlashBlockSizes describes); unset:
  /// sd-tile-attention derives them from the cache.
  std::optional<Setting<FlashBlockSizes>> flashBlockSizes;
  /// Devices per Ulysses group of ulysses_ring (and of auto's hybrid
  /// candidate); unset otherwise.
  std::optional<Setting<int64_t>> ulyssesShards;
  /// MaxDiffusion's flash_min_seq_length: under a tiled attention, an
  /// attention whose query is shorter keeps the untiled form (0: none).
  Setting<int64_t> flashMinSeqLength{0};
  /// weights_dtype: the parameters' compute copy (cast from the f32
  /// master); activations_dtype: what values depending on them are computed
  /// in (sd-apply-precision).
  Setting<DType> weightsDtype{DType::Float32}, activationsDtype{DType::Float32};
  /// grad_reduce_dtype: what the gradients' reduce-scatters and all-reduces
  /// move under bf16 activations (sd-widen-gradients when float32).
  Setting<DType> gradReduceDtype{DType::Float32};
  /// bucket_cap_mb: MiB of a device's gradient reductions that run back to
  /// back (sd-bucket-collectives; PyTorch DDP's name), 0 (the default) for
  /// each where its gradient is ready.
  Setting<double> bucketCapMb{0.0};
};

/// sdsample's sampler settings (sdrun checks the keys and ignores them).
struct SamplingSettings {
  /// num_inference_steps.
  Setting<int64_t> steps{50};
  /// guidance_scale: 1 is no classifier-free guidance (for a model with a
  /// distilled guidance input, that input; unset: the model's).
  Setting<double> guidanceScale{1.0};
  /// flow_shift: Euler's time shift (1: none).
  Setting<double> flowShift{1.0};
  /// time_shift: Flux's resolution-dependent shift from base_shift to
  /// max_shift (unset: on for a model with a pooled text input).
  Setting<bool> timeShift{false};
  Setting<double> baseShift{0.5}, maxShift{1.15};
};

/// sdrun's run around the training step.
struct RunSettings {
  std::string modelPath;
  /// Steps the run ends at (max_train_steps).
  Setting<int64_t> steps{10};
  Setting<uint64_t> seed{0};
  /// output_dir and run_name; runDir is output_dir/run_name ("" without
  /// output_dir), run_name defaulting to the start time.
  Setting<std::string> outputDir, runName;
  std::string runDir;
  /// The name the run goes by: run_name, or the start time in an
  /// output_dir.
  std::string effectiveRunName;
  /// As given: -1 or 0 checkpoint only at the end.
  Setting<int64_t> checkpointEvery{0};
  std::string checkpointDir;
  bool resume = false;
  std::string initFrom, exportPath;
  /// pretrained_model_name_or_path (--pretrained): a local diffusers model
  /// folder to start from ("" for none); sdrun checks its config.json
  /// against the model and loads its weights as --init-from does.
  Setting<std::string> pretrained;
  /// --allow-missing: parameters --init-from's file lacks keep their
  /// seeded values (otherwise an error naming them).
  bool allowMissing = false;
  /// --export-ema: the EMA parameters, under the parameters' names.
  std::string exportEmaPath;
  /// --export-merged: with LoRA, the model with the adapters merged into
  /// their base weights.
  std::string exportMergedPath;
  /// --export-dtype: what --export and --export-ema store (unset: the
  /// model's weights_dtype).
  std::optional<DType> exportDtype;
  /// A Chrome trace: --trace, or trace.json in runDir when the config
  /// enables the profiler ("" for none).
  Setting<std::string> tracePath;
  Setting<int64_t> traceSkipSteps{0}, traceSteps{10};
  std::string metricsPath, cacheDir;
  bool verify = false;
  /// Go on after a step whose loss is NaN or infinite (by default the run
  /// stops there, before it checkpoints).
  bool allowNonfiniteLoss = false;
  /// 0: cores / devices.
  int threadsPerDevice = 0;
  /// Per-device budgets in bytes (0: unlimited).
  int64_t deviceMemoryBudget = 0, hostMemoryBudget = 0;
  /// --host-memory-limit: the most resident memory one process may be
  /// predicted to use (0: no limit but the machine's).
  int64_t processMemoryLimit = 0;
  /// Under mpirun: seconds a collective waits for another rank (unset: the
  /// transport's default).
  std::optional<double> collectiveTimeout;
};

/// A resolved run: every setting valid, with its origin.
struct RunSpec {
  /// The config file read ("" without --config).
  std::string configFile;
  MeshSettings mesh;
  Setting<LogicalAxisRules> rules;
  BatchSettings batch;
  RematSettings remat;
  OptimizerSettings optimizer;
  FineTuneSettings fineTune;
  ModelSettings model;
  DataSettings data;
  SamplingSettings sampling;
  RunSettings run;
  /// Lines printed under the run's header: what the config set that sd
  /// records but does not apply, how a -1 axis was filled, ...
  std::vector<std::string> notes;
  /// Warnings for the tool to print (keys of the config sd ignores).
  std::vector<std::string> warnings;
};

/// "512MiB", "2GB", "1.5G", "1048576" → bytes: a positive decimal number
/// and a case-insensitive unit (none or B; K, KiB; KB; M, MiB; MB; G, GiB;
/// GB), surrounding blanks allowed. nullopt when malformed or not positive.
/// The spelling of --device-memory and --host-memory.
std::optional<int64_t> parseByteSize(std::string_view text);

/// Whether an argument after the model is a config file (FILE.yml or
/// FILE.yaml, without '=') rather than a key=value override.
bool isConfigFileArgument(std::string_view argument);

/// An error unless `path`, pretrained_model_name_or_path's value (set at
/// `origin`), is an existing directory: a Hugging Face hub id (`org/name`)
/// that is not a local path gets one error saying to download it first (sd
/// reads local folders only).
absl::Status checkPretrainedPath(const std::string &path,
                                 const std::string &origin);

/// Resolves `flags`, the config file they name and its key=value overrides
/// into a RunSpec. Precedence: flag > key=value > file > default. Errors
/// (InvalidArgument, or the config reader's): one message naming the flag
/// or key and the bad value, e.g. `--adam-b1 must be in [0, 1), not 5`;
/// among them two config files, a config key that asks for what sd cannot
/// do (verifyRunConfig), an empty --mesh, and the run flags that do not go
/// together (--resume without --checkpoint-dir or with --init-from,
/// --export-ema without ema_decay).
absl::StatusOr<RunSpec> resolveRunSpec(const RunSpecFlags &flags,
                                       const HostInfo &host);

/// The network model of --ici-bandwidth, --dcn-bandwidth, --ici-latency
/// and --dcn-latency (for those not given, --profile's links, or the
/// defaults); InvalidArgument naming the flag and its text.
absl::StatusOr<NetworkModel> resolveNetwork(const RunSpecFlags &flags);

/// --profile's hardware profile (none without the flag); InvalidArgument
/// naming the flag.
absl::StatusOr<std::optional<HardwareProfile>>
resolveProfile(const RunSpecFlags &flags);

/// `sdrun --print-config`: the header line, each setting with its value and
/// origin, then the notes.
void printRunSpec(const RunSpec &spec, llvm::raw_ostream &os);

} // namespace sd

#endif // SD_CONFIG_RUNSPEC_H
