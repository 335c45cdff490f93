//===- Plan.cpp - sd-plan: meshes and remat policies priced ---------------===//
//
// The planner's search: for a device count (and hosts), every mesh that
// factors the devices over `data`, `fsdp`, `context` and `tensor` inside a
// host (and over `data` and `fsdp` across hosts), with each remat policy sd
// can price, runs the rest of the default pipeline (the training step,
// partitioned) on a copy of the module and prices it with the step-time
// model on a hardware profile. A model whose blocks repeat (a chain of
// calls to one block function) is priced from copies that keep two blocks of
// each chain and three of one, extrapolated to the whole (PlanBlocks.h). A mesh
// whose plan without remat fits the device memory is not priced with the
// other remat policies: in the step-time model recomputing and offloading
// only add time. Plans whose memory does not fit the device are dropped, as
// are those that do not partition; the rest are ranked by predicted step time,
// then by fewer bytes of memory, then in enumeration order, so the same input
// always gives the same table.
//
//===----------------------------------------------------------------------===//

#include "PlanBlocks.h"
#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/Report.h"
#include "sd/Analysis/StepTime.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

/// One candidate: its meshes, attention and remat policy, and what it
/// costs.
struct Plan {
  std::string ici, dcn;
  ::sd::AttentionKind attention;
  ::sd::RematPolicyKind remat;
  /// Devices per axis (data, fsdp, context, tensor) inside a host, and
  /// (data, fsdp) across hosts.
  std::vector<int64_t> inside, across;
  /// Set once priced.
  std::optional<StepTimePrediction> time;
  std::string error;

  std::string mesh() const { return dcn.empty() ? ici : ici + " | " + dcn; }
  /// The plans that differ only in remat policy share it.
  std::string group() const {
    return mesh() + " " + std::string(::sd::attentionKindName(attention));
  }
  bool offloads() const {
    return remat == ::sd::RematPolicyKind::OffloadMatmulWithoutBatch ||
           remat == ::sd::RematPolicyKind::HiddenStateWithOffload;
  }
};

constexpr const char *kAxes[] = {"data", "fsdp", "context", "tensor"};

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
  int64_t priced = 0;
  std::string firstError;
  const Plan *smallest = nullptr;
  /// The repeated blocks priced once (none with options.wholeProgram).
  std::vector<BlockChain> chains;

private:
  void enumerate();
  void price(Plan &plan);
  /// The report of `program`'s training step under `variant`, or failure
  /// with the first error in `error`.
  FailureOr<CostReport> report(ModuleOp program, const PipelineOptions &variant,
                               std::string &error);

  /// Mutable: an op handle's queries are not const methods.
  mutable ModuleOp module;
  PipelineOptions base;
  PlanOptions options;
  /// With chains: copies of the module (nested in it while the search
  /// runs) with every chain cut to kBaseBlocks blocks, and per chain one
  /// with that chain at one more.
  ModuleOp baseBlocks;
  std::vector<ModuleOp> moreBlocks;
};

void Search::enumerate() {
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
      for (::sd::AttentionKind attention : attentions)
        for (::sd::RematPolicyKind remat : remats)
          plans.push_back(Plan{llvm::join(iciAxes, ","),
                               llvm::join(dcnAxes, ","), attention, remat,
                               inside, across});
    }
}

FailureOr<CostReport> Search::report(ModuleOp program,
                                     const PipelineOptions &variant,
                                     std::string &error) {
  ModuleOp copy = copyIntoNestedModule(program);
  std::string first;
  FailureOr<CostReport> result = failure();
  {
    ScopedDiagnosticHandler quiet(module.getContext(), [&](Diagnostic &diag) {
      if (first.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        first = diag.str();
      return success();
    });
    func::FuncOp func;
    // Without the verifier after each pass (a third of the time here): the
    // same pipeline is verified wherever sd compiles a program.
    PassManager pm(module.getContext());
    pm.enableVerifier(false);
    buildDefaultPipeline(pm, variant);
    if (succeeded(pm.run(copy)) &&
        (func = findReportFunction(copy, "train_step")))
      result = computeCostReport(func, LayoutChoice::Auto);
  }
  copy.erase();
  if (failed(result))
    error = first.empty() ? "the pipeline failed" : first;
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
  enumerate();
  if (!options.wholeProgram)
    chains = findBlockChains(module);
  if (!chains.empty()) {
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
  // The groups (mesh and attention) whose plan without remat fits: their
  // other policies only add time (recompute or host traffic). Those where
  // FULL does not fit: the policies that recompute less keep more; only
  // the offloading ones, which move what they keep to the host, may fit.
  llvm::StringSet<> noneFits, fullTooLarge;
  for (Plan &plan : plans) {
    if (plan.remat != ::sd::RematPolicyKind::None &&
        noneFits.contains(plan.group())) {
      ++prunedFits;
      continue;
    }
    if (plan.remat != ::sd::RematPolicyKind::Full && !plan.offloads() &&
        fullTooLarge.contains(plan.group())) {
      ++prunedTooLarge;
      continue;
    }
    price(plan);
    ++priced;
    if (!plan.time) {
      ++noPartition;
      if (firstError.empty())
        firstError = plan.mesh() + ", " +
                     std::string(::sd::attentionKindName(plan.attention)) +
                     ", " + std::string(::sd::rematPolicyName(plan.remat)) +
                     ": " + plan.error;
      continue;
    }
    if (!smallest || plan.time->neededBytes < smallest->time->neededBytes)
      smallest = &plan;
    if (double(plan.time->neededBytes) > memory()) {
      ++tooLarge;
      if (plan.remat == ::sd::RematPolicyKind::Full)
        fullTooLarge.insert(plan.group());
      continue;
    }
    if (plan.remat == ::sd::RematPolicyKind::None)
      noneFits.insert(plan.group());
    ranked.push_back(&plan);
  }
  if (baseBlocks)
    baseBlocks.erase();
  for (ModuleOp more : moreBlocks)
    more.erase();
  moreBlocks.clear();
  std::stable_sort(
      ranked.begin(), ranked.end(), [](const Plan *a, const Plan *b) {
        return std::tie(a->time->stepSeconds, a->time->neededBytes) <
               std::tie(b->time->stepSeconds, b->time->neededBytes);
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
    return "Price every mesh and remat policy for a device count on a "
           "hardware profile and print the best plans";
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
     << "tensor inside a host, data and fsdp across hosts; attention "
     << "dot_product and flash, ring and ulysses where context splits the "
     << "sequence; remat NONE, FULL, MATMUL_WITHOUT_BATCH, FLUX_OPTIMIZED "
     << "and the two offload policies, or what the flags name)\n";
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
  os << "  #  " << llvm::left_justify("mesh", 36)
     << llvm::left_justify("attention", 12) << llvm::left_justify("remat", 29)
     << llvm::right_justify("step", 11) << llvm::right_justify("compute", 11)
     << llvm::right_justify("comm", 11) << llvm::right_justify("memory", 11)
     << "   why it lost\n";
  for (size_t i = 0; i < ranked.size() && i < options.top; ++i) {
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
       << llvm::left_justify(plan.mesh(), 35) << " "
       << llvm::left_justify(::sd::attentionKindName(plan.attention), 12)
       << llvm::left_justify(::sd::rematPolicyName(plan.remat), 29)
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
     << " that keep more than FULL where FULL does not fit; dropped: "
     << search.tooLarge << " that do not fit the device memory, "
     << search.noPartition << " that do not partition";
  if (!search.firstError.empty())
    os << " (first: " << search.firstError << ")";
  os << "\n";
  markAllAnalysesPreserved();
}

LogicalResult PlanPass::writeConfig(const Plan &plan) {
  ModuleOp module = getOperation();
  // The global batch: the one asked for, or the program's default.
  int64_t batch = base.batch;
  if (batch <= 0)
    module.walk([&](func::FuncOp func) {
      if (auto attr = func->getAttrOfType<IntegerAttr>(
              SDDialect::kDefaultBatchAttrName))
        batch = attr.getInt();
    });
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
  if (batch > 0)
    out << "per_device_batch_size: "
        << llvm::formatv("{0}", double(batch) / double(options.devices))
        << "\n";
  out << "attention: '" << ::sd::attentionKindName(plan.attention) << "'\n";
  out << "remat_policy: '" << ::sd::rematPolicyName(plan.remat) << "'\n";
  return success();
}

} // namespace

FailureOr<PlanChoice> mlir::sd::choosePlan(ModuleOp module,
                                           const PipelineOptions &base,
                                           const PlanOptions &plan) {
  Search search(module, base, plan);
  if (!search.runSearch() || failed(search.checkSomeFit()))
    return failure();
  const Plan &best = *search.ranked.front();
  return PlanChoice{best.ici,   best.dcn,   best.attention,
                    best.remat, *best.time, int64_t(search.plans.size())};
}

std::unique_ptr<Pass> mlir::sd::createPlan(const PipelineOptions &base,
                                           const PlanOptions &plan,
                                           llvm::raw_ostream &os) {
  return std::make_unique<PlanPass>(base, plan, os);
}
