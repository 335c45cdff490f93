//===- MetricsCsv.cpp - Per-step metrics file of a training run -----------===//
//
// Opening (fresh or resumed) and row writing. A resumed file is rewritten
// through a temporary file and a rename, so an interrupted resume never
// leaves a half-trimmed file behind; a fresh one is written beside the old
// one and renamed over it with its first row.
//
//===----------------------------------------------------------------------===//

#include "sd/Telemetry/MetricsCsv.h"

#include "sd/Support/Files.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

using namespace sd::telemetry;

namespace {

absl::Status errnoError(int error, const std::string &message) {
  return absl::ErrnoToStatus(error, message);
}

/// Column names are written verbatim, so they must not need CSV quoting;
/// `wall_time` and `step` are the writer's own columns.
absl::Status checkColumns(const std::string &path,
                          const std::vector<std::string> &columns) {
  std::set<std::string> seen = {"wall_time", "step"};
  for (const std::string &column : columns) {
    if (column.empty())
      return absl::InvalidArgumentError(
          absl::StrFormat("empty column name for metrics file '%s'", path));
    if (column.find_first_of(",\"\r\n") != std::string::npos)
      return absl::InvalidArgumentError(absl::StrFormat(
          "column name \"%s\" for metrics file '%s' contains a comma, quote "
          "or newline",
          column, path));
    if (!seen.insert(column).second)
      return absl::InvalidArgumentError(absl::StrFormat(
          "duplicate column \"%s\" for metrics file '%s'", column, path));
  }
  return absl::OkStatus();
}

std::string formatValue(double value) {
  if (std::isnan(value))
    return "nan"; // never "-nan"
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  // Nine significant digits round-trip a float32 exactly.
  return absl::StrFormat("%.9g", value);
}

/// Reads the rows of an existing metrics file that a run resumed at
/// `resumeStep` keeps. Sets `exists` to whether the file had any content.
absl::Status readKeptRows(const std::string &path, const std::string &header,
                          int64_t resumeStep, bool &exists,
                          std::vector<std::string> &kept) {
  exists = false;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      sd::readRegularFile(path, "metrics file", kMaxMetricsFileBytes);
  if (!buffer.ok())
    return buffer.status();
  std::string content = (*buffer)->getBuffer().str();
  exists = !content.empty();
  if (!exists)
    return absl::OkStatus();

  std::vector<std::string> lines = absl::StrSplit(content, '\n');
  // The text after the last newline is empty, or a row cut short by a kill
  // in the middle of a write; neither is a row.
  lines.pop_back();
  if (lines.empty())
    return absl::FailedPreconditionError(
        absl::StrFormat("metrics file '%s' has no complete header line", path));
  auto stripCr = [](std::string &line) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
  };
  stripCr(lines[0]);
  if (lines[0] != header)
    return absl::FailedPreconditionError(absl::StrFormat(
        "metrics file '%s' has header '%s' but this run logs '%s'; use a new "
        "run name or remove the file",
        path, lines[0], header));
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string &line = lines[i];
    stripCr(line);
    if (line.empty())
      continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    int64_t step = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &step))
      return absl::DataLossError(
          absl::StrFormat("metrics file '%s' line %d: no integer step in '%s'",
                          path, i + 1, line));
    if (step <= resumeStep)
      kept.push_back(std::move(line));
  }
  return absl::OkStatus();
}

/// Replaces `path` with `header` and `rows` via a temporary file.
absl::Status rewriteFile(const std::string &path, const std::string &header,
                         const std::vector<std::string> &rows) {
  std::string tmpPath = path + ".tmp";
  std::FILE *out = std::fopen(tmpPath.c_str(), "wb");
  if (!out)
    return errnoError(
        errno, absl::StrFormat("cannot write metrics file '%s'", tmpPath));
  std::string text = absl::StrCat(header, "\n");
  for (const std::string &row : rows)
    absl::StrAppend(&text, row, "\n");
  bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  int error = errno;
  if (std::fclose(out) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    std::remove(tmpPath.c_str());
    return errnoError(
        error, absl::StrFormat("cannot write metrics file '%s'", tmpPath));
  }
  if (std::rename(tmpPath.c_str(), path.c_str()) != 0) {
    error = errno;
    std::remove(tmpPath.c_str());
    return errnoError(
        error, absl::StrFormat("cannot replace metrics file '%s'", path));
  }
  return absl::OkStatus();
}

} // namespace

absl::Status MetricsCsv::open(const std::string &path,
                              const std::vector<std::string> &columns,
                              bool append, int64_t resumeStep) {
  file.reset();
  numKeptRows = 0;
  if (pendingTmp) {
    std::remove(pendingTmp->c_str());
    pendingTmp.reset();
  }
  if (absl::Status status = checkColumns(path, columns); !status.ok())
    return status;
  filePath = path;
  numColumns = columns.size();
  headerLine = absl::StrCat("wall_time,step", columns.empty() ? "" : ",",
                            absl::StrJoin(columns, ","));

  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return errnoError(ec.value(),
                        absl::StrFormat("cannot create directory '%s' for "
                                        "metrics file '%s'",
                                        parent.string(), path));
  }

  if (append) {
    bool exists = false;
    std::vector<std::string> kept;
    if (absl::Status status =
            readKeptRows(path, headerLine, resumeStep, exists, kept);
        !status.ok())
      return status;
    if (exists) {
      if (absl::Status status = rewriteFile(path, headerLine, kept);
          !status.ok())
        return status;
      file.reset(std::fopen(path.c_str(), "ab"));
      if (!file)
        return errnoError(
            errno, absl::StrFormat("cannot open metrics file '%s'", path));
      numKeptRows = kept.size();
      return absl::OkStatus();
    }
  }

  // A new file starts beside an old one, which it replaces with its first
  // row (or when closed): a run that fails before it logs anything leaves
  // the old file as it was.
  std::string tmpPath = path + ".tmp";
  file.reset(std::fopen(tmpPath.c_str(), "wb"));
  if (!file)
    return errnoError(
        errno, absl::StrFormat("cannot create metrics file '%s'", tmpPath));
  pendingTmp = std::make_unique<std::string>(tmpPath);
  std::string text = headerLine + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file.get()) != text.size() ||
      std::fflush(file.get()) != 0) {
    int error = errno;
    file.reset();
    return errnoError(
        error, absl::StrFormat("cannot write metrics file '%s'", tmpPath));
  }
  // Nothing to keep: the new file is in place at once.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return putInPlace();
  return absl::OkStatus();
}

absl::Status MetricsCsv::putInPlace() {
  if (!pendingTmp)
    return absl::OkStatus();
  std::unique_ptr<std::string> tmpPath = std::move(pendingTmp);
  if (std::rename(tmpPath->c_str(), filePath.c_str()) != 0) {
    int error = errno;
    std::remove(tmpPath->c_str());
    return errnoError(error, absl::StrFormat("cannot replace metrics file "
                                             "'%s'",
                                             filePath));
  }
  return absl::OkStatus();
}

MetricsCsv::~MetricsCsv() {
  if (pendingTmp)
    std::remove(pendingTmp->c_str());
}

absl::Status MetricsCsv::write(int64_t step, absl::Span<const double> values) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  double seconds = std::chrono::duration<double>(now).count();
  return writeAt(seconds, step, values);
}

absl::Status MetricsCsv::writeAt(double wallTimeSeconds, int64_t step,
                                 absl::Span<const double> values) {
  if (!file)
    return absl::FailedPreconditionError(
        absl::StrFormat("metrics file '%s' is not open", filePath));
  if (values.size() != numColumns)
    return absl::InvalidArgumentError(absl::StrFormat(
        "metrics file '%s' has %d value columns, got %d values for step %d",
        filePath, numColumns, values.size(), step));
  // Millisecond precision, like TensorBoard's wall times.
  std::string row = absl::StrFormat("%.3f,%d", wallTimeSeconds, step);
  for (double value : values)
    absl::StrAppend(&row, ",", formatValue(value));
  row += '\n';
  // Flushed per row so that a killed run keeps everything it logged.
  if (std::fwrite(row.data(), 1, row.size(), file.get()) != row.size() ||
      std::fflush(file.get()) != 0)
    return errnoError(
        errno, absl::StrFormat("cannot write metrics file '%s'", filePath));
  return putInPlace();
}

absl::Status MetricsCsv::close() {
  if (!file)
    return absl::OkStatus();
  std::FILE *f = file.release();
  if (std::fclose(f) != 0)
    return errnoError(
        errno, absl::StrFormat("cannot close metrics file '%s'", filePath));
  return putInPlace();
}
