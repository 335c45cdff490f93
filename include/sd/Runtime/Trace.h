//===- Trace.h - Per-device timelines of a mesh run -------------*- C++ -*-===//
//
// When tracing is on, every device records the spans its program brackets
// with trace_begin/trace_end (ProgramABI.h): one complete event per kernel,
// GEMM, collective and memory move, with its FLOPs and bytes. The host
// (sdrun) adds its own spans ("step 3", "checkpoint") on a track of its
// own. `writeChromeTrace` writes them all as Chrome trace events, which
// Perfetto (ui.perfetto.dev) and chrome://tracing load.
//
// Recording is per device and unsynchronized: a device's recorder is
// touched only by the thread that runs the device. Times are steady-clock
// nanoseconds from one origin, set when tracing is enabled, so the tracks
// line up.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_TRACE_H
#define SD_RUNTIME_TRACE_H

#include "absl/status/statusor.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sd::rt {

class MeshRuntime;

using TraceClock = std::chrono::steady_clock;

/// One complete span of a track. Names and categories are indices into the
/// recorder's strings, so events stay valid after the program that named
/// them is unloaded.
struct TraceEvent {
  uint32_t name;
  uint32_t category;
  /// Nanoseconds from the trace origin.
  int64_t beginNs;
  int64_t durationNs;
  double flops;
  double bytes;
};

/// The spans of one track (a device, or the host). begin/end keep a stack
/// of open spans, so that what is recorded always nests.
class TraceRecorder {
public:
  /// Starts recording from `origin`, dropping earlier events; or stops
  /// (keeping the events for the writer).
  void enable(bool on, TraceClock::time_point origin);
  bool enabled() const { return on; }

  /// Opens a span; `name` and `category` are copied the first time each
  /// pointer is seen (programs pass string literals). No-op when disabled.
  void begin(const char *name, const char *category, double flops,
             double bytes);
  /// Closes the innermost open span; no-op when disabled or none is open.
  void end();
  /// Records a closed span (clamped to start no earlier than the origin).
  /// No-op when disabled.
  void span(std::string_view name, std::string_view category,
            TraceClock::time_point begin, TraceClock::time_point end,
            double flops = 0, double bytes = 0);
  /// Forgets the open spans: a program that failed returned without closing
  /// them. Called before each run.
  void discardOpen() { open.clear(); }
  /// Drops all events and strings.
  void clear();

  const std::vector<TraceEvent> &events() const { return recorded; }
  /// Spans begun and not yet ended.
  size_t numOpen() const { return open.size(); }
  const std::string &string(uint32_t index) const { return strings[index]; }

private:
  /// The index of `text`, copied on first sight of the pointer (or when the
  /// pointer now holds another text: a program unloaded and another loaded
  /// at the same address).
  uint32_t intern(const char *text);
  uint32_t intern(std::string_view text);
  int64_t sinceOrigin(TraceClock::time_point t) const;

  struct Open {
    uint32_t name;
    uint32_t category;
    int64_t beginNs;
    double flops;
    double bytes;
  };
  bool on = false;
  TraceClock::time_point origin;
  std::vector<Open> open;
  std::vector<TraceEvent> recorded;
  std::vector<std::string> strings;
  /// Only looked up, never iterated: output does not depend on its order.
  std::unordered_map<const char *, uint32_t> byPointer;
  std::unordered_map<std::string, uint32_t> byText;
};

/// Writes `runtime`'s trace to `path` as a Chrome trace event file (the JSON
/// object format): a process named after the mesh ("sd mesh data:2,fsdp:2"),
/// a "host" thread (tid 0) and one thread per device ("device 3 (data=1,
/// fsdp=1)", tid = device id + 1), and one "X" event per span with `ts` and
/// `dur` in microseconds and args {flops, bytes}. Written to a temporary
/// file and renamed, so readers never see a partial trace. Returns the
/// number of spans written. Call it between runs (not while devices run).
absl::StatusOr<int64_t> writeChromeTrace(MeshRuntime &runtime,
                                         const std::string &path);

} // namespace sd::rt

#endif // SD_RUNTIME_TRACE_H
