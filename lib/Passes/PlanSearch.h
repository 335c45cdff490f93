//===- PlanSearch.h - The planner's search ----------------------*- C++ -*-===//
//
// The planner's search (sd-plan, sdrun --mesh=auto): for a device count
// (and hosts), every mesh that factors the devices over `data`, `fsdp`,
// `context` and `tensor` inside a host (and over `data` and `fsdp` across
// hosts), with the logical axis rules and their variants (PlanRules.h),
// each attention strategy, remat policy and gradient accumulation. The
// training step of each attention, remat policy and accumulation is built
// once, before any mesh (buildMeshFreePipeline); each mesh and rule set
// partitions a copy of it (buildMeshPipeline; meshes that differ only in
// how an axis splits between hosts and the devices of a host share one
// partitioning), and the step-time model prices it on a hardware profile.
// A model whose blocks repeat (a chain of calls to one block function) is
// priced from one copy that keeps three blocks of each chain, the middle
// ones each further block's price, extrapolated to the whole
// (PlanBlocks.h). Each group (mesh, rules,
// attention) prices its plan without remat first: where it fits, is
// already slower than the table's last row, or its parameters and
// optimizer state alone do not fit, nothing else of the group is priced,
// as recomputing, offloading and more microbatches only add time in the
// model. Those plans without remat go in waves (priceNones): the wave's
// shardings are propagated, family by family (meshes of the same axes,
// which may share a propagation) on the context's threads (boundAhead),
// and bound each plan's time from below by its matrix products' FLOPs
// alone (computeShardedProductFlops); the plans the table so far does not
// rule out are partitioned on the threads (partitionAhead), each on a copy
// of its own, and priced in order, but for those whose bound exceeds the
// table's last row by then, whose groups are not priced.
// Plans whose memory does not fit the device are dropped, as are
// those that do not partition; the rest are ranked by predicted step time,
// then by fewer bytes of memory, then in enumeration order, so the same
// input always gives the same table.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_PASSES_PLANSEARCH_H
#define SD_LIB_PASSES_PLANSEARCH_H

#include "PlanBlocks.h"
#include "PlanRules.h"
#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/StepTime.h"
#include "sd/Passes/Passes.h"
#include "sd/Passes/ShardingPropagation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace mlir::sd::planner {

namespace detail {
/// While the work ahead runs on threads (PlanAhead.cpp): whether this
/// thread works for it, and where the first error of the work this thread
/// does goes (Search::quietly).
extern thread_local bool routed;
extern thread_local std::string *routedError;
} // namespace detail

/// One candidate: its meshes, rules, attention, remat policy and
/// microbatches, and what it costs.
struct Plan {
  std::string ici, dcn;
  /// Into Search::rulesChoices.
  const RulesChoice *rules;
  ::sd::AttentionKind attention;
  ::sd::RematPolicyKind remat;
  /// Gradient accumulation: microbatches a step runs.
  int64_t accum = 1;
  /// Devices per axis (data, fsdp, context, tensor) inside a host, and
  /// (data, fsdp) across hosts.
  std::vector<int64_t> inside, across;
  /// `ici` and `dcn` as one mesh.
  ::sd::MeshSpec meshSpec;
  /// Set once priced.
  std::optional<StepTimePrediction> time;
  std::string error;
  /// (Plans without remat) A lower bound on the step time of every plan of
  /// the group: its matrix products' FLOPs at the profile's fastest rates.
  double lowerBound = 0;
  /// Whether lowerBound ruled out the group before its plan without remat
  /// was priced.
  bool boundedOut = false;

  std::string mesh() const { return dcn.empty() ? ici : ici + " | " + dcn; }
  /// The plans that differ only in remat policy and accumulation share it.
  std::string group() const {
    return mesh() + " " + rules->rules.name + " " +
           std::string(::sd::attentionKindName(attention));
  }
  bool offloads() const {
    return remat == ::sd::RematPolicyKind::OffloadMatmulWithoutBatch ||
           remat == ::sd::RematPolicyKind::HiddenStateWithOffload;
  }
};

inline constexpr const char *kAxes[] = {"data", "fsdp", "context", "tensor"};

/// The most microbatches the search tries: each is one more copy of the
/// step's body to price.
inline constexpr int64_t kMaxAccumulation = 8;

/// The global batch `base` asks for, or `module`'s default; 0 when neither
/// says.
int64_t programBatch(ModuleOp module, const PipelineOptions &base);

/// The search: candidates, each priced, the fitting ones ranked.
class Search {
public:
  Search(ModuleOp module, const PipelineOptions &base,
         const PlanOptions &options)
      : module(module), base(base), options(options) {}

  /// Prices every candidate; false after an error at the module's location
  /// when the devices do not split over the hosts, or when a plan's lower
  /// bound exceeds its price (a bug: the pruning rests on it).
  bool runSearch();
  /// After runSearch: an error at the module's location saying why no plan
  /// fits, when none does.
  LogicalResult checkSomeFit() const;

  double memory() const {
    return options.deviceMemory > 0 ? double(options.deviceMemory)
                                    : options.profile.device.memoryBytes;
  }

  std::vector<Plan> plans;
  std::vector<const Plan *> ranked;
  /// The step times of the ranked plans.
  std::multiset<double> fitting;
  int64_t noPartition = 0, tooLarge = 0;
  /// Not priced: remat policies of groups where NONE fits, and those that
  /// keep more than FULL where FULL does not fit.
  int64_t prunedFits = 0, prunedTooLarge = 0;
  /// Not priced: remat policies of groups where NONE already takes longer
  /// than the table's last row.
  int64_t prunedSlower = 0;
  /// Not priced: remat policies of groups whose NONE does not partition.
  int64_t prunedNoPartition = 0;
  /// Not priced: remat policies of groups where the parameters and
  /// optimizer state alone exceed the device memory.
  int64_t prunedState = 0;
  /// Not priced: every plan of the groups whose lower bound already
  /// exceeds the table's last row.
  int64_t prunedBound = 0;
  int64_t priced = 0;
  /// The first plan in enumeration order that did not partition, and why.
  std::string firstError;
  const Plan *firstFailed = nullptr;
  const Plan *smallest = nullptr;
  /// The global batch (the one asked for, or the program's default; 0
  /// when neither says).
  int64_t globalBatch = 0;
  /// The rules the plans name (stable addresses).
  std::deque<RulesChoice> rulesChoices;
  /// The repeated blocks priced once (none with options.wholeProgram, nor
  /// with gradient buckets: see bucketsPriceWhole).
  std::vector<BlockChain> chains;
  /// Whether the gradient buckets (--bucket-cap-mb) made the search price
  /// every candidate's whole program: they do not line up with the blocks,
  /// so a program's counts do not grow by one block's with each block.
  bool bucketsPriceWhole() const {
    return base.bucketBytes > 0 && !options.wholeProgram;
  }

private:
  void enumerate();
  /// With chains: the sample copy of the module.
  void makeBlockCopies();
  /// Erases the block copies and the prepared training steps.
  void eraseCopies();
  /// The gradient accumulations to try with `rules` on `mesh`: those the
  /// flags name, or 1 and the powers of two up to kMaxAccumulation that
  /// leave every device the batch is split over whole microbatches.
  std::vector<int64_t> accumulations(const ::sd::MeshSpec &mesh,
                                     const ::sd::LogicalAxisRules &rules) const;
  /// The pipeline that prices `plan`.
  PipelineOptions variantOf(const Plan &plan) const;
  void price(Plan &plan);
  /// Prices `plan` and files it: ranked, too large or not partitioned.
  void priceOne(Plan &plan);
  /// After every group's NONE: the rest of `group` that may still matter.
  void priceGroup(const std::vector<Plan *> &group);
  /// Whether `plan`'s parameters and optimizer state alone rule out the
  /// rest of its group.
  bool stateRulesOut(const Plan &plan) const;
  /// The --plan-top-th best time that fits so far (infinity before).
  double bound() const;
  /// `group`'s plan without remat in its first accumulation, if it has one.
  static Plan *noneOf(const std::vector<Plan *> &group);
  /// A partition the search will ask for.
  struct PartitionJob;
  /// What a partitioned report is kept by: the prepared step, the rules and
  /// the mesh axes with their whole sizes (see `partitioned`).
  using PartitionKey = std::tuple<Operation *, std::string, std::string>;
  /// Prices the groups' plans without remat (`nones`) unit by unit (the
  /// plans of one attention, rule set and set of mesh axes, in order), in
  /// waves of units: the wave's shardings propagated and its plans bounded
  /// (boundAhead), those the table so far does not rule out partitioned
  /// (partitionAhead), then each priced but for those whose bound exceeds
  /// the table's last row by then: their groups are bounded out.
  void priceNones(ArrayRef<Plan *> nones);
  /// The partitions `plans` will ask for that are not made yet (their steps
  /// built first, one by one), in the order pricing them would make them.
  std::vector<PartitionJob> pendingPartitions(ArrayRef<Plan *> plans);
  /// Propagates the shardings of each of `jobs` (or finds its family's
  /// propagation that its mesh answers alike), family by family and on the
  /// context's threads when it has them, keeping every propagated program
  /// for the partitions, and sets each job's `flops`.
  void boundAhead(std::vector<PartitionJob> &jobs);
  /// `plan`'s lower bound from its copies' jobs (`flops`), 0 where one has
  /// none.
  double lowerBoundOf(const Plan &plan,
                      const std::map<PartitionKey, const PartitionJob *> &jobs);
  /// Makes `jobs` family by family (a family's propagated programs are
  /// dropped after its last), in parallel on the context's threads when it
  /// has them, on this one otherwise; the reports are those pricing one by
  /// one would make. Nothing with options.wholeProgram: each is then made
  /// when first asked for.
  void partitionAhead(std::vector<PartitionJob> &jobs);
  /// Runs `work` on each job of `families` (lists of one family's jobs, in
  /// order), each list on one thread, with each thread's diagnostics routed
  /// to its job's error (quietly).
  void perFamily(ArrayRef<std::vector<PartitionJob *> *> families,
                 function_ref<void(PartitionJob &)> work);
  /// Loads the dialects `jobs`' mesh pipelines need (threads only read the
  /// context).
  void loadDialects(ArrayRef<PartitionJob *> jobs);
  /// `program`'s training step for `variant` (its attention, remat policy
  /// and accumulation), built on first use; failure with why in `error`.
  FailureOr<ModuleOp> preparedStep(ModuleOp program,
                                   const PipelineOptions &variant,
                                   std::string &error);
  static PartitionKey partitionKey(ModuleOp step,
                                   const PipelineOptions &variant,
                                   const ::sd::MeshSpec &mesh);
  /// The report of `program`'s training step under `variant` (whose mesh
  /// is `mesh`), or failure with the first error in `error`.
  FailureOr<CostReport> report(ModuleOp program, const PipelineOptions &variant,
                               const ::sd::MeshSpec &mesh, std::string &error);
  /// The report of `variant`'s mesh pipeline on a copy of `step` (a
  /// prepared training step) for `mesh`: the propagation of a mesh its
  /// family already propagated alike is reused (`families`).
  FailureOr<CostReport> partition(ModuleOp step, const PipelineOptions &variant,
                                  const ::sd::MeshSpec &mesh,
                                  std::string &error);
  /// A new propagation of a copy of `step` for `variant`, with the size
  /// comparisons it made in `queries`.
  FailureOr<ModuleOp> propagate(ModuleOp step, const PipelineOptions &variant,
                                std::vector<uint64_t> &queries,
                                std::string &error);
  /// Meshes whose propagation may be shared: the prepared step, the rules
  /// and the mesh's axis names.
  using FamilyKey = std::tuple<Operation *, std::string, std::string>;
  static FamilyKey familyKey(ModuleOp step, const PipelineOptions &variant,
                             const ::sd::MeshSpec &mesh);
  /// The report of the pipeline `build` makes, run on a copy of `program`.
  FailureOr<CostReport>
  pipelineReport(ModuleOp program, function_ref<void(OpPassManager &)> build,
                 std::string &error);
  /// The same on `copy` itself (detached), which it erases.
  FailureOr<CostReport> ownedReport(ModuleOp copy,
                                    function_ref<void(OpPassManager &)> build,
                                    std::string &error);
  /// The report of `copy`'s training step; erases `copy`.
  FailureOr<CostReport> costReport(ModuleOp copy, std::string &error);
  /// A pass manager without the verifier.
  std::unique_ptr<PassManager> newPassManager();
  /// Runs `work` with its diagnostics caught: on failure the first error,
  /// or `otherwise`, in `error`.
  LogicalResult quietly(function_ref<LogicalResult()> work, std::string &error,
                        StringRef otherwise);
  /// Runs `pm` on `program` with its errors caught: the first in `error`.
  LogicalResult run(PassManager &pm, ModuleOp program, std::string &error);

  /// Mutable: an op handle's queries are not const methods.
  mutable ModuleOp module;
  PipelineOptions base;
  PlanOptions options;
  /// With chains: the sample, a copy of the module (nested in it while the
  /// search runs) with every chain cut to kBaseBlocks + 1 marked blocks
  /// (keepSampleBlocks).
  ModuleOp sampleBlocks;
  /// What the mesh-free part of the pipeline (buildMeshFreePipeline) made
  /// of a program for one attention strategy and remat policy: its inlined
  /// training step (nested in the module while the search runs), which
  /// every mesh copies; or why it failed.
  struct Prepared {
    ModuleOp step;
    std::string error;
  };
  std::map<std::tuple<Operation *, ::sd::AttentionKind, ::sd::RematPolicyKind,
                      int64_t>,
           Prepared>
      prepared;
  /// A partitioned training step's report, or why there is none.
  struct Partitioned {
    FailureOr<CostReport> report = failure();
    std::string error;
  };
  /// By prepared step, rules and the mesh's axes with their whole sizes:
  /// meshes that only split an axis differently between the devices of a
  /// host and the hosts partition alike (no pass before the cost model
  /// reads an axis's DCN part), so each is partitioned once and its report
  /// priced with each such mesh.
  std::map<PartitionKey, Partitioned> partitioned;
  struct PartitionJob {
    PartitionKey key;
    ModuleOp step;
    PipelineOptions variant;
    ::sd::MeshSpec mesh;
    Partitioned done;
    /// Which of the plan's programs (the sample, or the whole program) it
    /// partitions, and the partition of the program before, which pricing
    /// needs to have succeeded first.
    int64_t program = 0;
    std::optional<PartitionKey> after;
    bool ran = false;
    /// The matrix products' FLOPs a device runs (boundAhead), where the
    /// shardings propagated: with chains, the whole model's, extrapolated
    /// from the sample's.
    std::optional<ProductFlops> flops;
  };
  /// The propagated programs of a family (FamilyKey), each with the mesh
  /// sizes it was propagated on and the comparisons of them the
  /// propagation made (sd.size_queries): it reads a mesh's sizes only
  /// through those, so a mesh that answers each alike gets the same
  /// shardings, and partitions a copy of that program with its own mesh op
  /// instead of propagating.
  struct Propagated {
    propagation::MeshShape mesh;
    std::vector<uint64_t> queries;
    ModuleOp module;
  };
  struct Family {
    std::vector<Propagated> propagated;
    /// The partitions of the family priceNones listed that are not made
    /// yet: the last one keeps no propagated program.
    int64_t pending = 0;
  };
  std::map<FamilyKey, Family> families;
  /// Whether a priced plan's time came out below its lower bound.
  bool boundBroken = false;
  /// While partitionAhead runs jobs on threads: every partition copies a
  /// propagation of its family's (kept by boundAhead), and none changes the
  /// families.
  bool sharedPropagations = false;
  /// Erases `family`'s propagated programs.
  static void dropPropagated(Family &family);
  /// `family`'s propagation that `shape` answers alike (the same shardings
  /// on its sizes), or its end.
  static std::vector<Propagated>::iterator
  findAlike(Family &family, const propagation::MeshShape &shape);

public:
  /// How many programs the search needed the shardings of (bounded or
  /// partitioned), and for how many it propagated them.
  std::atomic<int64_t> sharded{0}, propagations{0};
};

} // namespace mlir::sd::planner

#endif // SD_LIB_PASSES_PLANSEARCH_H
