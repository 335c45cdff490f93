//===- Plan.cpp - sd-plan: the plans of a device count, priced ------------===//
//
// The planner's search: for a device count (and hosts), every mesh that
// factors the devices over `data`, `fsdp`, `context` and `tensor` inside a
// host (and over `data` and `fsdp` across hosts), with the logical axis
// rules and their variants (PlanRules.h), each attention strategy, remat
// policy and gradient accumulation. The training step of each attention,
// remat policy and accumulation is built once, before any mesh
// (buildMeshFreePipeline); each mesh and rule set partitions a copy of it
// (buildMeshPipeline), and the step-time model prices it on a hardware
// profile. A model whose blocks repeat (a chain of calls to one block
// function) is priced from copies that keep two blocks of each chain and
// three of one, extrapolated to the whole (PlanBlocks.h). Each group (mesh,
// rules, attention) prices its plan without remat first: where it fits, or
// is already slower than the table's last row, nothing else of the group
// is priced, as recomputing, offloading and more microbatches only add time
// in the model. Plans whose memory does not fit the device are dropped, as
// are those that do not partition; the rest are ranked by predicted step
// time, then by fewer bytes of memory, then in enumeration order, so the
// same input always gives the same table.
//
//===----------------------------------------------------------------------===//

#include "PlanBlocks.h"
#include "PlanRules.h"
#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/Report.h"
#include "sd/Analysis/StepTime.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::sd;

namespace {

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
  /// Set once priced.
  std::optional<StepTimePrediction> time;
  std::string error;

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

constexpr const char *kAxes[] = {"data", "fsdp", "context", "tensor"};

/// The most microbatches the search tries: each is one more copy of the
/// step's body to price.
constexpr int64_t kMaxAccumulation = 8;

/// The global batch `base` asks for, or `module`'s default; 0 when neither
/// says.
int64_t programBatch(ModuleOp module, const PipelineOptions &base) {
  int64_t batch = base.batch;
  if (batch <= 0)
    module.walk([&](func::FuncOp func) {
      if (auto attr = func->getAttrOfType<IntegerAttr>(
              SDDialect::kDefaultBatchAttrName))
        batch = attr.getInt();
    });
  return std::max<int64_t>(batch, 0);
}

/// Every way of writing `n` as an ordered product over `axes` axes (sizes
/// >= 1), in a fixed order.
void factorizations(int64_t n, size_t axes, std::vector<int64_t> &prefix,
                    std::vector<std::vector<int64_t>> &out) {
  if (prefix.size() + 1 == axes) {
    prefix.push_back(n);
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  for (int64_t f = 1; f <= n; ++f) {
    if (n % f != 0)
      continue;
    prefix.push_back(f);
    factorizations(n / f, axes, prefix, out);
    prefix.pop_back();
  }
}

/// The search: candidates, each priced, the fitting ones ranked.
class Search {
public:
  Search(ModuleOp module, const PipelineOptions &base,
         const PlanOptions &options)
      : module(module), base(base), options(options) {}

  /// Prices every candidate; false after an error at the module's location
  /// when the devices do not split over the hosts.
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
  int64_t priced = 0;
  std::string firstError;
  const Plan *smallest = nullptr;
  /// The global batch (the one asked for, or the program's default; 0
  /// when neither says).
  int64_t globalBatch = 0;
  /// The rules the plans name (stable addresses).
  std::deque<RulesChoice> rulesChoices;
  /// The repeated blocks priced once (none with options.wholeProgram).
  std::vector<BlockChain> chains;

private:
  void enumerate();
  /// With chains: the copies of the module with fewer blocks.
  void makeBlockCopies();
  /// Erases the block copies and the prepared training steps.
  void eraseCopies();
  /// What a prepared training step is made for: attention, remat policy
  /// and microbatches.
  using PreparedKind =
      std::tuple<::sd::AttentionKind, ::sd::RematPolicyKind, int64_t>;
  /// Erases the prepared training steps of `kind` (of every block copy)
  /// and the reports partitioned from them.
  void releasePrepared(const PreparedKind &kind);
  /// The gradient accumulations to try with `rules` on `mesh`: those the
  /// flags name, or 1 and the powers of two up to kMaxAccumulation that
  /// leave every device the batch is split over whole microbatches.
  std::vector<int64_t> accumulations(const ::sd::MeshSpec &mesh,
                                     const ::sd::LogicalAxisRules &rules) const;
  void price(Plan &plan);
  /// The report of `program`'s training step under `variant`, or failure
  /// with the first error in `error`.
  FailureOr<CostReport> report(ModuleOp program, const PipelineOptions &variant,
                               std::string &error);
  /// The report of `variant`'s mesh pipeline on a copy of `step` (a
  /// prepared training step).
  FailureOr<CostReport> partition(ModuleOp step, const PipelineOptions &variant,
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
  /// With chains: copies of the module (nested in it while the search
  /// runs) with every chain cut to kBaseBlocks blocks, and per chain one
  /// with that chain at one more.
  ModuleOp baseBlocks;
  std::vector<ModuleOp> moreBlocks;
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
  std::map<std::tuple<Operation *, std::string, std::string>, Partitioned>
      partitioned;
};

void Search::enumerate() {
  ::sd::LogicalAxisRules baseRules =
      base.rules ? *base.rules : *::sd::presetRules("dit");
  std::vector<LogicalUse> uses = collectLogicalUses(module);
  int64_t perHost = options.devices / options.hosts;
  std::vector<std::vector<int64_t>> ici, dcn;
  std::vector<int64_t> prefix;
  factorizations(perHost, 4, prefix, ici);
  // Across hosts: data and fsdp (MaxDiffusion's dcn_* axes in practice).
  if (options.hosts > 1)
    factorizations(options.hosts, 2, prefix, dcn);
  else
    dcn.push_back({1, 1});
  std::vector<::sd::RematPolicyKind> remats = options.remats;
  if (remats.empty())
    remats = {::sd::RematPolicyKind::None,
              ::sd::RematPolicyKind::Full,
              ::sd::RematPolicyKind::MatmulWithoutBatch,
              ::sd::RematPolicyKind::FluxOptimized,
              ::sd::RematPolicyKind::OffloadMatmulWithoutBatch,
              ::sd::RematPolicyKind::HiddenStateWithOffload};
  // NONE first, then FULL: where NONE fits no other policy is priced, and
  // where FULL does not, no policy that keeps more does.
  std::stable_partition(remats.begin(), remats.end(), [](auto kind) {
    return kind == ::sd::RematPolicyKind::Full;
  });
  std::stable_partition(remats.begin(), remats.end(), [](auto kind) {
    return kind == ::sd::RematPolicyKind::None;
  });
  // Without attention in the program there is nothing to choose.
  bool attends = false;
  module.walk([&](AttentionOp) {
    attends = true;
    return WalkResult::interrupt();
  });
  for (const std::vector<int64_t> &across : dcn)
    for (const std::vector<int64_t> &inside : ici) {
      std::vector<std::string> iciAxes, dcnAxes;
      for (size_t a = 0; a < 4; ++a) {
        bool acrossHosts = a < 2 && across[a] > 1;
        if (inside[a] > 1 || acrossHosts)
          iciAxes.push_back(std::string(kAxes[a]) + ":" +
                            std::to_string(inside[a]));
        if (acrossHosts)
          dcnAxes.push_back(std::string(kAxes[a]) + ":" +
                            std::to_string(across[a]));
      }
      if (iciAxes.empty())
        iciAxes.push_back("data:1");
      // Ring and Ulysses differ from flash only where the sequence is split
      // (context > 1).
      std::vector<::sd::AttentionKind> attentions = options.attentions;
      if (attentions.empty() && !attends)
        attentions = {base.tileAttention ? base.tileAttention->attention
                                         : ::sd::AttentionKind::DotProduct};
      if (attentions.empty()) {
        attentions = {::sd::AttentionKind::DotProduct,
                      ::sd::AttentionKind::Flash};
        if (inside[2] > 1)
          attentions.insert(attentions.end(), {::sd::AttentionKind::Ring,
                                               ::sd::AttentionKind::Ulysses});
      }
      std::string iciSpec = llvm::join(iciAxes, ","),
                  dcnSpec = llvm::join(dcnAxes, ",");
      absl::StatusOr<::sd::MeshSpec> mesh = ::sd::parseMesh(iciSpec, dcnSpec);
      if (!mesh.ok())
        continue;
      for (RulesChoice &choice :
           ruleVariants(baseRules, *mesh, uses, options.ruleVariants)) {
        const RulesChoice *rules = &rulesChoices.emplace_back(choice);
        std::vector<int64_t> accums = accumulations(*mesh, rules->rules);
        for (::sd::AttentionKind attention : attentions)
          for (int64_t accum : accums)
            for (::sd::RematPolicyKind remat : remats)
              plans.push_back(Plan{iciSpec, dcnSpec, rules, attention, remat,
                                   accum, inside, across});
      }
    }
}

std::vector<int64_t>
Search::accumulations(const ::sd::MeshSpec &mesh,
                      const ::sd::LogicalAxisRules &rules) const {
  if (!options.accumulations.empty())
    return options.accumulations;
  // Microbatches of equal size on every device the batch is split over.
  int64_t shards = 1;
  absl::StatusOr<std::vector<std::vector<std::string>>> batchAxes =
      rules.resolve(mesh, "latents", {"batch"}, {-1});
  if (batchAxes.ok())
    for (const std::string &axis : batchAxes->front())
      if (const ::sd::MeshAxis *found = mesh.findAxis(axis))
        shards *= found->size();
  std::vector<int64_t> out = {1};
  for (int64_t k = 2; k <= kMaxAccumulation; k *= 2)
    if (globalBatch > 0 && globalBatch % (k * shards) == 0)
      out.push_back(k);
  return out;
}

LogicalResult Search::quietly(function_ref<LogicalResult()> work,
                              std::string &error, StringRef otherwise) {
  std::string first;
  LogicalResult result = failure();
  {
    ScopedDiagnosticHandler quiet(module.getContext(), [&](Diagnostic &diag) {
      if (first.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        first = diag.str();
      return success();
    });
    result = work();
  }
  if (failed(result))
    error = first.empty() ? otherwise.str() : first;
  return result;
}

LogicalResult Search::run(PassManager &pm, ModuleOp program,
                          std::string &error) {
  return quietly([&] { return pm.run(program); }, error, "the pipeline failed");
}

std::unique_ptr<PassManager> Search::newPassManager() {
  // Without the verifier after each pass (a third of the time here): the
  // same pipelines are verified wherever sd compiles a program.
  auto pm = std::make_unique<PassManager>(module.getContext());
  pm->enableVerifier(false);
  return pm;
}

FailureOr<CostReport> Search::report(ModuleOp program,
                                     const PipelineOptions &variant,
                                     std::string &error) {
  if (options.wholeProgram) {
    // The reference: the default pipeline, as sdopt and sdrun run it.
    ModuleOp copy = copyIntoNestedModule(program);
    std::unique_ptr<PassManager> pm = newPassManager();
    buildDefaultPipeline(*pm, variant);
    if (failed(run(*pm, copy, error))) {
      copy.erase();
      return failure();
    }
    return costReport(copy, error);
  }
  // The training step is built once per program, attention, remat policy
  // and accumulation; each mesh partitions a copy of it.
  auto key = std::make_tuple(program.getOperation(),
                             variant.tileAttention
                                 ? variant.tileAttention->attention
                                 : ::sd::AttentionKind::DotProduct,
                             variant.training.remat.policy,
                             variant.training.step.gradAccum);
  auto [it, inserted] = prepared.try_emplace(key);
  Prepared &step = it->second;
  if (inserted) {
    step.step = copyIntoNestedModule(program);
    std::unique_ptr<PassManager> pm = newPassManager();
    buildMeshFreePipeline(*pm, variant);
    if (failed(run(*pm, step.step, step.error))) {
      step.step.erase();
      step.step = nullptr;
    }
  }
  if (!step.step) {
    error = step.error;
    return failure();
  }
  absl::StatusOr<::sd::MeshSpec> mesh =
      ::sd::parseMesh(variant.mesh, variant.dcnMesh);
  if (!mesh.ok())
    return partition(step.step, variant, error);
  std::string sizes;
  for (const ::sd::MeshAxis &axis : mesh->axes())
    sizes += axis.name + ":" + std::to_string(axis.size()) + ",";
  auto [found, first] = partitioned.try_emplace(
      {step.step.getOperation(), variant.rules ? variant.rules->name : "",
       sizes});
  Partitioned &done = found->second;
  if (first)
    done.report = partition(step.step, variant, done.error);
  if (failed(done.report)) {
    error = done.error;
    return failure();
  }
  CostReport result = *done.report;
  result.mesh = *mesh;
  result.meshSpec = mesh->toString();
  return result;
}

FailureOr<CostReport> Search::partition(ModuleOp step,
                                        const PipelineOptions &variant,
                                        std::string &error) {
  ModuleOp copy = copyIntoNestedModule(step);
  std::unique_ptr<PassManager> pm = newPassManager();
  buildMeshPipeline(*pm, variant);
  if (failed(run(*pm, copy, error))) {
    copy.erase();
    return failure();
  }
  return costReport(copy, error);
}

FailureOr<CostReport> Search::costReport(ModuleOp copy, std::string &error) {
  FailureOr<CostReport> result = failure();
  (void)quietly(
      [&] {
        if (func::FuncOp func = findReportFunction(copy, "train_step"))
          result = computeCostReport(func, LayoutChoice::Auto);
        return LogicalResult(result);
      },
      error, "the pipeline made no @train_step");
  copy.erase();
  return result;
}

void Search::price(Plan &plan) {
  PipelineOptions variant = base;
  variant.mesh = plan.ici;
  variant.dcnMesh = plan.dcn;
  variant.devices = 0;
  variant.processes = 0;
  variant.train = true;
  variant.partition = true;
  variant.propagate = true;
  variant.recordProvenance = false;
  variant.explain.clear();
  variant.training.remat.policy = plan.remat;
  variant.training.step.gradAccum = plan.accum;
  variant.rules = plan.rules->rules;
  // The microbatch is the global batch over the accumulation.
  if (plan.accum > 1)
    variant.batch = globalBatch;
  if (plan.attention == ::sd::AttentionKind::DotProduct) {
    variant.tileAttention.reset();
  } else {
    // The base's block sizes, if it had any.
    TileAttentionOptions &tile = variant.tileAttention
                                     ? *variant.tileAttention
                                     : variant.tileAttention.emplace();
    tile.attention = plan.attention;
  }
  FailureOr<CostReport> whole = failure();
  if (chains.empty()) {
    whole = report(module, variant, plan.error);
  } else {
    FailureOr<CostReport> one = report(baseBlocks, variant, plan.error);
    std::vector<CostReport> samples;
    for (ModuleOp more : moreBlocks) {
      if (failed(one))
        break;
      FailureOr<CostReport> sample = report(more, variant, plan.error);
      if (failed(sample)) {
        one = failure();
        break;
      }
      samples.push_back(std::move(*sample));
    }
    if (succeeded(one))
      whole = extrapolateBlocks(*one, samples, chains);
  }
  if (failed(whole))
    return;
  plan.time = predictStepTime(*whole, options.profile);
}

void Search::makeBlockCopies() {
  if (chains.empty())
    return;
  baseBlocks = copyIntoNestedModule(module);
  keepBlocks(baseBlocks, chains,
             std::vector<int64_t>(chains.size(), kBaseBlocks));
  for (size_t c = 0; c < chains.size(); ++c) {
    std::vector<int64_t> keep(chains.size(), kBaseBlocks);
    keep[c] = kBaseBlocks + 1;
    moreBlocks.push_back(copyIntoNestedModule(module));
    keepBlocks(moreBlocks.back(), chains, keep);
  }
}

void Search::releasePrepared(const PreparedKind &kind) {
  for (auto it = prepared.begin(); it != prepared.end();) {
    const auto &[program, attention, remat, accum] = it->first;
    if (PreparedKind(attention, remat, accum) != kind) {
      ++it;
      continue;
    }
    // A later module may take the erased one's address: no report stays
    // keyed by it.
    if (ModuleOp step = it->second.step) {
      for (auto p = partitioned.begin(); p != partitioned.end();)
        p = std::get<0>(p->first) == step.getOperation() ? partitioned.erase(p)
                                                         : std::next(p);
      step.erase();
    }
    it = prepared.erase(it);
  }
}

void Search::eraseCopies() {
  for (auto &[key, step] : prepared)
    if (step.step)
      step.step.erase();
  prepared.clear();
  partitioned.clear();
  if (baseBlocks)
    baseBlocks.erase();
  for (ModuleOp more : moreBlocks)
    more.erase();
  moreBlocks.clear();
}

bool Search::runSearch() {
  if (options.devices <= 0 || options.hosts <= 0 ||
      options.devices % options.hosts != 0) {
    // At the module's location, without the module attached (which the
    // diagnostic would print whole).
    emitError(module.getLoc())
        << "planning needs devices divisible by the hosts, not "
        << options.devices << " devices on " << options.hosts << " hosts";
    return false;
  }
  globalBatch = programBatch(module, base);
  enumerate();
  if (!options.wholeProgram)
    chains = findBlockChains(module);
  makeBlockCopies();
  // A group (mesh, rules and attention) is priced without remat in its
  // first accumulation first, every group before any other plan: in the
  // step-time model recomputing, offloading and more microbatches only add
  // time, so that plan's time bounds the group's. Where NONE
  // fits, the group's other policies are not priced; nor are they where
  // NONE already takes longer than the table's last row so far (groups in
  // order of NONE's time, so the bound tightens early). Where FULL does not
  // fit, the policies that recompute less keep more; only the offloading
  // ones, which move what they keep to the host, may fit. Where the
  // parameters and optimizer state alone do not fit, nothing of the group
  // does.
  std::vector<std::vector<Plan *>> groups;
  for (Plan &plan : plans) {
    if (groups.empty() || groups.back().front()->group() != plan.group())
      groups.emplace_back();
    groups.back().push_back(&plan);
  }
  std::multiset<double> fitting;
  auto bound = [&] {
    if (options.top == 0 || fitting.size() < options.top)
      return std::numeric_limits<double>::infinity();
    return *std::next(fitting.begin(), options.top - 1);
  };
  auto priceOne = [&](Plan &plan) {
    price(plan);
    ++priced;
    if (!plan.time) {
      ++noPartition;
      if (firstError.empty())
        firstError = plan.mesh() + ", " +
                     std::string(::sd::attentionKindName(plan.attention)) +
                     ", " + std::string(::sd::rematPolicyName(plan.remat)) +
                     ": " + plan.error;
      return;
    }
    if (!smallest || plan.time->neededBytes < smallest->time->neededBytes)
      smallest = &plan;
    if (double(plan.time->neededBytes) > memory()) {
      ++tooLarge;
      return;
    }
    fitting.insert(plan.time->stepSeconds);
    ranked.push_back(&plan);
  };
  auto none = [](const std::vector<Plan *> &group) -> Plan * {
    Plan *first = group.front();
    return first->remat == ::sd::RematPolicyKind::None ? first : nullptr;
  };
  for (const std::vector<Plan *> &group : groups)
    if (Plan *plan = none(group))
      priceOne(*plan);
  // Fastest NONE first; the groups without NONE (the flags left it out)
  // last, in enumeration order.
  std::vector<const std::vector<Plan *> *> order;
  for (const std::vector<Plan *> &group : groups)
    order.push_back(&group);
  auto noneSeconds = [&](const std::vector<Plan *> *group) {
    Plan *plan = none(*group);
    return plan && plan->time ? plan->time->stepSeconds
                              : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(), [&](auto *a, auto *b) {
    return noneSeconds(a) < noneSeconds(b);
  });
  // A prepared training step is erased after the last group that may use
  // it, so that the search holds only the steps still needed.
  std::map<PreparedKind, size_t> lastUse;
  for (size_t i = 0; i < order.size(); ++i)
    for (Plan *plan : *order[i])
      lastUse[{plan->attention, plan->remat, plan->accum}] = i;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::vector<Plan *> *group = order[i];
    llvm::scope_exit release([&] {
      for (const auto &[kind, last] : lastUse)
        if (last == i)
          releasePrepared(kind);
    });
    Plan *first = none(*group);
    size_t rest = group->size() - (first ? 1 : 0);
    if (first && first->time && double(first->time->neededBytes) <= memory()) {
      prunedFits += int64_t(rest);
      continue;
    }
    // What does not partition (a mesh axis that does not divide what the
    // attention splits) does not partition with recomputation either.
    if (first && !first->time) {
      prunedNoPartition += int64_t(rest);
      continue;
    }
    // No remat policy and no microbatching shrinks the parameters and
    // their optimizer state: where they alone exceed the memory, nothing
    // in the group fits. While nothing fits anywhere, the group is kept
    // when it may still hold the smallest plan (the no-fit error names it).
    if (first && first->time &&
        double(first->time->stateBytes) > memory() &&
        (!ranked.empty() ||
         first->time->stateBytes >= smallest->time->neededBytes)) {
      prunedState += int64_t(rest);
      continue;
    }
    if (first && first->time && first->time->stepSeconds > bound()) {
      prunedSlower += int64_t(rest);
      continue;
    }
    // Per accumulation, as for the group: where NONE fits, neither the
    // other policies nor more microbatches (which only add time: smaller
    // products, parameters gathered once per microbatch) are priced.
    std::set<int64_t> fullTooLarge;
    int64_t noneFitsAt = std::numeric_limits<int64_t>::max();
    for (Plan *plan : *group) {
      if (plan == first)
        continue;
      if (plan->accum > noneFitsAt ||
          (plan->accum == noneFitsAt &&
           plan->remat != ::sd::RematPolicyKind::None)) {
        ++prunedFits;
        continue;
      }
      if (plan->remat != ::sd::RematPolicyKind::Full && !plan->offloads() &&
          plan->remat != ::sd::RematPolicyKind::None &&
          fullTooLarge.count(plan->accum)) {
        ++prunedTooLarge;
        continue;
      }
      if (first && first->time && first->time->stepSeconds > bound()) {
        ++prunedSlower;
        continue;
      }
      priceOne(*plan);
      if (!plan->time)
        continue;
      bool fits = double(plan->time->neededBytes) <= memory();
      if (plan->remat == ::sd::RematPolicyKind::Full && !fits)
        fullTooLarge.insert(plan->accum);
      if (plan->remat == ::sd::RematPolicyKind::None && fits)
        noneFitsAt = std::min(noneFitsAt, plan->accum);
    }
  }
  eraseCopies();
  // Ties in enumeration order (the plans' order in `plans`), whatever the
  // order they were priced in.
  std::sort(ranked.begin(), ranked.end(), [](const Plan *a, const Plan *b) {
    return std::tie(a->time->stepSeconds, a->time->neededBytes, a) <
           std::tie(b->time->stepSeconds, b->time->neededBytes, b);
  });
  return true;
}

LogicalResult Search::checkSomeFit() const {
  if (!ranked.empty())
    return success();
  InFlightDiagnostic diag = emitError(module.getLoc())
                            << "no plan fits " << options.devices
                            << " devices of " << formatBytes(int64_t(memory()));
  if (smallest) {
    // Sharded state scales as 1/devices: an estimate of the count that
    // would fit the smallest plan.
    double ratio = double(smallest->time->neededBytes) / memory();
    int64_t enough = int64_t(std::ceil(double(options.devices) * ratio));
    diag << ": the smallest (" << smallest->mesh() << ", attention "
         << ::sd::attentionKindName(smallest->attention) << ", remat "
         << ::sd::rematPolicyName(smallest->remat) << ") needs "
         << formatBytes(smallest->time->neededBytes) << " per device; about "
         << enough << " devices would fit it (its state split over more)";
  } else if (!firstError.empty()) {
    diag << ": none partitions (" << firstError << ")";
  }
  return failure();
}

class PlanPass : public PassWrapper<PlanPass, OperationPass<ModuleOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PlanPass)

  PlanPass(const PipelineOptions &base, const PlanOptions &plan,
           llvm::raw_ostream &os)
      : base(base), options(plan), os(os) {}

  StringRef getArgument() const override { return "sd-plan"; }
  StringRef getDescription() const override {
    return "Price the meshes, rules, attention strategies, remat policies "
           "and accumulations of a device count on a hardware profile and "
           "print the best plans";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<SDDialect>();
    OpPassManager pm(ModuleOp::getOperationName());
    PipelineOptions any = base;
    any.mesh = "data:2";
    any.partition = true;
    any.train = true;
    buildDefaultPipeline(pm, any);
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override;

private:
  /// Writes `plan` to options.outputPath as a run config.
  LogicalResult writeConfig(const Plan &plan);

  PipelineOptions base;
  PlanOptions options;
  llvm::raw_ostream &os;
};

void PlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  Search search(module, base, options);
  if (!search.runSearch())
    return signalPassFailure();
  const std::vector<Plan> &plans = search.plans;
  const std::vector<const Plan *> &ranked = search.ranked;
  os << "sd plan: " << options.devices << " devices (" << options.hosts
     << (options.hosts == 1 ? " host" : " hosts") << " of "
     << options.devices / options.hosts << ") of " << options.profile.name
     << ", device memory " << formatBytes(int64_t(search.memory())) << ": "
     << plans.size() << " candidates (meshes over data, fsdp, context and "
     << "tensor inside a host, data and fsdp across hosts; the rules and "
     << "their fsdp-seq and ctx-embed variants where they differ; attention "
     << "dot_product and flash, ring and ulysses where context splits the "
     << "sequence; remat NONE, FULL, MATMUL_WITHOUT_BATCH, FLUX_OPTIMIZED "
     << "and the two offload policies; 1, 2, 4 or 8 microbatches; or what "
        "the flags name)\n";
  if (!search.chains.empty()) {
    os << "repeated blocks priced once:";
    for (const BlockChain &chain : search.chains)
      os << " @" << chain.callee << " x" << chain.calls;
    os << " (each candidate from copies with " << kBaseBlocks
       << " blocks of each chain and " << kBaseBlocks + 1
       << " of one, extrapolated; --plan-whole-program prices the whole)\n";
  }
  if (failed(search.checkSomeFit()))
    return signalPassFailure();
  const StepTimePrediction &best = *ranked.front()->time;
  os << "  #  " << llvm::left_justify("mesh", 41)
     << llvm::left_justify("rules", 24) << llvm::left_justify("attention", 12)
     << llvm::left_justify("remat", 29) << llvm::left_justify("accum", 5)
     << llvm::right_justify("step", 11) << llvm::right_justify("compute", 11)
     << llvm::right_justify("comm", 11) << llvm::right_justify("memory", 11)
     << "   why it lost\n";
  for (size_t i = 0; i < ranked.size() && (options.top == 0 || i < options.top);
       ++i) {
    const Plan &plan = *ranked[i];
    const StepTimePrediction &t = *plan.time;
    std::string why;
    if (i > 0) {
      // The largest of its extra compute, exposed communication and host
      // traffic.
      std::pair<double, const char *> extra[] = {
          {t.computeSeconds() - best.computeSeconds(), " compute"},
          {(t.communicationSeconds - t.hiddenSeconds) -
               (best.communicationSeconds - best.hiddenSeconds),
           " communication"},
          {t.offloadSeconds - best.offloadSeconds, " offload"}};
      auto most = std::max_element(
          std::begin(extra), std::end(extra),
          [](const auto &a, const auto &b) { return a.first < b.first; });
      why = "+" + ::sd::formatSeconds(most->first) + most->second;
      if (t.stepSeconds == best.stepSeconds)
        why = "same time, more memory";
    }
    os << llvm::format("%3d  ", int(i + 1))
       << llvm::left_justify(plan.mesh(), 40) << " "
       << llvm::left_justify(plan.rules->shown, 23) << " "
       << llvm::left_justify(::sd::attentionKindName(plan.attention), 12)
       << llvm::left_justify(::sd::rematPolicyName(plan.remat), 29)
       << llvm::right_justify(std::to_string(plan.accum), 5)
       << llvm::right_justify(::sd::formatSeconds(t.stepSeconds), 11)
       << llvm::right_justify(::sd::formatSeconds(t.computeSeconds()), 11)
       << llvm::right_justify(
              ::sd::formatSeconds(t.communicationSeconds - t.hiddenSeconds), 11)
       << llvm::right_justify(formatBytes(t.neededBytes), 11)
       << (why.empty() ? "" : "   " + why) << "\n";
  }
  if (!options.outputPath.empty()) {
    if (failed(writeConfig(*ranked.front())))
      return signalPassFailure();
    os << "wrote the best plan to " << options.outputPath
       << " (sdrun --config=" << options.outputPath << ")\n";
  }
  os << "priced " << search.priced << ", ranked " << ranked.size()
     << "; not priced: " << search.prunedFits
     << " remat policies where NONE fits (recomputing and offloading only "
        "add time), "
     << search.prunedTooLarge
     << " that keep more than FULL where FULL does not fit, "
     << search.prunedSlower
     << " where NONE already takes longer than the table's last row, "
     << search.prunedNoPartition
     << " where NONE does not partition, " << search.prunedState
     << " where the parameters and optimizer state alone do not fit; "
        "dropped: "
     << search.tooLarge
     << " that do not fit the device memory, " << search.noPartition
     << " that do not partition";
  if (!search.firstError.empty())
    os << " (first: " << search.firstError << ")";
  os << "\n";
  markAllAnalysesPreserved();
}

LogicalResult PlanPass::writeConfig(const Plan &plan) {
  ModuleOp module = getOperation();
  int64_t batch = programBatch(module, base);
  std::error_code error;
  llvm::raw_fd_ostream out(options.outputPath, error);
  if (error) {
    emitError(module.getLoc())
        << "cannot write --plan-output file \"" << options.outputPath
        << "\": " << error.message();
    return failure();
  }
  const StepTimePrediction &t = *plan.time;
  out << "# sdopt --plan's best plan on " << options.profile.name << " for "
      << options.devices << " devices (" << options.hosts
      << (options.hosts == 1 ? " host" : " hosts") << "): predicted step "
      << ::sd::formatSeconds(t.stepSeconds) << ", "
      << formatBytes(t.neededBytes)
      << " per device.\n# Run it: sdrun MODEL --config=" << options.outputPath
      << "\n";
  for (size_t a = 0; a < 4; ++a)
    out << "ici_" << kAxes[a] << "_parallelism: " << plan.inside[a] << "\n";
  for (size_t a = 0; a < 2; ++a)
    out << "dcn_" << kAxes[a] << "_parallelism: " << plan.across[a] << "\n";
  // MaxDiffusion's global batch: per_device_batch_size x devices x
  // gradient_accumulation_steps.
  if (batch > 0)
    out << "per_device_batch_size: "
        << llvm::formatv("{0}",
                         double(batch) / double(options.devices * plan.accum))
        << "\n";
  out << "gradient_accumulation_steps: " << plan.accum << "\n";
  out << "attention: '" << ::sd::attentionKindName(plan.attention) << "'\n";
  out << "remat_policy: '" << ::sd::rematPolicyName(plan.remat) << "'\n";
  // The rules in full (a variant has no file of its own).
  out << "# " << plan.rules->rules.name << "\nlogical_axis_rules: [\n";
  for (const ::sd::LogicalAxisRule &rule : plan.rules->rules.rules) {
    out << "  ['" << rule.logicalName << "', [";
    llvm::interleave(
        rule.meshAxes, out,
        [&](const std::string &axis) { out << "'" << axis << "'"; }, ", ");
    out << "]],\n";
  }
  out << "]\n";
  return success();
}

} // namespace

FailureOr<PlanChoice> mlir::sd::choosePlan(ModuleOp module,
                                           const PipelineOptions &base,
                                           const PlanOptions &plan) {
  // Only the first row: the bound prunes the most.
  PlanOptions first = plan;
  first.top = 1;
  Search search(module, base, first);
  if (!search.runSearch() || failed(search.checkSomeFit()))
    return failure();
  const Plan &best = *search.ranked.front();
  PlanChoice choice;
  choice.mesh = best.ici;
  choice.dcnMesh = best.dcn;
  choice.rules = best.rules->rules.name;
  choice.accum = best.accum;
  choice.attention = best.attention;
  choice.remat = best.remat;
  choice.time = *best.time;
  choice.candidates = int64_t(search.plans.size());
  return choice;
}

std::unique_ptr<Pass> mlir::sd::createPlan(const PipelineOptions &base,
                                           const PlanOptions &plan,
                                           llvm::raw_ostream &os) {
  return std::make_unique<PlanPass>(base, plan, os);
}
