//===- Plan.cpp - sd-plan: meshes and remat policies priced ---------------===//
//
// The planner's first search: for a device count (and hosts), every mesh
// that factors the devices over `data`, `fsdp`, `context` and `tensor`
// inside a host (and over `data` and `fsdp` across hosts), with each remat
// policy sd can price, runs the rest of the default pipeline (the training
// step, partitioned) on a copy of the module and prices it with the
// step-time model on a hardware profile. Plans whose memory does not fit
// the device are dropped, as are those with offload traffic (which the
// model does not price yet) and those that do not partition; the rest are
// ranked by predicted step time, then by fewer bytes of memory, then in
// enumeration order, so the same input always gives the same table.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/Report.h"
#include "sd/Analysis/StepTime.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::sd;

namespace {

/// One candidate: its meshes and remat policy, and what it costs.
struct Plan {
  std::string ici, dcn;
  ::sd::RematPolicyKind remat;
  /// Devices per axis (data, fsdp, context, tensor) inside a host, and
  /// (data, fsdp) across hosts.
  std::vector<int64_t> inside, across;
  /// Set once priced.
  std::optional<StepTimePrediction> time;
  int64_t hostTransferBytes = 0;
  std::string error;

  std::string mesh() const { return dcn.empty() ? ici : ici + " | " + dcn; }
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

/// Runs one candidate's pipeline on a module: inside a pass (sd-plan) or
/// on its own (sdrun --mesh=auto).
using RunPipelineFn =
    std::function<LogicalResult(const PipelineOptions &, ModuleOp)>;

/// The search: candidates, each priced, the fitting ones ranked.
class Search {
public:
  Search(ModuleOp module, const PipelineOptions &base,
         const PlanOptions &options, RunPipelineFn run)
      : module(module), base(base), options(options), run(std::move(run)) {}

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
  int64_t noPartition = 0, offload = 0, tooLarge = 0;
  std::string firstError;
  const Plan *smallest = nullptr;

private:
  void enumerate();
  void price(Plan &plan);

  /// Mutable: an op handle's queries are not const methods.
  mutable ModuleOp module;
  PipelineOptions base;
  PlanOptions options;
  RunPipelineFn run;
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
      for (::sd::RematPolicyKind remat : remats)
        plans.push_back(Plan{llvm::join(iciAxes, ","), llvm::join(dcnAxes, ","),
                             remat, inside, across});
    }
}

void Search::price(Plan &plan) {
  ModuleOp copy = copyIntoNestedModule(module);
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
  {
    std::string first;
    ScopedDiagnosticHandler quiet(module.getContext(), [&](Diagnostic &diag) {
      if (first.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        first = diag.str();
      return success();
    });
    func::FuncOp func;
    FailureOr<CostReport> report = failure();
    if (succeeded(run(variant, copy)) &&
        (func = findReportFunction(copy, "train_step")))
      report = computeCostReport(func, LayoutChoice::Auto);
    if (succeeded(report)) {
      plan.time = predictStepTime(*report, options.profile);
      plan.hostTransferBytes = report->hostTransferBytes;
    } else {
      plan.error = first.empty() ? "the pipeline failed" : first;
    }
  }
  copy.erase();
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
  for (Plan &plan : plans) {
    price(plan);
    if (!plan.time) {
      ++noPartition;
      if (firstError.empty())
        firstError = plan.mesh() + ", " +
                     std::string(::sd::rematPolicyName(plan.remat)) + ": " +
                     plan.error;
      continue;
    }
    if (plan.hostTransferBytes > 0) {
      ++offload;
      continue;
    }
    if (!smallest || plan.time->neededBytes < smallest->time->neededBytes)
      smallest = &plan;
    if (double(plan.time->neededBytes) > memory()) {
      ++tooLarge;
      continue;
    }
    ranked.push_back(&plan);
  }
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
    diag << ": the smallest (" << smallest->mesh() << ", remat "
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
  Search search(module, base, options,
                [&](const PipelineOptions &variant, ModuleOp copy) {
                  OpPassManager pm(ModuleOp::getOperationName());
                  buildDefaultPipeline(pm, variant);
                  return runPipeline(pm, copy);
                });
  if (!search.runSearch())
    return signalPassFailure();
  const std::vector<Plan> &plans = search.plans;
  const std::vector<const Plan *> &ranked = search.ranked;
  os << "sd plan: " << options.devices << " devices (" << options.hosts
     << (options.hosts == 1 ? " host" : " hosts") << " of "
     << options.devices / options.hosts << ") of " << options.profile.name
     << ", device memory " << formatBytes(int64_t(search.memory())) << ": "
     << plans.size() << " candidates (meshes over data, fsdp, context and "
     << "tensor inside a host, data and fsdp across hosts; remat NONE, FULL, "
     << "MATMUL_WITHOUT_BATCH, FLUX_OPTIMIZED and the two offload "
     << "policies)\n";
  if (failed(search.checkSomeFit()))
    return signalPassFailure();
  const StepTimePrediction &best = *ranked.front()->time;
  os << "  #  " << llvm::left_justify("mesh", 36)
     << llvm::left_justify("remat", 22) << llvm::right_justify("step", 11)
     << llvm::right_justify("compute", 11) << llvm::right_justify("comm", 11)
     << llvm::right_justify("memory", 11) << "   why it lost\n";
  for (size_t i = 0; i < ranked.size() && i < options.top; ++i) {
    const Plan &plan = *ranked[i];
    const StepTimePrediction &t = *plan.time;
    std::string why;
    if (i > 0) {
      double compute = t.computeSeconds() - best.computeSeconds();
      double comm = (t.communicationSeconds - t.hiddenSeconds) -
                    (best.communicationSeconds - best.hiddenSeconds);
      why = compute >= comm
                ? "+" + ::sd::formatSeconds(compute) + " compute"
                : "+" + ::sd::formatSeconds(comm) + " communication";
      if (t.stepSeconds == best.stepSeconds)
        why = "same time, more memory";
    }
    os << llvm::format("%3d  ", int(i + 1))
       << llvm::left_justify(plan.mesh(), 35) << " "
       << llvm::left_justify(::sd::rematPolicyName(plan.remat), 22)
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
  os << "priced " << plans.size() - search.noPartition << ", ranked "
     << ranked.size() << "; dropped: " << search.tooLarge
     << " that do not fit the device memory, " << search.offload
     << " with offload traffic (not priced yet), " << search.noPartition
     << " that do not partition";
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
  out << "remat_policy: '" << ::sd::rematPolicyName(plan.remat) << "'\n";
  return success();
}

} // namespace

FailureOr<PlanChoice> mlir::sd::choosePlan(ModuleOp module,
                                           const PipelineOptions &base,
                                           const PlanOptions &plan) {
  Search search(module, base, plan,
                [&](const PipelineOptions &variant, ModuleOp copy) {
                  PassManager pm(module.getContext());
                  buildDefaultPipeline(pm, variant);
                  return pm.run(copy);
                });
  if (!search.runSearch() || failed(search.checkSomeFit()))
    return failure();
  const Plan &best = *search.ranked.front();
  return PlanChoice{best.ici, best.dcn, best.remat, *best.time,
                    int64_t(search.plans.size())};
}

std::unique_ptr<Pass> mlir::sd::createPlan(const PipelineOptions &base,
                                           const PlanOptions &plan,
                                           llvm::raw_ostream &os) {
  return std::make_unique<PlanPass>(base, plan, os);
}
