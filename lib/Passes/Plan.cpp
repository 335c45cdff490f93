//===- Plan.cpp - sd-plan: the plans of a device count, priced ------------===//
//
// The pass that prints the planner's table (and writes the best plan as a
// run config), and choosePlan for sdrun --mesh=auto; the search itself is
// in PlanSearch.h.
//
//===----------------------------------------------------------------------===//

#include "PlanSearch.h"
#include "sd/Analysis/Report.h"
#include "sd/IR/SDOps.h"
#include "sd/Support/Numbers.h"
#include "sd/Support/YamlText.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::planner;

namespace {

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

/// `text` padded with spaces to `width` characters (UTF-8 code points:
/// "µs" is two bytes, one column), on the right or, `right`, the left.
static std::string pad(StringRef text, unsigned width, bool right = false) {
  unsigned shown = 0;
  for (char byte : text)
    shown += (static_cast<unsigned char>(byte) & 0xC0) != 0x80 ? 1 : 0;
  std::string spaces(shown < width ? width - shown : 0, ' ');
  return right ? spaces + text.str() : text.str() + spaces;
}

/// Wide enough for "+278.3 µs communication" and "same time, more memory".
constexpr unsigned kWhyWidth = 26;

/// Each set of mesh axes' collectives on their links, longest first (ties
/// by the axes' names): "fsdp 26.64 s, tensor 45.28 ms", or "-" without
/// any.
static std::string communicationByAxes(const StepTimePrediction &t) {
  std::vector<std::pair<std::string, double>> axes;
  for (const auto &[name, seconds] : t.communicationByAxes)
    if (seconds > 0)
      axes.emplace_back(name, seconds);
  std::sort(axes.begin(), axes.end(), [](const auto &a, const auto &b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  std::string text;
  for (const auto &[name, seconds] : axes)
    text +=
        (text.empty() ? "" : ", ") + name + " " + ::sd::formatSeconds(seconds);
  return text.empty() ? "-" : text;
}

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
  if (search.bucketsPriceWhole())
    os << "repeated blocks priced in the whole program: the gradient "
          "buckets (--bucket-cap-mb) do not line up with the blocks\n";
  if (!search.chains.empty()) {
    os << "repeated blocks priced once:";
    for (const BlockChain &chain : search.chains)
      os << " @" << chain.callee << " x" << chain.calls;
    os << " (each candidate from one copy with " << kBaseBlocks + 1
       << " blocks of each chain, the middle ones each further block's "
          "price; --plan-whole-program prices the whole)\n";
  }
  if (search.sharded > 0)
    os << "shardings propagated for " << search.propagations << " of "
       << search.sharded
       << " programs (the others' meshes answer every comparison of sizes "
          "the propagation made as a propagated one's do, and take its "
          "shardings)\n";
  if (failed(search.checkSomeFit()))
    return signalPassFailure();
  const StepTimePrediction &best = *ranked.front()->time;
  os << "  #  " << llvm::left_justify("mesh", 41)
     << llvm::left_justify("rules", 24) << llvm::left_justify("attention", 12)
     << llvm::left_justify("remat", 29) << llvm::left_justify("accum", 5)
     << llvm::right_justify("step", 11) << llvm::right_justify("compute", 11)
     << llvm::right_justify("comm", 11) << llvm::right_justify("memory", 11)
     << "   " << llvm::left_justify("why it lost", kWhyWidth)
     << "   communication by mesh axes\n";
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
       << pad(::sd::formatSeconds(t.stepSeconds), 11, /*right=*/true)
       << pad(::sd::formatSeconds(t.computeSeconds()), 11, /*right=*/true)
       << pad(::sd::formatSeconds(t.communicationSeconds - t.hiddenSeconds), 11,
              /*right=*/true)
       << pad(formatBytes(t.neededBytes), 11, /*right=*/true) << "   "
       << pad(why.empty() ? "-" : why, kWhyWidth) << "   "
       << communicationByAxes(t) << "\n";
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
     << search.prunedNoPartition << " where NONE does not partition, "
     << search.prunedState
     << " where the parameters and optimizer state alone do not fit, "
     << search.prunedBound
     << " of groups whose matrix products alone take longer than the "
        "table's last row; dropped: "
     << search.tooLarge << " that do not fit the device memory, "
     << search.noPartition << " that do not partition";
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
  out << "# sdopt --plan's best plan on "
      << ::sd::yamlCommentText(options.profile.name) << " for "
      << options.devices << " devices (" << options.hosts
      << (options.hosts == 1 ? " host" : " hosts") << "): predicted step "
      << ::sd::formatSeconds(t.stepSeconds) << ", "
      << formatBytes(t.neededBytes)
      << " per device.\n# Run it: sdrun MODEL --config="
      << ::sd::yamlCommentText(options.outputPath);
  for (const std::string &flag : options.flagsOnly)
    out << " " << ::sd::yamlCommentText(flag);
  out << "\n";
  for (size_t a = 0; a < 4; ++a)
    out << "ici_" << kAxes[a] << "_parallelism: " << plan.inside[a] << "\n";
  for (size_t a = 0; a < 2; ++a)
    out << "dcn_" << kAxes[a] << "_parallelism: " << plan.across[a] << "\n";
  // MaxDiffusion's global batch: per_device_batch_size x devices x
  // gradient_accumulation_steps.
  // Exactly: two decimals would make 8 on 64 devices 0.12, which no whole
  // batch is.
  if (batch > 0) {
    double perDevice = double(batch) / double(options.devices * plan.accum);
    out << "per_device_batch_size: " << ::sd::shortestDouble(perDevice) << "\n";
  }
  out << "gradient_accumulation_steps: " << plan.accum << "\n";
  out << "attention: "
      << ::sd::yamlQuoted(::sd::attentionKindName(plan.attention)) << "\n";
  out << "remat_policy: " << ::sd::yamlQuoted(::sd::rematPolicyName(plan.remat))
      << "\n";
  // The rules in full (a variant has no file of its own).
  out << "# " << ::sd::yamlCommentText(plan.rules->rules.name)
      << "\nlogical_axis_rules: [\n";
  for (const ::sd::LogicalAxisRule &rule : plan.rules->rules.rules) {
    out << "  [" << ::sd::yamlQuoted(rule.logicalName) << ", [";
    llvm::interleave(
        rule.meshAxes, out,
        [&](const std::string &axis) { out << ::sd::yamlQuoted(axis); }, ", ");
    out << "]],\n";
  }
  out << "]\n";
  // What the search was given and priced: the precision, the buckets, the
  // adapters, ... (sdrun would otherwise run its defaults).
  if (!options.configLines.empty())
    out << "# The settings sdopt --plan was given.\n";
  for (const std::string &line : options.configLines)
    out << line << "\n";
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
