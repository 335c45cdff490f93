//===- Trace.cpp - Recording spans and writing Chrome trace events --------===//
//
// The recorder keeps complete events only: begin pushes an open span, end
// pops it and records its duration, so a track's spans nest by construction
// and a program that failed half-way leaves nothing broken behind (its open
// spans are discarded before the next run).
//
// The runtime links no LLVM, so the writer streams its JSON by hand: strings
// are escaped (quotes, backslashes, control characters, and malformed UTF-8
// replaced by U+FFFD), numbers are finite.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Trace.h"
#include "sd/Runtime/Runtime.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace sd;
using namespace sd::rt;

//===----------------------------------------------------------------------===//
// TraceRecorder
//===----------------------------------------------------------------------===//

void TraceRecorder::enable(bool enable, TraceClock::time_point start) {
  if (enable) {
    recorded.clear();
    open.clear();
    origin = start;
  }
  on = enable;
}

void TraceRecorder::clear() {
  open.clear();
  recorded.clear();
  strings.clear();
  byPointer.clear();
  byText.clear();
}

int64_t TraceRecorder::sinceOrigin(TraceClock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin)
      .count();
}

uint32_t TraceRecorder::intern(std::string_view text) {
  auto [it, inserted] =
      byText.try_emplace(std::string(text), static_cast<uint32_t>(0));
  if (inserted) {
    it->second = static_cast<uint32_t>(strings.size());
    strings.emplace_back(text);
  }
  return it->second;
}

uint32_t TraceRecorder::intern(const char *text) {
  if (!text)
    text = "<unnamed>";
  auto it = byPointer.find(text);
  if (it != byPointer.end() && strings[it->second] == text)
    return it->second;
  uint32_t index = intern(std::string_view(text));
  byPointer[text] = index;
  return index;
}

void TraceRecorder::begin(const char *name, const char *category, double flops,
                          double bytes) {
  if (!on)
    return;
  // Interned before reading the clock, so that the span does not include
  // the first sight of a name.
  Open span{intern(name), intern(category), 0, flops, bytes};
  span.beginNs = sinceOrigin(TraceClock::now());
  open.push_back(span);
}

void TraceRecorder::end() {
  if (!on || open.empty())
    return;
  int64_t endNs = sinceOrigin(TraceClock::now());
  const Open &span = open.back();
  recorded.push_back({span.name, span.category, span.beginNs,
                      std::max<int64_t>(endNs - span.beginNs, 0), span.flops,
                      span.bytes});
  open.pop_back();
}

void TraceRecorder::span(std::string_view name, std::string_view category,
                         TraceClock::time_point begin,
                         TraceClock::time_point end, double flops,
                         double bytes) {
  if (!on)
    return;
  int64_t beginNs = std::max<int64_t>(sinceOrigin(begin), 0);
  int64_t endNs = std::max(sinceOrigin(end), beginNs);
  recorded.push_back(
      {intern(name), intern(category), beginNs, endNs - beginNs, flops, bytes});
}

//===----------------------------------------------------------------------===//
// MeshRuntime's tracing
//===----------------------------------------------------------------------===//

void MeshRuntime::enableTracing(bool enable) {
  if (enable == tracing)
    return;
  TraceClock::time_point origin = TraceClock::now();
  for (std::unique_ptr<Device> &device : devices)
    device->trace().enable(enable, origin);
  hostRecorder.enable(enable, origin);
  loaderRecorder.enable(enable, origin);
  tracing = enable;
}

void MeshRuntime::traceHostSpan(std::string_view name,
                                TraceClock::time_point begin,
                                TraceClock::time_point end,
                                std::string_view category) {
  hostRecorder.span(name, category, begin, end);
}

void MeshRuntime::traceLoaderSpan(std::string_view name,
                                  TraceClock::time_point begin,
                                  TraceClock::time_point end) {
  loaderRecorder.span(name, "data", begin, end);
}

//===----------------------------------------------------------------------===//
// The Chrome trace writer
//===----------------------------------------------------------------------===//

namespace {

/// The length of the well-formed UTF-8 sequence at `s[0..n)`, or 0.
size_t utf8Length(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t length = c >= 0xF0 && c <= 0xF4   ? 4
                  : c >= 0xE0              ? 3
                  : c >= 0xC2 && c <= 0xDF ? 2
                                           : 0;
  if (c >= 0xF5 || length == 0 || length > n)
    return 0;
  for (size_t i = 1; i < length; ++i)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  // Overlong forms, surrogates and code points past U+10FFFF.
  if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) ||
      (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
    return 0;
  return length;
}

/// `text` as a JSON string literal.
void appendJsonString(std::string &out, std::string_view text) {
  out += '"';
  const auto *s = reinterpret_cast<const unsigned char *>(text.data());
  size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    if (c >= 0x80) {
      size_t length = utf8Length(s + i, n - i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.data() + i, length);
        i += length;
      }
      continue;
    }
    ++i;
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        absl::StrAppendFormat(&out, "\\u%04x", c);
      else
        out += static_cast<char>(c);
    }
  }
  out += '"';
}

/// A JSON number: non-finite values (which JSON lacks) become 0.
std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "0";
  return absl::StrFormat("%.17g", value);
}

/// Streams the file's events, a comma before all but the first.
class EventWriter {
public:
  explicit EventWriter(std::ofstream &os) : os(os) {}
  void metadata(int64_t tid, std::string_view name, std::string_view key,
                std::string_view value) {
    std::string line = absl::StrFormat(R"({"ph": "M", "pid": 0, "tid": %d, )"
                                       R"("name": ")",
                                       tid);
    line += name;
    line += R"(", "args": {")";
    line += key;
    line += R"(": )";
    line += value;
    line += "}}";
    emit(line);
  }
  void span(int64_t tid, const TraceRecorder &track, const TraceEvent &e) {
    ++spans;
    std::string line =
        absl::StrFormat(R"({"ph": "X", "pid": 0, "tid": %d, "name": )", tid);
    appendJsonString(line, track.string(e.name));
    line += R"(, "cat": )";
    appendJsonString(line, track.string(e.category));
    absl::StrAppendFormat(&line,
                          R"(, "ts": %.3f, "dur": %.3f, "args": {"flops": )",
                          static_cast<double>(e.beginNs) / 1e3,
                          static_cast<double>(e.durationNs) / 1e3);
    absl::StrAppend(&line, jsonNumber(e.flops), R"(, "bytes": )",
                    jsonNumber(e.bytes), "}}");
    emit(line);
  }
  /// A track: its name, its place in the UI, and its spans in begin order
  /// (outer before inner at equal begins).
  void track(int64_t tid, std::string_view name, const TraceRecorder &rec) {
    std::string quoted;
    appendJsonString(quoted, name);
    metadata(tid, "thread_name", "name", quoted);
    metadata(tid, "thread_sort_index", "sort_index", std::to_string(tid));
    std::vector<const TraceEvent *> order;
    order.reserve(rec.events().size());
    for (const TraceEvent &e : rec.events())
      order.push_back(&e);
    std::stable_sort(order.begin(), order.end(),
                     [](const TraceEvent *a, const TraceEvent *b) {
                       if (a->beginNs != b->beginNs)
                         return a->beginNs < b->beginNs;
                       return a->durationNs > b->durationNs;
                     });
    for (const TraceEvent *e : order)
      span(tid, rec, *e);
  }

  int64_t numSpans() const { return spans; }

private:
  void emit(const std::string &line) {
    os << (first ? "\n" : ",\n") << line;
    first = false;
  }
  std::ofstream &os;
  bool first = true;
  int64_t spans = 0;
};

/// "device 3 (data=1, fsdp=1)".
std::string deviceTrackName(const MeshSpec &mesh, Device &device) {
  std::string name = absl::StrCat("device ", device.id(), " (");
  const std::vector<MeshAxis> &axes = mesh.axes();
  for (size_t a = 0; a < axes.size(); ++a)
    absl::StrAppend(&name, a ? ", " : "", axes[a].name, "=",
                    device.coordinates()[a]);
  return name + ")";
}

} // namespace

absl::StatusOr<int64_t> sd::rt::writeChromeTrace(MeshRuntime &runtime,
                                                 const std::string &path) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  auto fail = [&](std::string_view what) {
    int error = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrFormat(
        "cannot %s trace file '%s': %s", what, path, std::strerror(error)));
  };
  std::ofstream os(tmp, std::ios::trunc);
  if (!os)
    return fail("create");
  os << R"({"traceEvents": [)";
  EventWriter writer(os);
  std::string process;
  appendJsonString(process, "sd mesh " + runtime.mesh().toString());
  writer.metadata(0, "process_name", "name", process);
  writer.track(0, "host", runtime.hostTrace());
  for (int64_t id = 0; id < runtime.numDevices(); ++id) {
    Device &device = runtime.device(id);
    writer.track(id + 1, deviceTrackName(runtime.mesh(), device),
                 device.trace());
  }
  if (!runtime.loaderTrace().events().empty())
    writer.track(runtime.numDevices() + 1, "data loader",
                 runtime.loaderTrace());
  os << "\n],\n"
     << R"("displayTimeUnit": "ms"})"
     << "\n";
  os.close();
  if (!os)
    return fail("write");
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("rename the temporary file to");
  return writer.numSpans();
}
