//===- Report.h - printing sdopt's report -----------------------*- C++ -*-===//
//
// The cost model's report (CostModel.h) as a text table for people, with
// human units, and as JSON (llvm::json) with exact numbers for scripts.
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_REPORT_H
#define SD_ANALYSIS_REPORT_H

#include "sd/Analysis/CostModel.h"
#include "sd/Sharding/Hardware.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace mlir::sd {

/// What `sd-print-report` and `sdopt --report` print.
enum class ReportFormat { Text, Json };

/// Decimal (SI) units with one decimal from 1 kB up: "64 B", "33.0 MB".
std::string formatBytes(int64_t bytes);

/// Likewise for FLOPs: "512 FLOP", "1.2 GFLOP".
std::string formatFlops(int64_t flops);

/// The report as JSON; every number exact (see the README for the keys),
/// with the communication time `network` predicts per set of mesh axes.
llvm::json::Value reportToJson(const CostReport &report,
                               const ::sd::NetworkModel &network = {},
                               const ::sd::HardwareProfile *profile = nullptr);

/// Prints the text table or the JSON (indented, with a final newline).
/// With `profile`, also the step's predicted time on it
/// (sd/Analysis/StepTime.h).
void printReport(const CostReport &report, ReportFormat format,
                 llvm::raw_ostream &os, const ::sd::NetworkModel &network = {},
                 const ::sd::HardwareProfile *profile = nullptr);

} // namespace mlir::sd

#endif // SD_ANALYSIS_REPORT_H
