//===- PrintReport.cpp - print the per-device cost report -----------------===//
//
// A printing pass (as MLIR's -test-print-liveness): computes the cost model's
// report of one function and writes it to a stream, llvm::outs() unless
// sdopt gives its output file. The IR is left unchanged.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/CostModels.h"
#include "sd/Analysis/Report.h"
#include "sd/Passes/Passes.h"

namespace mlir::sd {
#define GEN_PASS_DEF_PRINTREPORT
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
struct PrintReportPass
    : public mlir::sd::impl::PrintReportBase<PrintReportPass> {
  using Base::Base;
  PrintReportPass(llvm::raw_ostream &os, const PrintReportOptions &options)
      : Base(options), os(&os) {}

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerCostModels(registry);
  }

  void runOnOperation() override {
    func::FuncOp func = findReportFunction(getOperation(), function);
    if (!func)
      return signalPassFailure();
    ::sd::NetworkModel network = networkOverride.value_or(::sd::NetworkModel());
    for (auto [text, name, field, isLatency] :
         {std::tuple{&iciBandwidth, "ici-bandwidth", &network.iciBandwidth,
                     false},
          std::tuple{&dcnBandwidth, "dcn-bandwidth", &network.dcnBandwidth,
                     false},
          std::tuple{&iciLatency, "ici-latency", &network.iciLatency, true},
          std::tuple{&dcnLatency, "dcn-latency", &network.dcnLatency, true}}) {
      if (networkOverride)
        break;
      absl::StatusOr<double> value =
          isLatency ? ::sd::parseLatency(text->getValue(), name)
                    : ::sd::parseBandwidth(text->getValue(), name);
      if (!value.ok()) {
        getOperation().emitError(std::string(value.status().message()));
        return signalPassFailure();
      }
      *field = *value;
    }
    FailureOr<CostReport> report = computeCostReport(func, layout);
    if (failed(report))
      return signalPassFailure();
    printReport(*report, format, *os, network, profile ? &*profile : nullptr);
    markAllAnalysesPreserved();
  }

  /// The tool's network model, which replaces the options'.
  std::optional<::sd::NetworkModel> networkOverride;
  /// The tool's hardware profile, for the step-time prediction.
  std::optional<::sd::HardwareProfile> profile;
  /// Where the report goes; not owned.
  llvm::raw_ostream *os = &llvm::outs();
};
} // namespace

std::unique_ptr<Pass>
mlir::sd::createPrintReport(llvm::raw_ostream &os,
                            const PrintReportOptions &options) {
  return std::make_unique<PrintReportPass>(os, options);
}

std::unique_ptr<Pass>
mlir::sd::createPrintReport(llvm::raw_ostream &os,
                            const PrintReportOptions &options,
                            const ::sd::NetworkModel &network) {
  auto pass = std::make_unique<PrintReportPass>(os, options);
  pass->networkOverride = network;
  return pass;
}

std::unique_ptr<Pass> mlir::sd::createPrintReport(
    llvm::raw_ostream &os, const PrintReportOptions &options,
    const ::sd::NetworkModel &network,
    const std::optional<::sd::HardwareProfile> &profile) {
  auto pass = std::make_unique<PrintReportPass>(os, options);
  pass->networkOverride = network;
  pass->profile = profile;
  return pass;
}
