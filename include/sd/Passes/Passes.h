//===- Passes.h - sd passes -------------------------------------*- C++ -*-===//
#ifndef SD_PASSES_PASSES_H
#define SD_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "sd/IR/SDDialect.h"
// Option types of sd-print-report (LayoutChoice, ReportFormat).
#include "sd/Analysis/Report.h"
#include "sd/Analysis/StepTime.h"
// Option type of sd-remat.
#include "sd/Config/AttentionKind.h"
#include "sd/Config/DType.h"
#include "sd/Config/LrSchedule.h"
#include "sd/Config/RematPolicyKind.h"
#include "sd/Sharding/Hardware.h"
#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/Network.h"

#include <optional>
#include <vector>

namespace mlir::sd {

/// The elements of @train_step's #sd.input<hyperparameters>
/// (sd-build-train-step's hyperparameter-inputs), in order. Differences and
/// negations are elements of their own, computed in double as the
/// constants they replace are, so that the step computes bitwise what it
/// computes with constants.
enum class Hyperparameter : int64_t {
  LearningRate,
  WarmupSteps,
  /// learning_rate_schedule_steps − warm-up (a decaying schedule's span).
  DecaySteps,
  Beta1,
  OneMinusBeta1,
  Beta2,
  OneMinusBeta2,
  Epsilon,
  WeightDecay,
  MaxGradNorm,
  MaxGradValue,
  NegMaxGradValue,
  EmaDecay,
  EmaInvGamma,
  NegEmaPower,
  Count
};

#define GEN_PASS_DECL
#include "sd/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "sd/Passes/Passes.h.inc"

/// The options of the passes that make the training step from @loss
/// (sd-differentiate has none).
struct TrainingOptions {
  RematOptions remat;
  BuildTrainStepOptions step;
};

/// The hyperparameter input's values for `options`, indexed by
/// Hyperparameter.
std::vector<float> hyperparameterValues(const BuildTrainStepOptions &options);

/// Adds sd-differentiate and sd-remat, then, with `buildStep`,
/// sd-build-train-step (without: the program's @loss_grad).
void addTrainingPasses(OpPassManager &pm, const TrainingOptions &options,
                       bool buildStep = true);

/// What the default sdopt pipeline does with a program; mirrors sdopt's
/// flags.
struct PipelineOptions {
  std::string mesh;
  std::string dcnMesh;
  int64_t devices = 0;
  int64_t processes = 0;
  /// The logical axis rules; unset: sd-apply-logical-rules' default, the
  /// `dit` preset.
  std::optional<::sd::LogicalAxisRules> rules;
  /// Global batch (0: the program's default).
  int64_t batch = 0;
  /// Devices the batch dimension is sharded over: the program's default
  /// batch becomes a multiple of it (sd-specialize-batch's batch-multiple).
  int64_t batchMultiple = 1;
  /// Inline block functions and propagate shardings (sd-propagate-sharding)
  /// after the logical axis rules.
  bool propagate = false;
  /// sd-propagate-sharding's record-provenance and explain options.
  bool recordProvenance = false;
  std::string explain;
  /// sd-propagate-sharding's record-size-queries (the planner's reuse).
  bool recordSizeQueries = false;
  /// Inline, propagate, then make the per-device program (sd-partition)
  /// and optimize its collectives (sd-optimize-collectives); implies
  /// `propagate`.
  bool partition = false;
  /// The module has no calls left (the caller inlined it and checked):
  /// propagation skips the inliner, whose canonicalization of a program of
  /// hundreds of thousands of ops costs about a second.
  bool callFree = false;
  /// Build the training step (sd-differentiate, sd-remat,
  /// sd-build-train-step) after the logical axis rules; `training` holds
  /// their options (policy, optimizer, microbatches). The batch is
  /// specialized to the microbatch.
  bool train = false;
  TrainingOptions training;
  /// Tile attention into flash-attention blocks (sd-tile-attention, before
  /// the training passes) with these options; unset: attention stays
  /// sd.attention (MaxDiffusion's `attention: dot_product`).
  std::optional<TileAttentionOptions> tileAttention;
  /// What the mesh's links cost, for reports of the partitioned program.
  ::sd::NetworkModel network;
  /// Mixed precision (sd-apply-precision, first): the weights' compute copy
  /// and the activations' element type.
  ::sd::DType weightsDtype = ::sd::DType::Float32;
  ::sd::DType activationsDtype = ::sd::DType::Float32;
  /// What gradients are reduced in under bf16 activations
  /// (sd-widen-gradients when f32, after inlining).
  ::sd::DType gradReduceDtype = ::sd::DType::Float32;
  /// LoRA adapters (sd-add-lora, first of all: on every function with
  /// parameters, so that a sampler's @denoise takes them too).
  std::optional<AddLoraOptions> lora;
  /// With `train`: the parameters frozen by name (sd-freeze-parameters,
  /// when it has patterns).
  FreezeParametersOptions freeze;
  /// With `train`: min-SNR-γ loss weighting (sd-min-snr-weighting, after
  /// the precision policy) when set.
  std::optional<double> snrGamma;
  /// With `train`: sd-bucket-collectives' bucket-bytes after partitioning,
  /// a device's bytes of reductions that run back to back (0, the default:
  /// the pass does not run).
  int64_t bucketBytes = 0;
};

/// sd-widen-gradients when `options` trains in bf16 activations with f32
/// gradient reductions; on a module whose blocks are inlined.
void addGradientReductionPasses(OpPassManager &pm,
                                const PipelineOptions &options);

/// sd-tile-attention with the strategy (flash, ring or Ulysses) whose
/// partitioned program's collectives take the least time per step under
/// `options.network` (then send the fewest bytes): the rest of the
/// pipeline `options` describe runs on a copy of the module for each, and
/// the cost model compares them (attention=auto).
std::unique_ptr<Pass> createSelectAttention(const PipelineOptions &options);

/// A copy of `module`'s ops in a module nested at its end, for a pass that
/// tries a pipeline on the program without changing it (sd-select-attention,
/// sd-plan); the caller erases it. Modules nested in `module` (other
/// copies) are not copied.
ModuleOp copyIntoNestedModule(ModuleOp module);
/// The same copy in a module of no parent, which no other copy's making
/// changes (sd-plan's partitions on threads); the caller erases it.
ModuleOp copyIntoDetachedModule(ModuleOp module);

/// What sd-plan searches and prices on (`sdopt --plan`).
struct PlanOptions {
  int64_t devices = 0;
  int64_t hosts = 1;
  ::sd::HardwareProfile profile;
  /// Bytes per device; 0: the profile's memory.
  int64_t deviceMemory = 0;
  /// Rows of the printed table; 0: every plan that fits (and the bound on
  /// NONE's time prunes nothing).
  size_t top = 5;
  /// Where to write the best plan as a MaxDiffusion-style run config
  /// (`sdrun --config`); none when empty.
  std::string outputPath;
  /// The run settings the search was given, as that config's YAML lines
  /// (::sd::carrySettings), and those only a flag sets (`--warmup-steps=10`),
  /// which its "Run it" line names.
  std::vector<std::string> configLines, flagsOnly;
  /// The remat policies to try; empty: every one sd can price.
  std::vector<::sd::RematPolicyKind> remats;
  /// The attention strategies to try; empty: dot_product and flash, with
  /// ring and Ulysses on meshes that split the sequence (context > 1).
  std::vector<::sd::AttentionKind> attentions;
  /// Try the rules' variants (::sd::RuleVariant) on the meshes where they
  /// differ; false: the rules as given.
  bool ruleVariants = true;
  /// The gradient accumulations to try; empty: 1, and 2, 4 and 8 where the
  /// batch splits into that many whole microbatches on every device.
  std::vector<int64_t> accumulations;
  /// Price each candidate's whole program instead of its repeated blocks
  /// once (lib/Passes/PlanBlocks.h): slower, the reference the
  /// extrapolation is checked against.
  bool wholeProgram = false;
};

/// The best plan (sdrun --mesh=auto).
struct PlanChoice {
  std::string mesh, dcnMesh;
  /// The rules as --rules spells them (a preset or file, and variants).
  std::string rules;
  int64_t accum = 1;
  ::sd::AttentionKind attention;
  ::sd::RematPolicyKind remat;
  StepTimePrediction time;
  /// How many candidates were searched.
  int64_t candidates = 0;
};

/// sd-plan's search on `module` outside any pass: its best plan, or
/// failure after an error at the module's location when none fits.
FailureOr<PlanChoice> choosePlan(ModuleOp module, const PipelineOptions &base,
                                 const PlanOptions &plan);

/// sd-plan (lib/Passes/Plan.cpp): every mesh of `plan.devices`, with the
/// rules' variants, attention strategies, remat policies and accumulations
/// it can price, each the default pipeline's training step from `base`
/// (built once before the mesh, partitioned per mesh) priced with the
/// step-time model; prints the best plans to `os`, or fails with an error
/// naming the smallest plan's memory when none fits.
std::unique_ptr<Pass> createPlan(const PipelineOptions &base,
                                 const PlanOptions &plan,
                                 llvm::raw_ostream &os);

/// Specializes the batch, makes the mesh and applies the logical axis rules;
/// with `propagate`, then inlines and propagates shardings; with
/// `partition`, then partitions and optimizes the collectives.
void buildDefaultPipeline(OpPassManager &pm, const PipelineOptions &options);

/// sd-materialize-mesh with `options`' meshes, then sd-apply-logical-rules
/// with its rules.
void addMeshPasses(OpPassManager &pm, const PipelineOptions &options);
/// sd-materialize-mesh alone (it replaces a mesh the module has).
void addMaterializeMeshPass(OpPassManager &pm, const PipelineOptions &options);

/// The default pipeline in the order the planner prices many meshes of one
/// program: buildMeshFreePipeline is everything that does not depend on
/// the mesh (precision, batch, attention tiling, the training step, then
/// inlining), with the logical axis names left unresolved; the differentiated
/// sharding constraints and the step's arguments carry them.
/// buildMeshPipeline then makes the mesh, applies the rules (a donated
/// result takes its argument's sharding, as sd-build-train-step gives it),
/// propagates and partitions. On the same options the two give the
/// default pipeline's program (the planner's --plan-whole-program runs the
/// default pipeline: test/lit/Tools/sdopt-plan-blocks.mlir compares them).
void buildMeshFreePipeline(OpPassManager &pm, const PipelineOptions &options);
void buildMeshPipeline(OpPassManager &pm, const PipelineOptions &options);
/// buildMeshPipeline in two: the mesh, the rules and the propagation, then
/// (addPartitionPasses) the partition and the collectives' optimizations.
/// The planner propagates once for meshes the propagation cannot tell
/// apart (sd-propagate-sharding's `record-size-queries`).
void buildMeshPropagationPipeline(OpPassManager &pm,
                                  const PipelineOptions &options);
void addPartitionPasses(OpPassManager &pm, const PipelineOptions &options);

/// The default pipeline's second half on a module the first half
/// (`propagate` and `partition` off) made: inlines, propagates, partitions
/// (unless `partition` is off) and optimizes the collectives.
void buildPartitionPipeline(OpPassManager &pm, const PipelineOptions &options);

/// sd-apply-logical-rules with the rules as an object (its `rules` option,
/// a preset name or a YAML file, is then unused).
std::unique_ptr<Pass>
createApplyLogicalRules(const ::sd::LogicalAxisRules &rules,
                        const ApplyLogicalRulesOptions &options = {});

/// sd-print-report and sd-show-sharding writing to `os` rather than
/// llvm::outs(): sdopt sends them to its output file instead of the IR.
std::unique_ptr<Pass> createPrintReport(llvm::raw_ostream &os,
                                        const PrintReportOptions &options);
/// Likewise, pricing the collectives with `network` instead of the
/// options' bandwidths and latencies (sdopt resolves them from its flags).
std::unique_ptr<Pass> createPrintReport(llvm::raw_ostream &os,
                                        const PrintReportOptions &options,
                                        const ::sd::NetworkModel &network);
/// And predicting the step's time on `profile` (the step-time model,
/// sd/Analysis/StepTime.h).
std::unique_ptr<Pass>
createPrintReport(llvm::raw_ostream &os, const PrintReportOptions &options,
                  const ::sd::NetworkModel &network,
                  const std::optional<::sd::HardwareProfile> &profile);
std::unique_ptr<Pass> createShowSharding(llvm::raw_ostream &os,
                                         const ShowShardingOptions &options);

/// Registers the passes and the `sd-default-pipeline` pipeline.
void registerSDPipelines();

} // namespace mlir::sd

#endif // SD_PASSES_PASSES_H
