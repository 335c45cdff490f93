//===- TraceTest.cpp - Tests for per-device traces ------------------------===//
//
// A tiny hand-written device program (embedding ProgramABI.h the way
// generated ones do) brackets a kernel, a nested kernel and an all_reduce
// with trace_begin/trace_end; it runs on 2- and 4-device meshes, and the
// Chrome trace written from it is parsed back by Python's json module.
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/Trace.h"
#include "RuntimeTestUtils.h"
#include "sd/Runtime/Program.h"
#include "sd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sd::rt {
namespace {

using ::sd::rt::testutil::compileAndLoad;
using ::sd::rt::testutil::programText;
using ::sd::rt::testutil::SuiteTempDirTest;

/// args[0]: 4 floats x, args[1]: 1 float, negative to fail half-way (with
/// a span open). Result 0 = all_reduce over every mesh axis of 2·x, under
/// the spans "step body" ⊃ {"k0 mul", "all_reduce"}. `numAxes` is the
/// mesh's axis count.
std::string programSource(int numAxes) {
  std::string axes;
  for (int a = 0; a < numAxes; ++a)
    axes += (a ? ", " : "") + std::to_string(a);
  return programText(R"(
static const SdCollective coll0 = {
    SD_ALL_REDUCE, SD_F32, 1, {4}, {4}, {0}, {{0}}, )" +
                         std::to_string(numAxes) + ", {" + axes +
                         R"(}, 0, 0, 0, 0, nullptr,
    "%sum = sd.all_reduce"};

extern "C" int32_t sd_program_run(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results) {
  const float *x = static_cast<const float *>(args[0]);
  const float *fail = static_cast<const float *>(args[1]);
  api->trace_begin(dev, "step body", "kernel", 0, 0);
  if (fail[0] < 0)
    return 1;
  float *y = static_cast<float *>(api->alloc(dev, 16, SD_DEVICE_MEMORY, "%y"));
  float *z = static_cast<float *>(api->alloc(dev, 16, SD_DEVICE_MEMORY, "%z"));
  if (!y || !z)
    return 1;
  api->trace_begin(dev, "k0 mul \"scaled\"\\ (t.mlir:3)\n", "kernel", 4, 32);
  for (int i = 0; i < 4; ++i)
    y[i] = 2.0f * x[i];
  api->trace_end(dev);
  api->trace_begin(dev, "all_reduce x 4", "collective", 0, 24);
  if (int32_t st = api->collective(dev, &coll0, y, z))
    return st;
  api->trace_end(dev);
  api->release(dev, y);
  api->trace_end(dev);
  results[0] = z;
  return 0;
}
)",
                     /*numArgs=*/2, /*numResults=*/1);
}

SdDevice *toSd(Device &device) { return reinterpret_cast<SdDevice *>(&device); }

/// A fresh directory for compiled programs and trace files.
class TraceTest : public SuiteTempDirTest<TraceTest> {
protected:
  /// A runtime on `mesh` and the program compiled for its axis count.
  void setUpMesh(const MeshSpec &mesh) {
    MeshRuntimeOptions options;
    options.mesh = mesh;
    options.threadsPerDevice = 1;
    absl::StatusOr<std::unique_ptr<MeshRuntime>> created =
        MeshRuntime::create(std::move(options));
    ASSERT_TRUE(created.ok()) << created.status();
    runtime = std::move(*created);
    program = compileAndLoad(
        programSource(static_cast<int>(mesh.axes().size())), *root + "/cache");
    ASSERT_NE(program, nullptr);
  }

  /// Runs the program once on every device with x = (id, id, id, id);
  /// returns each device's result (empty on failure).
  absl::Status runStep(bool fail, std::vector<std::vector<float>> *sums) {
    sums->assign(runtime->numDevices(), {});
    return runtime->runOnDevices([&](Device &device) -> absl::Status {
      float x[4];
      for (float &v : x)
        v = static_cast<float>(device.id());
      float failFlag = fail ? -1.0f : 1.0f;
      void *args[2] = {x, &failFlag};
      void *results[1] = {nullptr};
      const SdApi *api = MeshRuntime::api();
      if (program->entry()(api, toSd(device), args, results) != 0)
        return device.error().ok() ? absl::InternalError("program failed")
                                   : device.error();
      auto *z = static_cast<float *>(results[0]);
      (*sums)[device.id()].assign(z, z + 4);
      api->release(toSd(device), z);
      return absl::OkStatus();
    });
  }

  std::string eventName(Device &device, const TraceEvent &e) {
    return device.trace().string(e.name);
  }

  std::unique_ptr<MeshRuntime> runtime;
  std::unique_ptr<LoadedProgram> program;
};

/// Spans of one track either nest or are disjoint.
void expectNested(const std::vector<TraceEvent> &events) {
  for (const TraceEvent &a : events)
    for (const TraceEvent &b : events) {
      int64_t aEnd = a.beginNs + a.durationNs, bEnd = b.beginNs + b.durationNs;
      bool disjoint = aEnd <= b.beginNs || bEnd <= a.beginNs;
      bool aInB = b.beginNs <= a.beginNs && aEnd <= bEnd;
      bool bInA = a.beginNs <= b.beginNs && bEnd <= aEnd;
      EXPECT_TRUE(disjoint || aInB || bInA)
          << a.beginNs << "+" << a.durationNs << " vs " << b.beginNs << "+"
          << b.durationNs;
    }
}

const MeshSpec kMeshes[] = {MeshSpec({{"data", 2, 1}}),
                            MeshSpec({{"data", 2, 1}, {"fsdp", 2, 1}})};

TEST_F(TraceTest, EveryDeviceRecordsItsSpans) {
  for (const MeshSpec &mesh : kMeshes) {
    SCOPED_TRACE(mesh.toString());
    setUpMesh(mesh);
    ASSERT_TRUE(runtime);
    runtime->enableTracing(true);
    EXPECT_TRUE(runtime->tracingEnabled());
    std::vector<std::vector<float>> sums;
    for (int step = 0; step < 2; ++step)
      ASSERT_TRUE(runStep(/*fail=*/false, &sums).ok());
    // Σ 2·id over the devices.
    int64_t n = runtime->numDevices();
    float expected = static_cast<float>(n * (n - 1));
    for (int64_t id = 0; id < n; ++id) {
      EXPECT_EQ(sums[id], std::vector<float>(4, expected));
      Device &device = runtime->device(id);
      const std::vector<TraceEvent> &events = device.trace().events();
      // Per step: the kernel, the collective, then the enclosing body (a
      // span is recorded when it ends).
      ASSERT_EQ(events.size(), 6u);
      for (int step = 0; step < 2; ++step) {
        const TraceEvent &kernel = events[3 * step];
        const TraceEvent &collective = events[3 * step + 1];
        const TraceEvent &body = events[3 * step + 2];
        EXPECT_EQ(eventName(device, kernel),
                  "k0 mul \"scaled\"\\ (t.mlir:3)\n");
        EXPECT_EQ(device.trace().string(kernel.category), "kernel");
        EXPECT_EQ(kernel.flops, 4);
        EXPECT_EQ(kernel.bytes, 32);
        EXPECT_EQ(eventName(device, collective), "all_reduce x 4");
        EXPECT_EQ(device.trace().string(collective.category), "collective");
        EXPECT_EQ(collective.bytes, 24);
        EXPECT_EQ(eventName(device, body), "step body");
        EXPECT_LE(body.beginNs, kernel.beginNs);
        EXPECT_LE(kernel.beginNs + kernel.durationNs, collective.beginNs);
        EXPECT_LE(collective.beginNs + collective.durationNs,
                  body.beginNs + body.durationNs);
        EXPECT_GE(kernel.beginNs, 0);
      }
      EXPECT_LE(events[2].beginNs + events[2].durationNs, events[3].beginNs);
      expectNested(events);
    }
  }
}

TEST_F(TraceTest, NothingIsRecordedWhileTracingIsOff) {
  setUpMesh(kMeshes[1]);
  ASSERT_TRUE(runtime);
  EXPECT_FALSE(runtime->tracingEnabled());
  std::vector<std::vector<float>> sums;
  ASSERT_TRUE(runStep(false, &sums).ok());
  auto now = TraceClock::now();
  runtime->traceHostSpan("step 1", now, now);
  for (int64_t id = 0; id < runtime->numDevices(); ++id)
    EXPECT_TRUE(runtime->device(id).trace().events().empty());
  EXPECT_TRUE(runtime->hostTrace().events().empty());

  // Stopping keeps what was recorded; starting again drops it.
  runtime->enableTracing(true);
  ASSERT_TRUE(runStep(false, &sums).ok());
  runtime->enableTracing(false);
  ASSERT_TRUE(runStep(false, &sums).ok());
  EXPECT_EQ(runtime->device(3).trace().events().size(), 3u);
  runtime->enableTracing(true);
  EXPECT_TRUE(runtime->device(3).trace().events().empty());
}

TEST_F(TraceTest, AFailedProgramLeavesNoOpenSpanBehind) {
  setUpMesh(kMeshes[0]);
  ASSERT_TRUE(runtime);
  runtime->enableTracing(true);
  std::vector<std::vector<float>> sums;
  EXPECT_FALSE(runStep(/*fail=*/true, &sums).ok());
  EXPECT_EQ(runtime->device(0).trace().numOpen(), 1u);
  ASSERT_TRUE(runStep(false, &sums).ok());
  for (int64_t id = 0; id < runtime->numDevices(); ++id) {
    Device &device = runtime->device(id);
    const std::vector<TraceEvent> &events = device.trace().events();
    ASSERT_EQ(events.size(), 3u);
    // The failed run's "step body" was dropped, not left open forever or
    // closed by this run's last trace_end.
    EXPECT_EQ(device.trace().numOpen(), 0u);
    EXPECT_EQ(eventName(device, events[2]), "step body");
    EXPECT_LE(events[2].beginNs, events[0].beginNs);
    expectNested(events);
  }
}

TEST_F(TraceTest, WritesAChromeTraceThatParses) {
  setUpMesh(kMeshes[1]);
  ASSERT_TRUE(runtime);
  runtime->enableTracing(true);
  std::vector<std::vector<float>> sums;
  for (int step = 1; step <= 2; ++step) {
    auto begin = TraceClock::now();
    ASSERT_TRUE(runStep(false, &sums).ok());
    runtime->traceHostSpan("step " + std::to_string(step), begin,
                           TraceClock::now());
  }
  // A name that needs escaping, and bytes that are not UTF-8.
  auto now = TraceClock::now();
  runtime->traceHostSpan("checkpoint \"a\"\t\x01 \xff\xc3", now, now,
                         "checkpoint");
  std::string path = *root + "/trace.json";
  absl::StatusOr<int64_t> written = writeChromeTrace(*runtime, path);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, 4 * 6 + 3);

  // Python's json module checks the syntax and the structure: one
  // thread_name per device plus the host, 6 spans per device and 3 on the
  // host, spans of a track nested.
  std::string script = *root + "/check.py";
  std::ofstream(script) << R"py(import json, sys
trace = json.load(open(sys.argv[1]))
assert trace["displayTimeUnit"] == "ms"
events = trace["traceEvents"]
meta = [e for e in events if e["ph"] == "M"]
names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
assert names == {0: "host", 1: "device 0 (data=0, fsdp=0)",
                 2: "device 1 (data=0, fsdp=1)", 3: "device 2 (data=1, fsdp=0)",
                 4: "device 3 (data=1, fsdp=1)"}, names
process = [e for e in meta if e["name"] == "process_name"]
assert process[0]["args"]["name"] == "sd mesh data:2,fsdp:2", process
spans = [e for e in events if e["ph"] == "X"]
for tid in range(1, 5):
    mine = [e for e in spans if e["tid"] == tid]
    assert len(mine) == 6, mine
    assert sorted(e["cat"] for e in mine) == ["collective"] * 2 + ["kernel"] * 4
    kernel = [e for e in mine if e["name"].startswith("k0")][0]
    assert kernel["name"] == 'k0 mul "scaled"\\ (t.mlir:3)\n', kernel
    assert kernel["args"] == {"flops": 4, "bytes": 32}, kernel
    for a in mine:
        for b in mine:
            ae, be = a["ts"] + a["dur"], b["ts"] + b["dur"]
            assert (ae <= b["ts"] or be <= a["ts"] or
                    (b["ts"] <= a["ts"] and ae <= be) or
                    (a["ts"] <= b["ts"] and be <= ae)), (a, b)
host = [e for e in spans if e["tid"] == 0]
assert [e["name"] for e in host] == ["step 1", "step 2",
                                     'checkpoint "a"\t\x01 \ufffd\ufffd'], host
assert host[2]["cat"] == "checkpoint"
)py";
  std::string command = "python3 '" + script + "' '" + path + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  // No temporary file is left beside it.
  std::string leftover = "ls '" + *root + "' | grep -q tmp";
  EXPECT_NE(std::system(leftover.c_str()), 0);
}

TEST_F(TraceTest, WritingToAMissingDirectoryFails) {
  setUpMesh(kMeshes[0]);
  ASSERT_TRUE(runtime);
  absl::Status status =
      writeChromeTrace(*runtime, *root + "/no/such/dir/trace.json").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("no/such/dir/trace.json"), std::string::npos)
      << status;
}

} // namespace
} // namespace sd::rt
