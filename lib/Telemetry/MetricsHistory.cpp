//===- MetricsHistory.cpp - What a resumed run keeps of its metrics -------===//

#include "sd/Telemetry/MetricsHistory.h"

#include "sd/Support/Files.h"
#include "sd/Telemetry/MetricsCsv.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>

namespace sd::telemetry {

absl::Status trimMetricsLines(const std::string &path, int64_t lastStep) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      ::sd::readRegularFile(path, "metrics file", kMaxMetricsFileBytes);
  if (absl::IsNotFound(buffer.status()))
    return absl::OkStatus();
  if (!buffer.ok())
    return buffer.status();
  std::string kept;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
    if (!value) {
      llvm::consumeError(value.takeError());
      continue;
    }
    const llvm::json::Object *object = value->getAsObject();
    std::optional<int64_t> step =
        object ? object->getInteger("step") : std::nullopt;
    if (step && *step <= lastStep)
      kept += (line + "\n").str();
  }
  std::string tmp = path + ".tmp";
  {
    std::error_code error;
    llvm::raw_fd_ostream os(tmp, error);
    if (error)
      return absl::InternalError("cannot write '" + tmp +
                                 "': " + error.message());
    os << kept;
  }
  if (std::error_code error = llvm::sys::fs::rename(tmp, path))
    return absl::InternalError("cannot rename '" + tmp + "' to '" + path +
                               "': " + error.message());
  return absl::OkStatus();
}

std::vector<std::pair<int64_t, double>>
readMetricsHistory(const std::string &path, std::string_view column,
                   int64_t lastStep) {
  std::vector<std::pair<int64_t, double>> points;
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      ::sd::readRegularFile(path, "metrics file", kMaxMetricsFileBytes);
  if (!buffer.ok())
    return points;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty())
    return points;
  llvm::SmallVector<llvm::StringRef> header;
  lines.front().split(header, ',');
  auto it = llvm::find(header, llvm::StringRef(column.data(), column.size()));
  if (it == header.end())
    return points;
  size_t index = static_cast<size_t>(it - header.begin());
  for (llvm::StringRef line : llvm::drop_begin(lines)) {
    llvm::SmallVector<llvm::StringRef> fields;
    line.split(fields, ',');
    int64_t step;
    double value;
    if (fields.size() <= index || fields[1].getAsInteger(10, step) ||
        fields[index].getAsDouble(value) || !std::isfinite(value) ||
        step > lastStep)
      continue;
    points.emplace_back(step, value);
  }
  return points;
}

} // namespace sd::telemetry
