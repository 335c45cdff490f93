//===- PlanSearch.cpp - The planner's search ------------------------------===//
//
// See PlanSearch.h.
//
//===----------------------------------------------------------------------===//

#include "PlanSearch.h"

#include "sd/Analysis/Report.h"
#include "sd/IR/SDOps.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::planner;
using planner::detail::routed;
using planner::detail::routedError;

/// The global batch `base` asks for, or `module`'s default; 0 when neither
/// says.
int64_t planner::programBatch(ModuleOp module, const PipelineOptions &base) {
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
static void factorizations(int64_t n, size_t axes, std::vector<int64_t> &prefix,
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
                                   accum, inside, across, *mesh});
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
  if (routed) {
    // partitionAhead's handler catches this thread's diagnostics.
    std::string *outer = routedError;
    routedError = &first;
    result = work();
    routedError = outer;
  } else {
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

FailureOr<ModuleOp> Search::preparedStep(ModuleOp program,
                                         const PipelineOptions &variant,
                                         std::string &error) {
  auto key = std::make_tuple(
      program.getOperation(),
      variant.tileAttention ? variant.tileAttention->attention
                            : ::sd::AttentionKind::DotProduct,
      variant.training.remat.policy, variant.training.step.gradAccum);
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
  return step.step;
}

Search::PartitionKey Search::partitionKey(ModuleOp step,
                                          const PipelineOptions &variant,
                                          const ::sd::MeshSpec &mesh) {
  std::string sizes;
  for (const ::sd::MeshAxis &axis : mesh.axes())
    sizes += axis.name + ":" + std::to_string(axis.size()) + ",";
  return {step.getOperation(), variant.rules ? variant.rules->name : "", sizes};
}

FailureOr<CostReport> Search::report(ModuleOp program,
                                     const PipelineOptions &variant,
                                     const ::sd::MeshSpec &mesh,
                                     std::string &error) {
  // The reference: the default pipeline, as sdopt and sdrun run it.
  if (options.wholeProgram)
    return pipelineReport(
        program, [&](OpPassManager &pm) { buildDefaultPipeline(pm, variant); },
        error);
  // The training step is built once per program, attention, remat policy
  // and accumulation; each mesh partitions a copy of it.
  FailureOr<ModuleOp> step = preparedStep(program, variant, error);
  if (failed(step))
    return failure();
  auto [found, first] =
      partitioned.try_emplace(partitionKey(*step, variant, mesh));
  Partitioned &done = found->second;
  if (first)
    done.report = partition(*step, variant, mesh, done.error);
  if (failed(done.report)) {
    error = done.error;
    return failure();
  }
  CostReport result = *done.report;
  result.mesh = mesh;
  result.meshSpec = mesh.toString();
  return result;
}

FailureOr<CostReport>
Search::pipelineReport(ModuleOp program,
                       function_ref<void(OpPassManager &)> build,
                       std::string &error) {
  // Detached: partitions run in parallel (partitionAhead), and a nested
  // copy would change the module's body under the other threads.
  return ownedReport(copyIntoDetachedModule(program), build, error);
}

FailureOr<CostReport>
Search::ownedReport(ModuleOp copy, function_ref<void(OpPassManager &)> build,
                    std::string &error) {
  std::unique_ptr<PassManager> pm = newPassManager();
  build(*pm);
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
        func::FuncOp func = findReportFunction(copy, "train_step");
        if (func && chains.empty()) {
          result = computeCostReport(func, LayoutChoice::Auto);
        } else if (func) {
          // The sample's: the base and one block more of each chain.
          FailureOr<SampleReports> sample = computeSampleReports(
              func, LayoutChoice::Auto, int64_t(chains.size()));
          if (succeeded(sample))
            result = extrapolateSample(*sample, chains);
        }
        return LogicalResult(result);
      },
      error, "the pipeline made no @train_step");
  copy.erase();
  return result;
}

PipelineOptions Search::variantOf(const Plan &plan) const {
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
  return variant;
}

void Search::price(Plan &plan) {
  PipelineOptions variant = variantOf(plan);
  // With chains, the sample's report is the whole model's (costReport).
  FailureOr<CostReport> whole = report(chains.empty() ? module : sampleBlocks,
                                       variant, plan.meshSpec, plan.error);
  if (failed(whole))
    return;
  plan.time = predictStepTime(*whole, options.profile);
}

void Search::makeBlockCopies() {
  if (chains.empty())
    return;
  sampleBlocks = copyIntoNestedModule(module);
  keepSampleBlocks(sampleBlocks, chains);
}

void Search::eraseCopies() {
  for (auto &[key, step] : prepared)
    if (step.step)
      step.step.erase();
  prepared.clear();
  partitioned.clear();
  for (auto &[key, family] : families)
    dropPropagated(family);
  families.clear();
  if (sampleBlocks)
    sampleBlocks.erase();
  sampleBlocks = nullptr;
}

double Search::bound() const {
  if (options.top == 0 || fitting.size() < options.top)
    return std::numeric_limits<double>::infinity();
  return *std::next(fitting.begin(), options.top - 1);
}

void Search::priceOne(Plan &plan) {
  price(plan);
  ++priced;
  if (!plan.time) {
    ++noPartition;
    // The first in enumeration order, whatever the order of pricing.
    if (!firstFailed || &plan < firstFailed) {
      firstFailed = &plan;
      firstError = plan.mesh() + ", " +
                   std::string(::sd::attentionKindName(plan.attention)) + ", " +
                   std::string(::sd::rematPolicyName(plan.remat)) + ": " +
                   plan.error;
    }
    return;
  }
  if (!smallest ||
      std::make_pair(plan.time->neededBytes, static_cast<const Plan *>(&plan)) <
          std::make_pair(smallest->time->neededBytes, smallest))
    smallest = &plan;
  if (double(plan.time->neededBytes) > memory()) {
    ++tooLarge;
    return;
  }
  fitting.insert(plan.time->stepSeconds);
  ranked.push_back(&plan);
}

Plan *Search::noneOf(const std::vector<Plan *> &group) {
  Plan *first = group.front();
  return first->remat == ::sd::RematPolicyKind::None ? first : nullptr;
}

bool Search::stateRulesOut(const Plan &plan) const {
  // No remat policy and no microbatching shrinks the parameters and their
  // optimizer state: where they alone exceed the memory, nothing in the
  // plan's group fits. While nothing fits anywhere, the group is kept when
  // it may still hold the smallest plan (the no-fit error names it).
  return plan.time && double(plan.time->stateBytes) > memory() &&
         (!ranked.empty() ||
          plan.time->stateBytes >= smallest->time->neededBytes);
}

void Search::priceGroup(const std::vector<Plan *> &group) {
  Plan *first = noneOf(group);
  if (first && first->boundedOut) {
    prunedBound += int64_t(group.size());
    return;
  }
  size_t rest = group.size() - (first ? 1 : 0);
  if (first && first->time && double(first->time->neededBytes) <= memory()) {
    prunedFits += int64_t(rest);
    return;
  }
  // What does not partition (a mesh axis that does not divide what the
  // attention splits) does not partition with recomputation either.
  if (first && !first->time) {
    prunedNoPartition += int64_t(rest);
    return;
  }
  if (first && stateRulesOut(*first)) {
    prunedState += int64_t(rest);
    return;
  }
  if (first && first->time && first->time->stepSeconds > bound()) {
    prunedSlower += int64_t(rest);
    return;
  }
  // Per accumulation, as for the group: where NONE fits, neither the
  // other policies nor more microbatches (which only add time: smaller
  // products, parameters gathered once per microbatch) are priced.
  std::set<int64_t> fullTooLarge;
  int64_t noneFitsAt = std::numeric_limits<int64_t>::max();
  // Without NONE (the flags left it out), the first plan priced tells.
  bool stateTooLarge = false;
  for (Plan *plan : group) {
    if (plan == first)
      continue;
    if (stateTooLarge) {
      ++prunedState;
      continue;
    }
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
    stateTooLarge = stateRulesOut(*plan);
    bool fits = double(plan->time->neededBytes) <= memory();
    if (plan->remat == ::sd::RematPolicyKind::Full && !fits)
      fullTooLarge.insert(plan->accum);
    if (plan->remat == ::sd::RematPolicyKind::None && fits)
      noneFitsAt = std::min(noneFitsAt, plan->accum);
  }
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
  if (!options.wholeProgram && !bucketsPriceWhole())
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
  std::vector<Plan *> nones;
  for (const std::vector<Plan *> &group : groups)
    if (Plan *plan = noneOf(group))
      nones.push_back(plan);
  // Every NONE is priced: their partitions first, family by family and in
  // parallel where the context allows threads; then the prices, one by one
  // and in order, from those reports.
  priceNones(nones);
  if (boundBroken) {
    eraseCopies();
    return false;
  }
  // Fastest NONE first; the groups without NONE (the flags left it out)
  // last, in enumeration order.
  std::vector<const std::vector<Plan *> *> order;
  for (const std::vector<Plan *> &group : groups)
    order.push_back(&group);
  auto noneSeconds = [&](const std::vector<Plan *> *group) {
    Plan *plan = noneOf(*group);
    return plan && plan->time ? plan->time->stepSeconds
                              : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(), [&](auto *a, auto *b) {
    return noneSeconds(a) < noneSeconds(b);
  });
  for (const std::vector<Plan *> *group : order)
    priceGroup(*group);
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
