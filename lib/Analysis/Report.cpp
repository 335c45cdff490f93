//===- Report.cpp - printing sdopt's report -------------------------------===//
//
// The text table (human units, one section per resource) and the JSON
// document (exact numbers) of a CostReport.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/Report.h"
#include "sd/Analysis/StepTime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sd;

/// `value` in `unit` with SI prefixes: below 1000 as an integer, above with
/// one decimal and the prefix that keeps the mantissa below 1000.
static std::string formatSI(int64_t value, llvm::StringRef unit) {
  if (value < 1000 && value > -1000)
    return std::to_string(value) + " " + unit.str();
  static const char *const prefixes[] = {"k", "M", "G", "T", "P", "E"};
  double scaled = static_cast<double>(value) / 1000.0;
  size_t prefix = 0;
  // Compare with what "%.1f" would print, so 999.96 kB becomes 1.0 MB.
  while (prefix + 1 < std::size(prefixes) &&
         (scaled >= 999.95 || scaled <= -999.95)) {
    scaled /= 1000.0;
    ++prefix;
  }
  return llvm::formatv("{0:F1} {1}{2}", scaled, prefixes[prefix], unit).str();
}

std::string mlir::sd::formatBytes(int64_t bytes) {
  return formatSI(bytes, "B");
}

std::string mlir::sd::formatFlops(int64_t flops) {
  return formatSI(flops, "FLOP");
}

static llvm::StringRef layoutName(ProgramLayout layout) {
  switch (layout) {
  case ProgramLayout::Partitioned:
    return "partitioned";
  case ProgramLayout::Global:
    return "global";
  case ProgramLayout::Unsharded:
    return "unsharded";
  }
  return "";
}

/// 8262080 as "8,262,080".
static std::string groupDigits(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  for (int64_t i = static_cast<int64_t>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, ",");
  return (value < 0 ? "-" : "") + digits;
}

static std::string plural(int64_t count, llvm::StringRef noun) {
  return groupDigits(count) + " " + noun.str() + (count == 1 ? "" : "s");
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

/// `  label   value   note`: the label left in 20 columns, the value right
/// in 12.
static void printRow(llvm::raw_ostream &os, llvm::StringRef label,
                     const std::string &value, const std::string &note) {
  os << "  " << llvm::left_justify(label, 20) << llvm::right_justify(value, 12);
  if (!note.empty())
    os << "   " << note;
  os << "\n";
}

static void printLayout(const CostReport &report, llvm::raw_ostream &os) {
  switch (report.layout) {
  case ProgramLayout::Partitioned:
    os << "program: partitioned; types are local, every number is per "
          "device\n";
    return;
  case ProgramLayout::Unsharded:
    os << "program: not sharded; every device runs the whole program\n";
    return;
  case ProgramLayout::Global:
    os << "program: global (not partitioned); per-device numbers follow the "
          "shardings\n"
          "         of the arguments and, after sd-propagate-sharding, of "
          "the ops;\n         ";
    if (report.numValuesWithoutSharding == 0 &&
        report.numOpsWithoutSharding == 0) {
      os << "every value has one\n";
      return;
    }
    os << groupDigits(report.numValuesWithoutSharding) << " of "
       << plural(report.numValues, "value") << " and "
       << plural(report.numOpsWithoutSharding, "op")
       << " with FLOPs have none and count whole\n";
    return;
  }
}

/// Each sharded parameter's all_gathers against ZeRO's bound; printed for
/// programs with collectives and sharded parameters.
static void printParameterGathers(const CostReport &report,
                                  llvm::raw_ostream &os) {
  const ParameterGathers &g = report.parameterGathers;
  if (report.layout != ProgramLayout::Partitioned || g.numSharded == 0)
    return;
  os << "\nparameter all_gathers per device (ZeRO-3 gathers each sharded "
        "parameter once)\n";
  printRow(os, "sharded parameters", groupDigits(g.numSharded),
           "of " + groupDigits(g.numParameters) +
               ", Ψ = " + formatBytes(g.shardedBytes));
  // Up to three names of the parameters in a row, then how many more.
  auto names = [&](bool once) {
    std::string text;
    int64_t shown = 0, more = 0;
    for (const ParameterGathers::Exception &e : g.exceptions) {
      if ((e.gathers > 1) != once)
        continue;
      if (shown == 3) {
        ++more;
        continue;
      }
      text += (shown++ ? ", " : "") + e.name +
              (e.gathers > 1 ? " x" + std::to_string(e.gathers) : "");
    }
    return more ? text + ", " + groupDigits(more) + " more" : text;
  };
  printRow(os, "gathered once", groupDigits(g.numGatheredOnce), "");
  printRow(os, "more than once", groupDigits(g.numGatheredMoreThanOnce),
           names(/*once=*/true));
  printRow(os, "never", groupDigits(g.numNeverGathered), names(false));
  printRow(os, "all_gather bytes", formatBytes(g.gatherBytes),
           plural(g.numGathers, "all_gather"));
  printRow(os, "ZeRO bound", formatBytes(g.zeroBoundBytes),
           g.groupSize ? "Ψ(N−1)/N, N = " + std::to_string(g.groupSize)
                       : "Σ S(N−1)/N over the parameters' groups");
}

/// The collectives' predicted time per set of mesh axes (sd/Sharding/
/// Network.h), with the network model's figures.
static void printCommunicationTime(const CostReport &report,
                                   const ::sd::NetworkModel &network,
                                   llvm::raw_ostream &os) {
  std::vector<AxisCommunication> rows = predictCommunication(report, network);
  os << "\ncommunication time per mesh axes (predicted: ICI "
     << ::sd::formatBandwidth(network.iciBandwidth) << " per device, "
     << ::sd::formatSeconds(network.iciLatency) << "; DCN "
     << ::sd::formatBandwidth(network.dcnBandwidth) << " per process, "
     << ::sd::formatSeconds(network.dcnLatency) << ")\n";
  os << "  " << llvm::left_justify("mesh axes", 20)
     << llvm::left_justify("link", 9) << llvm::right_justify("N", 5)
     << llvm::right_justify("bytes sent", 13)
     << llvm::right_justify("predicted", 12) << "\n";
  double total = 0;
  for (const AxisCommunication &row : rows) {
    os << "  " << llvm::left_justify(llvm::join(row.axes, ","), 20)
       << llvm::left_justify(::sd::linkName(row.link), 9)
       << llvm::right_justify(std::to_string(row.groupSize), 5)
       << llvm::right_justify(formatBytes(row.bytesPerDevice), 13)
       << llvm::right_justify(::sd::formatSeconds(row.predictedSeconds), 12)
       << "\n";
    total += row.predictedSeconds;
  }
  os << "  " << llvm::left_justify("total", 34)
     << llvm::right_justify(formatBytes(report.collectiveBytesPerDevice), 13)
     << llvm::right_justify(::sd::formatSeconds(total), 12) << "\n";
}

static void printText(const CostReport &report,
                      const ::sd::NetworkModel &network,
                      llvm::raw_ostream &os) {
  os << "sd report: @" << report.function;
  if (report.meshName.empty())
    os << ", no mesh (1 device)\n";
  else
    os << ", mesh @" << report.meshName << " " << report.meshSpec << " ("
       << plural(report.numDevices, "device") << ")\n";
  printLayout(report, os);
  if (!report.calls.empty()) {
    os << "calls:";
    for (const auto &[callee, count] : report.calls)
      os << " @" << callee << " x" << count;
    os << " (each costed through its callee, once per call)\n";
  }

  os << "\nmemory per device\n";
  printRow(os, "parameters", formatBytes(report.parameterBytes),
           plural(report.numParameters, "tensor") + ", " +
               plural(report.parameterElements, "element"));
  // A fine-tune: what the frozen parameters do not cost (AdamW's two f32
  // moments and their gradient per element).
  if (report.numFrozen > 0)
    printRow(os, "  frozen", "",
             plural(report.numFrozen, "tensor") + ", " +
                 plural(report.frozenElements, "element") +
                 ": no gradient, no optimizer state (" +
                 formatBytes(2 * 4 * report.frozenElements) +
                 " saved), no reduction");
  if (report.numOptimizerStates > 0)
    printRow(os, "optimizer state", formatBytes(report.optimizerStateBytes),
             plural(report.numOptimizerStates, "tensor") +
                 " (AdamW moments)");
  printRow(os, "inputs", formatBytes(report.inputBytes),
           plural(report.numInputs, "tensor"));
  printRow(os, "activations (peak)", formatBytes(report.peakActivationBytes),
           report.peakOp.empty() ? "" : "at " + report.peakOp);
  if (report.peakGradientSumBytes > 0)
    printRow(os, "  accumulator", formatBytes(report.peakGradientSumBytes),
             "of the peak: the gradients summed over microbatches "
             "(activations alone: " +
                 formatBytes(report.peakActivationBytes -
                             report.peakGradientSumBytes) +
                 ")");
  printRow(os, "total", formatBytes(report.totalBytes()),
           report.numOptimizerStates > 0
               ? "parameters + optimizer state + inputs + activation peak"
               : "parameters + inputs + activation peak");
  if (report.numPaddedTensors > 0)
    printRow(os, "  padding", formatBytes(report.paddingBytes),
             "of the above: " + plural(report.numPaddedTensors, "argument") +
                 " padded to whole blocks (uneven shards)");
  if (report.hostTransferBytes > 0) {
    printRow(os, "host memory (peak)", formatBytes(report.peakHostBytes),
             "offloaded values");
    printRow(os, "host transfers", formatBytes(report.hostTransferBytes),
             "offloads + reloads");
  }

  os << "\ncompute per device\n";
  printRow(os, "FLOPs", formatFlops(report.flops), "");
  if (report.recomputeFlops > 0)
    printRow(os, "recompute FLOPs", formatFlops(report.recomputeFlops),
             "forward values recomputed for the backward pass (included "
             "above)");
  printRow(os, "bytes accessed", formatBytes(report.bytesAccessed),
           "operands read + results written");
  if (report.computedElements > 0)
    printRow(os, "padding",
             llvm::formatv("{0:F1}%", 100.0 * double(report.paddedElements) /
                                          double(report.computedElements))
                 .str(),
             "of the elements ops compute are padding (" +
                 plural(report.paddedElements, "element") + " of " +
                 groupDigits(report.computedElements) + ")");

  if (report.collectives.empty()) {
    os << "\ncollectives per device: none";
    if (report.layout == ProgramLayout::Global)
      os << " yet (sd-partition turns "
         << plural(report.numReshards, "sd.reshard op")
         << " and any partial sums into collectives)";
    os << "\n";
    printParameterGathers(report, os);
    return;
  }
  os << "\ncollectives per device (ring convention: bytes each device "
        "sends)\n";
  os << "  " << llvm::left_justify("kind", 20)
     << llvm::left_justify("mesh axes", 16) << llvm::right_justify("N", 5)
     << llvm::right_justify("count", 8) << llvm::right_justify("bytes sent", 13)
     << "\n";
  int64_t count = 0;
  for (const CollectiveSummary &summary : report.collectives) {
    os << "  " << llvm::left_justify(summary.kind, 20)
       << llvm::left_justify(llvm::join(summary.axes, ","), 16)
       << llvm::right_justify(std::to_string(summary.groupSize), 5)
       << llvm::right_justify(std::to_string(summary.count), 8)
       << llvm::right_justify(formatBytes(summary.bytesPerDevice), 13) << "\n";
    count += summary.count;
  }
  os << "  " << llvm::left_justify("total", 41)
     << llvm::right_justify(std::to_string(count), 8)
     << llvm::right_justify(formatBytes(report.collectiveBytesPerDevice), 13)
     << "\n";
  printCommunicationTime(report, network, os);
  printParameterGathers(report, os);
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// The step-time prediction
//===----------------------------------------------------------------------===//

static void printStepTime(const CostReport &report,
                          const ::sd::HardwareProfile &profile,
                          llvm::raw_ostream &os) {
  StepTimePrediction p = predictStepTime(report, profile);
  os << "\npredicted step time per device on " << profile.name
     << " (step-time model)\n";
  auto seconds = [](double s) { return ::sd::formatSeconds(s); };
  printRow(os, "matrix products", seconds(p.matmulSeconds),
           formatFlops(report.matmulFlopsF32) + " f32 at " +
               formatFlops(int64_t(profile.device.f32Flops)) + "/s, " +
               formatFlops(report.matmulFlopsBf16) + " bf16 at " +
               formatFlops(int64_t(profile.device.bf16Flops)) +
               "/s, or their bytes at the memory bandwidth");
  const ::sd::DeviceSpec &device = profile.device;
  if (device.f32FlopsSmall > 0 || device.f32FlopsMedium > 0 ||
      device.f32FlopsAttention > 0 || device.f32FlopsTransposedLhs > 0)
    printRow(
        os, "  by size", "",
        "of the f32: " + formatFlops(report.matmulFlopsF32Small) +
            " small at " +
            formatFlops(int64_t(device.f32Rate(::sd::ProductSize::Small))) +
            "/s, " + formatFlops(report.matmulFlopsF32Medium) + " medium at " +
            formatFlops(int64_t(device.f32Rate(::sd::ProductSize::Medium))) +
            "/s, " + formatFlops(report.attentionFlopsF32) +
            " of flash attention at " +
            formatFlops(int64_t(device.attentionRate())) + "/s, " +
            formatFlops(report.matmulFlopsF32TransposedLhs) +
            " in the Aᵀ·B form at " +
            formatFlops(int64_t(device.transposedLhsRate())) +
            "/s, the rest large");
  printRow(os, "other ops", seconds(p.otherSeconds),
           formatBytes(report.otherMemoryBytes) + " at " +
               formatBytes(int64_t(profile.device.memoryBandwidth)) +
               "/s (of their " + formatBytes(report.otherBytes) +
               " accessed, what fused loops move)");
  printRow(os, "communication", seconds(p.communicationSeconds),
           "the collectives on the profile's links");
  printRow(os, "  hidden", seconds(p.hiddenSeconds),
           "asynchronous collectives overlapped with compute");
  printRow(os, "offload", seconds(p.offloadSeconds),
           formatBytes(report.hostTransferBytes) + " to and from the host at " +
               formatBytes(int64_t(profile.device.hostRate())) + "/s");
  printRow(os, "step", seconds(p.stepSeconds), "");
  printRow(os, "device memory", formatBytes(p.neededBytes),
           std::string(p.fits() ? "fits " : "does not fit ") +
               formatBytes(int64_t(p.deviceBytes)));
}

static llvm::json::Object stepTimeToJson(const CostReport &report,
                                         const ::sd::HardwareProfile &profile) {
  StepTimePrediction p = predictStepTime(report, profile);
  return llvm::json::Object{
      {"profile", profile.name},
      {"matmul_flops_f32", report.matmulFlopsF32},
      {"matmul_flops_f32_small", report.matmulFlopsF32Small},
      {"matmul_flops_f32_medium", report.matmulFlopsF32Medium},
      {"attention_flops_f32", report.attentionFlopsF32},
      {"matmul_flops_f32_transposed_lhs", report.matmulFlopsF32TransposedLhs},
      {"matmul_flops_bf16", report.matmulFlopsBf16},
      {"matmul_bytes", report.matmulBytes},
      {"other_bytes", report.otherBytes},
      {"other_memory_bytes", report.otherMemoryBytes},
      {"matmul_seconds", p.matmulSeconds},
      {"other_seconds", p.otherSeconds},
      {"communication_seconds", p.communicationSeconds},
      {"hidden_seconds", p.hiddenSeconds},
      {"host_transfer_bytes", report.hostTransferBytes},
      {"offload_seconds", p.offloadSeconds},
      {"step_seconds", p.stepSeconds},
      {"needed_bytes", p.neededBytes},
      {"device_bytes", p.deviceBytes},
      {"fits", p.fits()},
  };
}

llvm::json::Value mlir::sd::reportToJson(const CostReport &report,
                                         const ::sd::NetworkModel &network,
                                         const ::sd::HardwareProfile *profile) {
  llvm::json::Array communication;
  for (const AxisCommunication &row : predictCommunication(report, network)) {
    llvm::json::Array axes;
    for (const std::string &axis : row.axes)
      axes.push_back(axis);
    communication.push_back(llvm::json::Object{
        {"axes", std::move(axes)},
        {"link", ::sd::linkName(row.link)},
        {"group_size", row.groupSize},
        {"count", row.count},
        {"bytes_per_device", row.bytesPerDevice},
        {"predicted_seconds", row.predictedSeconds},
    });
  }
  llvm::json::Array collectives;
  for (const CollectiveSummary &summary : report.collectives) {
    llvm::json::Array axes;
    for (const std::string &axis : summary.axes)
      axes.push_back(axis);
    collectives.push_back(llvm::json::Object{
        {"kind", summary.kind},
        {"axes", std::move(axes)},
        {"group_size", summary.groupSize},
        {"count", summary.count},
        {"tensor_bytes", summary.tensorBytes},
        {"bytes_per_device", summary.bytesPerDevice},
    });
  }
  llvm::json::Object calls;
  for (const auto &[callee, count] : report.calls)
    calls[callee] = count;
  const ParameterGathers &g = report.parameterGathers;
  llvm::json::Array exceptions;
  for (const ParameterGathers::Exception &e : g.exceptions)
    exceptions.push_back(llvm::json::Object{
        {"name", e.name}, {"gathers", e.gathers}, {"bytes", e.bytes}});
  llvm::json::Value mesh = nullptr;
  if (!report.meshName.empty())
    mesh = llvm::json::Object{{"name", report.meshName},
                              {"spec", report.meshSpec},
                              {"devices", report.numDevices}};
  llvm::json::Object json{
      {"function", report.function},
      {"mesh", std::move(mesh)},
      {"program", layoutName(report.layout)},
      {"calls", std::move(calls)},
      {"per_device",
       llvm::json::Object{
           {"parameters",
            llvm::json::Object{{"tensors", report.numParameters},
                               {"elements", report.parameterElements},
                               {"bytes", report.parameterBytes}}},
           {"optimizer_state",
            llvm::json::Object{{"tensors", report.numOptimizerStates},
                               {"bytes", report.optimizerStateBytes}}},
           {"inputs", llvm::json::Object{{"tensors", report.numInputs},
                                         {"bytes", report.inputBytes}}},
           {"host",
            llvm::json::Object{{"peak_bytes", report.peakHostBytes},
                               {"transfer_bytes", report.hostTransferBytes}}},
           {"recompute_flops", report.recomputeFlops},
           {"activations",
            llvm::json::Object{
                {"peak_bytes", report.peakActivationBytes},
                {"peak_gradient_sum_bytes", report.peakGradientSumBytes},
                {"peak_op", report.peakOp},
                {"values", report.numValues},
                {"values_without_sharding", report.numValuesWithoutSharding}}},
           {"total_bytes", report.totalBytes()},
           {"flops", report.flops},
           {"ops_without_sharding", report.numOpsWithoutSharding},
           {"reshards", report.numReshards},
           {"bytes_accessed", report.bytesAccessed},
           {"collective_bytes", report.collectiveBytesPerDevice},
           {"padding",
            llvm::json::Object{{"tensors", report.numPaddedTensors},
                               {"bytes", report.paddingBytes},
                               {"padded_elements", report.paddedElements},
                               {"computed_elements", report.computedElements}}},
       }},
      {"collectives", std::move(collectives)},
      {"network",
       llvm::json::Object{
           {"ici_bytes_per_second", network.iciBandwidth},
           {"ici_latency_seconds", network.iciLatency},
           {"dcn_bytes_per_second", network.dcnBandwidth},
           {"dcn_latency_seconds", network.dcnLatency},
       }},
      {"communication", std::move(communication)},
      {"parameter_gathers",
       llvm::json::Object{
           {"parameters", g.numParameters},
           {"sharded", g.numSharded},
           {"gathered_once", g.numGatheredOnce},
           {"gathered_more_than_once", g.numGatheredMoreThanOnce},
           {"never_gathered", g.numNeverGathered},
           {"exceptions", std::move(exceptions)},
           {"all_gathers", g.numGathers},
           {"all_gather_bytes", g.gatherBytes},
           {"sharded_bytes", g.shardedBytes},
           {"group_size", g.groupSize},
           {"zero_bound_bytes", g.zeroBoundBytes},
       }},
  };
  if (profile)
    json["step_time"] = stepTimeToJson(report, *profile);
  return json;
}

void mlir::sd::printReport(const CostReport &report, ReportFormat format,
                           llvm::raw_ostream &os,
                           const ::sd::NetworkModel &network,
                           const ::sd::HardwareProfile *profile) {
  if (format == ReportFormat::Text) {
    printText(report, network, os);
    if (profile)
      printStepTime(report, *profile, os);
    return;
  }
  os << llvm::formatv("{0:2}", reportToJson(report, network, profile)) << "\n";
}
