//===- Sample.h - Sampling images from a trained model ----------*- C++ -*-===//
//
// What `sdsample` does: run a model's @denoise, partitioned for a mesh and
// compiled like sdrun's training step, inside a DDPM, DDIM or Euler sampler
// loop with classifier-free guidance, and write the samples as a PNG grid
// and a safetensors file.
//
// The sampler math is the MLIR-free library sd/Sampling/Sampler.h
// (namespace `sampling` here); the device program only computes the
// network's prediction.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_SAMPLE_H
#define SD_DRIVER_SAMPLE_H

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Config/RunSpec.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Passes/Passes.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Runtime/Session.h"
#include "sd/Sampling/Sampler.h"

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
namespace sampling = ::sd::sampling;

//===----------------------------------------------------------------------===//
// The model's @denoise on a mesh
//===----------------------------------------------------------------------===//

/// `shape` as messages write it: "[2, 4, 8]".
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// A parameter of @denoise: its name, global shape, and the shape weight
/// files store it under (#sd.param's `stored`; the global shape when it has
/// none).
struct ParameterShape {
  std::string name;
  std::vector<int64_t> shape, stored;
};

/// A model's @denoise, built for a mesh, compiled, loaded and fed with
/// weights: each predict() is one step of the device program on a whole
/// batch.
class DenoiseProgram {
public:
  /// Builds @denoise of `module` with `pipeline` (mesh, rules, batch),
  /// compiles it (or finds it in the cache) and starts a session. Errors
  /// from the compiler are reported on the module first.
  /// `entry` is @denoise, or @forward (sdsample --predict), whose output
  /// may have more channels than the latents.
  static absl::StatusOr<std::unique_ptr<DenoiseProgram>>
  create(ModuleOp module, const PipelineOptions &pipeline,
         const DeviceSettings &settings, StringRef entry = "denoise");
  ~DenoiseProgram();

  /// The global batch of one call, the sample shape [H, W, C] (video:
  /// [F, H, W, C]), the classes (label columns − 1; 0 for a model without
  /// labels) and the mesh.
  int64_t batch() const { return batchSize; }
  const std::vector<int64_t> &sampleShape() const { return shape; }
  /// One sample's output [H, W, C'] (C' = C for @denoise; video
  /// [F, H, W, C']).
  const std::vector<int64_t> &sampleOutputShape() const { return outputShape; }
  int64_t sampleElements() const { return elements; }
  int64_t numClasses() const { return classes; }
  /// The global shapes [batch, ...] of the conditioning inputs (text states,
  /// pooled text vectors), in argument order; empty for class-conditioned
  /// and unconditional models. contextRoles() says which is which.
  const std::vector<std::vector<int64_t>> &contextShapes() const {
    return contexts;
  }
  /// InputRole::Context (text states) or InputRole::Pooled of each
  /// contextShapes() entry.
  const std::vector<::sd::rt::InputRole> &contextRoles() const { return roles; }
  /// Whether the model takes a guidance strength per row (Flux.1-dev's
  /// distilled guidance).
  bool hasGuidanceInput() const { return guidanceArg >= 0; }
  /// Whether the model takes SDXL's size and crop ids (input role
  /// time_ids, [batch, 6]); predict() feeds those of an uncropped image of
  /// the latents' size unless setTimeIds() gave others.
  bool hasTimeIdsInput() const { return timeIdsArg >= 0; }
  /// The ids [batch × 6] predict() feeds from now on.
  absl::Status setTimeIds(std::vector<float> ids);
  const ::sd::MeshSpec &mesh() const;
  ::sd::rt::TrainingSession &session() { return *trainingSession; }
  /// The parameters, in argument order.
  std::vector<ParameterShape> parameters() const;
  int64_t parameterCount() const;

  /// Hands every device its blocks of the parameters (`weights[name]`, each
  /// of its global shape) and zeros for the inputs. InvalidArgument naming
  /// the first parameter missing from `weights`.
  absl::Status
  setWeights(const std::map<std::string, std::vector<float>> &weights);

  /// The prediction [batch, sample output shape] for x_t [batch, sample
  /// shape], t [batch], one-hot labels [batch, classes + 1] (empty without
  /// labels), one tensor per contextShapes() entry, of that shape, and
  /// the guidance [batch] of a model with a guidance input (else empty).
  absl::StatusOr<std::vector<float>>
  predict(const std::vector<float> &x, const std::vector<float> &t,
          const std::vector<float> &labels,
          const std::vector<std::vector<float>> &contextValues = {},
          const std::vector<float> &guidance = {});

private:
  DenoiseProgram() = default;

  std::unique_ptr<::sd::rt::TrainingSession> trainingSession;
  int64_t batchSize = 0, elements = 0, classes = 0;
  std::vector<int64_t> shape, outputShape;
  std::vector<std::vector<int64_t>> contexts;
  std::vector<::sd::rt::InputRole> roles;
  /// Argument indices of the inputs (-1: absent).
  int64_t latentsArg = -1, timestepArg = -1, labelsArg = -1, guidanceArg = -1,
          timeIdsArg = -1;
  std::vector<float> timeIds;
  std::vector<int64_t> contextArgs;
};

/// The text-encoder outputs a text-conditioned model samples from (sdsample
/// --text-states, MaxDiffusion's cached text-encoder outputs), one tensor
/// per conditioning input of @denoise (DenoiseProgram::contextShapes order).
struct PromptStates {
  /// Prompts: a grid row each.
  int64_t prompts = 0;
  /// Per conditioning input: [prompts, its sample shape] values.
  std::vector<std::vector<float>> positive;
  /// Per conditioning input: the negative prompt's [negatives, ...], one
  /// for every prompt (negatives 1) or one per prompt (negatives ==
  /// prompts); empty without a negative prompt.
  std::vector<std::vector<float>> negative;
  int64_t negatives = 0;
};

/// The conditioning input of @denoise that a tensor of --text-states feeds:
/// its role (context or pooled) and shape without the batch.
struct ConditionInput {
  ::sd::rt::InputRole role;
  std::vector<int64_t> shape;
};

/// Reads `path`'s prompt states for `inputs`: prompt_embeds [N, L, D] for
/// the text states, pooled_prompt_embeds [N, P] for a pooled input, and
/// optionally negative_prompt_embeds / negative_pooled_prompt_embeds of
/// [1 or N, ...] (both or neither), any floating dtype, finite.
/// InvalidArgument naming the file and the tensor for a missing, unknown
/// or misshapen tensor.
absl::StatusOr<PromptStates>
readPromptStates(const std::string &path,
                 const std::vector<ConditionInput> &inputs);

/// What the samples of one chunk are conditioned on.
struct ChunkConditions {
  /// Each sample's class (class-conditioned models) or prompt (with
  /// `prompts`); ignored for unconditional models.
  std::vector<int64_t> rows;
  /// A text-conditioned model's prompt states, else null.
  const PromptStates *prompts = nullptr;
  /// Classifier-free guidance: 1 is none.
  double guidanceScale = 1.0;
  /// The value of a model's guidance input (Flux.1-dev's distilled
  /// guidance), for every row.
  double distilledGuidance = 0.0;
};

/// The guided prediction of `program` for a chunk of samples: one device
/// call holds the conditional rows (sample i's class, or its prompt's
/// states) and, with guidance, the unconditional rows below them (the null
/// class, the last label column, or the negative prompt's states); padding
/// rows repeat x = 0 at the same t, with the null class or the first
/// prompt's states. The chunk must fit: rows.size() ≤ samplesPerCall(program,
/// guidanceScale).
sampling::Denoiser guidedDenoiser(DenoiseProgram &program,
                                  ChunkConditions conditions);
/// The samples one device call holds: the batch, or half of it with
/// guidance (a scale other than 1 on a class- or text-conditioned model).
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
  /// A safetensors file's dtype of each tensor (checkpoints: none).
  std::map<std::string, std::string> dtypes;
};
absl::StatusOr<WeightSource> readWeightsFile(const std::string &path);
/// Merges the LoRA adapters of the safetensors file `path` (PEFT's names
/// X.lora_A.weight [r, in], X.lora_B.weight [out, r], optionally prefixed
/// "transformer.") into `weights` (@denoise's parameters `params`, by
/// name): X.weight += scale·(alpha/r)·B·A, alpha from the file's PEFT
/// metadata (kLoraMetadataKey; r without it). Every tensor is checked
/// first: a name that is not an adapter, a module the model lacks, a shape
/// its weight does not take, a missing half of a pair, a non-float dtype or
/// a non-finite value is InvalidArgument naming the file and the tensor.
/// Returns the line sdsample prints.
absl::StatusOr<std::string>
mergeLoraFile(const std::string &path, double scale,
              const std::vector<ParameterShape> &params,
              std::map<std::string, std::vector<float>> &weights);
/// The whole safetensors file at `path` (`what` names it in errors): a
/// regular file, no larger than the machine's memory.
absl::StatusOr<::sd::ckpt::SafetensorsFile>
readWholeSafetensors(const std::string &path, llvm::StringRef what);
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
  /// At most one: a safetensors file (or a sharded index) or a checkpoint
  /// directory; without either, the folder of the config's
  /// pretrained_model_name_or_path (`pretrained`, set at
  /// `pretrainedOrigin`), its config checked against the model.
  std::string weightsPath, checkpointDir, pretrained, pretrainedOrigin;
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
  /// A text-conditioned model's prompt states (readPromptStates), a grid
  /// row per prompt.
  std::string textStatesPath;
  /// --lora: LoRA adapters merged into the weights, times --lora-scale.
  std::string loraPath;
  double loraScale = 1.0;
  /// Whether guidance_scale was given (a flag or the config): a model with
  /// a distilled guidance input takes it there, else its sd.guidance.
  bool guidanceScaleGiven = false;
  /// Classifier-free guidance of a model with a distilled guidance input.
  double trueCfgScale = 1.0;
  /// Euler's time shift: flow_shift, or time_shift's resolution-dependent
  /// e^mu from base_shift to max_shift (unset: on for a model with a pooled
  /// text input, unless flow_shift is given); `shiftOrigin` says where a
  /// shift was asked for.
  std::optional<double> flowShift;
  std::optional<bool> timeShift;
  double baseShift = 0.5, maxShift = 1.15;
  std::string shiftOrigin;
  /// Outputs ("" for none); `gridZoom` 0 for defaultZoom.
  std::string gridPath, outputPath;
  /// --predict: the inputs of one call of the model's @forward (see
  /// runPrediction) instead of sampling; "" to sample.
  std::string predictPath;
  int64_t gridZoom = 0;
};

/// The weights `options` name for `module`: --weights' file,
/// --checkpoint-dir's latest checkpoint, or the pretrained folder's
/// weights after its config is checked against the model.
absl::StatusOr<WeightSource> readSampleWeights(ModuleOp module,
                                               const SampleOptions &options);
/// InvalidArgument unless `options` name the weights once (see
/// SampleOptions::weightsPath).
absl::Status checkWeightOptions(const SampleOptions &options);

/// Sets `options`' sampling from a resolved run spec (num_inference_steps,
/// guidance_scale and prediction_type: flag > config key > default) and
/// sdsample's own flags (the sampler, the weights, the seed, the classes
/// and the outputs). InvalidArgument for an unknown --prediction-type or
/// --sampler, and for --ema with --no-ema.
absl::Status setSamplingOptions(const ::sd::RunSpec &spec,
                                const ::sd::RunSpecFlags &flags,
                                SampleOptions &options);

/// The most samples one run makes, and the most steps.
constexpr int64_t kMaxSamples = int64_t(1) << 20;
constexpr int64_t kMaxSamplingSteps = ::sd::kMaxInferenceSteps;

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

/// sdsample --predict: one call of the model's @forward (@denoise when it
/// has none) on a mesh, on the inputs of `options.predictPath` named and
/// laid out as the reference's forward() takes them (DiT: x [B, C, H, W],
/// t [B] in [0, 1000), y [B] I64 labels), writing its output `out` in the
/// reference's layout ([B, C', H, W]) to `options.outputPath`. The weights,
/// the inputs and the options are checked before anything compiles; errors
/// come back as runSampling's.
absl::Status runPrediction(ModuleOp module, const SampleOptions &options);

/// The weights of the module's @denoise parameters from `source` (as
/// selectWeights does for a built program), before anything compiles.
absl::StatusOr<std::map<std::string, std::vector<float>>>
selectModelWeights(ModuleOp module, const WeightSource &source,
                   std::optional<bool> ema, bool &usedEma);

/// Parses `options.modelPath` and runs runSampling on it.
absl::Status sampleModelFile(const SampleOptions &options);

} // namespace mlir::sd

#endif // SD_DRIVER_SAMPLE_H
