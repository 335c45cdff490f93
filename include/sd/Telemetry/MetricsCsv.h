//===- MetricsCsv.h - Per-step metrics file of a training run ---*- C++ -*-===//
//
// One wide CSV file per run (`<output_dir>/<run_name>/metrics.csv`) with a
// row per logged step:
//
//   wall_time,step,loss,lr,samples_per_s
//   1763802123.456,1,0.693147,0.0001,8.1
//
// Like TensorBoard's scalar CSV export (`Wall time,Step,Value`) but with all
// scalars side by side, so pandas or a spreadsheet reads it directly. Every
// row is flushed when written: a killed run keeps all rows it logged.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TELEMETRY_METRICSCSV_H
#define SD_TELEMETRY_METRICSCSV_H

#include "absl/status/status.h"
#include "absl/types/span.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace sd::telemetry {

/// The largest metrics file a resumed run reads back: a row is about 100
/// bytes, so 1 GiB holds ten million steps.
inline constexpr uint64_t kMaxMetricsFileBytes = uint64_t(1) << 30;

/// Writer of a run's metrics CSV. Not thread-safe.
class MetricsCsv {
public:
  MetricsCsv() = default;
  MetricsCsv(MetricsCsv &&) = default;
  MetricsCsv &operator=(MetricsCsv &&) = default;
  /// Removes a new file that never replaced the old one (see open()).
  ~MetricsCsv();

  /// Opens `path` for a run that logs `columns` (after `wall_time,step`),
  /// creating missing parent directories.
  ///
  /// With `append` false an existing file is replaced: the new one is
  /// written to `path.tmp` and renamed over it with its first row or by
  /// close(), so a run that ends before either keeps the old file as it was
  /// (the destructor removes `path.tmp`). With `append` true
  /// (a resumed run) the file's header must be the one this run writes, and
  /// of its rows only those with `step <= resumeStep` are kept: later rows
  /// belong to the part of the old run that the checkpoint does not cover
  /// and that will be run again. A missing file is created as if `append`
  /// were false; an existing one must be a regular file of at most
  /// kMaxMetricsFileBytes (sd::readRegularFile). Errors name `path`.
  absl::Status open(const std::string &path,
                    const std::vector<std::string> &columns, bool append,
                    int64_t resumeStep = std::numeric_limits<int64_t>::max());

  /// Appends a row stamped with the current wall time. `values` must have
  /// one entry per column; non-finite values are written as `nan`, `inf`,
  /// `-inf` (pandas reads them back).
  absl::Status write(int64_t step, absl::Span<const double> values);
  /// As write(), with an explicit wall time in seconds since the epoch.
  absl::Status writeAt(double wallTimeSeconds, int64_t step,
                       absl::Span<const double> values);
  /// Closes the file; later writes fail. Reports a failed final flush.
  absl::Status close();

  bool isOpen() const { return file != nullptr; }
  const std::string &path() const { return filePath; }
  /// The header line this writer writes, without the newline.
  const std::string &header() const { return headerLine; }
  /// The number of rows kept from the existing file by open() on resume.
  size_t keptRows() const { return numKeptRows; }

private:
  /// Renames the new file over the old one, once.
  absl::Status putInPlace();

  struct FileCloser {
    void operator()(std::FILE *f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file;
  std::string filePath;
  std::string headerLine;
  size_t numColumns = 0;
  size_t numKeptRows = 0;
  /// The new file not yet renamed to `filePath` (null once it is, and in a
  /// moved-from writer).
  std::unique_ptr<std::string> pendingTmp;
};

} // namespace sd::telemetry

#endif // SD_TELEMETRY_METRICSCSV_H
