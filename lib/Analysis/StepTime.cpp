//===- StepTime.cpp - A training step's predicted time on a profile -------===//

#include "sd/Analysis/StepTime.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace mlir::sd;

StepTimePrediction
mlir::sd::predictStepTime(const CostReport &report,
                          const ::sd::HardwareProfile &profile) {
  const ::sd::DeviceSpec &device = profile.device;
  StepTimePrediction p;
  using ::sd::ProductSize;
  int64_t large = report.matmulFlopsF32 - report.matmulFlopsF32Small -
                  report.matmulFlopsF32Medium - report.attentionFlopsF32 -
                  report.matmulFlopsF32TransposedLhs;
  double arithmetic =
      double(report.attentionFlopsF32) / device.attentionRate() +
      double(report.matmulFlopsF32TransposedLhs) / device.transposedLhsRate() +
      double(report.matmulFlopsF32Small) / device.f32Rate(ProductSize::Small) +
      double(report.matmulFlopsF32Medium) /
          device.f32Rate(ProductSize::Medium) +
      double(large) / device.f32Rate(ProductSize::Large) +
      double(report.matmulFlopsBf16) / device.bf16Flops;
  p.matmulSeconds =
      std::max(arithmetic, double(report.matmulBytes) / device.memoryBandwidth);
  p.otherSeconds = double(report.otherMemoryBytes) / device.memoryBandwidth;
  double asyncSeconds = 0;
  for (const CollectiveSummary &summary : report.collectives) {
    std::vector<int> axes = collectiveAxes(report, summary);
    double seconds = ::sd::predictCollectiveSeconds(
        report.mesh, axes, summary.kind, summary.count, summary.bytesPerDevice,
        profile.network);
    p.communicationSeconds += seconds;
    std::string axesName = llvm::join(summary.axes, ",");
    auto entry = std::find_if(
        p.communicationByAxes.begin(), p.communicationByAxes.end(),
        [&](const auto &known) { return known.first == axesName; });
    if (entry == p.communicationByAxes.end())
      p.communicationByAxes.emplace_back(axesName, seconds);
    else
      entry->second += seconds;
    if (summary.count > 0)
      asyncSeconds +=
          seconds * double(summary.asyncCount) / double(summary.count);
  }
  p.hiddenSeconds = std::min(asyncSeconds, p.computeSeconds());
  p.offloadSeconds = double(report.hostTransferBytes) / device.hostRate();
  p.stepSeconds = p.computeSeconds() + p.communicationSeconds -
                  p.hiddenSeconds + p.offloadSeconds;
  p.neededBytes = report.totalBytes();
  p.stateBytes = report.parameterBytes + report.optimizerStateBytes;
  p.deviceBytes = device.memoryBytes;
  return p;
}
