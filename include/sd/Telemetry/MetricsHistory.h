//===- MetricsHistory.h - What a resumed run keeps of its metrics -*- C++
//-*-===//
//
// A resumed run continues its metrics files: the steps after its checkpoint
// belong to the abandoned part of the earlier run and are dropped, and the
// loss curves of the steps before it are read back for the run's plot.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TELEMETRY_METRICSHISTORY_H
#define SD_TELEMETRY_METRICSHISTORY_H

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sd::telemetry {

/// Keeps the lines of a JSON-lines metrics file whose "step" is at most
/// `lastStep` (lines that do not parse are dropped too); written beside the
/// file and renamed into place. A missing file is left missing.
absl::Status trimMetricsLines(const std::string &path, int64_t lastStep);

/// (step, value) of column `column` of a metrics CSV's rows up to
/// `lastStep`, where the value is a finite number; empty when the file or
/// the column is missing.
std::vector<std::pair<int64_t, double>>
readMetricsHistory(const std::string &path, std::string_view column,
                   int64_t lastStep);

} // namespace sd::telemetry

#endif // SD_TELEMETRY_METRICSHISTORY_H
