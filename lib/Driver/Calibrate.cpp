//===- Calibrate.cpp - sdrun --calibrate: this machine as a profile -------===//

#include "sd/Driver/Calibrate.h"
#include "sd/Driver/TrainModelFile.h"
#include "sd/Passes/FlashTiling.h"

#include "sd/Runtime/Kernels.h"
#include "sd/Runtime/ProgramABI.h"
#include "sd/Runtime/Runtime.h"
#include "sd/Sharding/Network.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/Format.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

using namespace mlir::sd;
using namespace ::sd::rt;

namespace {

/// Wall seconds of `fn` run on every device at once.
absl::StatusOr<double>
timeOnDevices(MeshRuntime &runtime,
              const std::function<absl::Status(Device &)> &fn) {
  auto begin = std::chrono::steady_clock::now();
  if (absl::Status status = runtime.runOnDevices(fn); !status.ok())
    return status;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
      .count();
}

/// The most repetitions any process of `group` proposes: the ranks of a
/// collective measurement run the same count.
absl::StatusOr<int64_t> agreedRepetitions(ProcessGroup &group,
                                          int64_t proposed) {
  absl::StatusOr<std::vector<std::string>> all =
      group.allGather(std::to_string(proposed));
  if (!all.ok())
    return all.status();
  int64_t most = proposed;
  for (const std::string &text : *all) {
    int64_t count = 0;
    if (!absl::SimpleAtoi(text, &count))
      return absl::InternalError("a rank sent the repetitions '" + text +
                                 "', not a count");
    most = std::max(most, count);
  }
  return most;
}

/// The best seconds of one repetition of `work(device, repetitions)`:
/// three rounds of as many repetitions as fill about `seconds`, after one
/// that warms up and sizes them (with `group`, the count the processes
/// agree on).
absl::StatusOr<double>
bestSeconds(MeshRuntime &runtime, double seconds,
            const std::function<void(Device &, int64_t)> &work,
            ProcessGroup *group = nullptr) {
  auto run = [&](int64_t repetitions) {
    return timeOnDevices(runtime, [&](Device &device) {
      work(device, repetitions);
      return device.error();
    });
  };
  absl::StatusOr<double> once = run(1);
  if (!once.ok())
    return once.status();
  int64_t repetitions =
      std::clamp<int64_t>(int64_t(seconds / std::max(*once, 1e-9)), 1, 1000);
  if (group) {
    absl::StatusOr<int64_t> agreed = agreedRepetitions(*group, repetitions);
    if (!agreed.ok())
      return agreed.status();
    repetitions = *agreed;
  }
  double best = *once;
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<double> timed = run(repetitions);
    if (!timed.ok())
      return timed.status();
    best = std::min(best, *timed / double(repetitions));
  }
  return best;
}

/// A square GEMM of side `n` on every device, its operands of `Elem` (f32
/// through sd's sgemm, bf16 through oneDNN with f32 accumulation), with
/// `transposedLhs` in the Aᵀ·B form: FLOP/s per device.
template <typename Elem>
absl::StatusOr<double> gemmRate(MeshRuntime &runtime, int64_t n, double seconds,
                                Elem value, bool transposedLhs = false) {
  int64_t devices = runtime.numDevices();
  std::vector<std::vector<Elem>> a(devices), b(devices);
  std::vector<std::vector<float>> c(devices);
  for (int64_t d = 0; d < devices; ++d) {
    a[d].assign(n * n, value);
    b[d].assign(n * n, value);
    c[d].assign(n * n, 0.0f);
  }
  absl::StatusOr<double> best =
      bestSeconds(runtime, seconds, [&](Device &device, int64_t reps) {
        int64_t d = device.id() - runtime.firstDeviceId();
        for (int64_t r = 0; r < reps; ++r) {
          if constexpr (std::is_same_v<Elem, float>)
            kernels::gemm(1, transposedLhs, false, n, n, n, a[d].data(), n, 0,
                          b[d].data(), n, 0, 0.0f, c[d].data(), n, 0);
          else
            kernels::gemmBF16(1, false, false, n, n, n, a[d].data(), n, 0,
                              b[d].data(), n, 0, c[d].data(), false, n, 0);
        }
      });
  if (!best.ok())
    return best.status();
  return 2.0 * double(n) * double(n) * double(n) / *best;
}

/// Small products as a training step runs them: the score and value
/// products of an untiled attention, 24 heads of 256 tokens and head_dim
/// 64 (S = Q·Kᵀ, 256 × 256 × 64, then S·V, 256 × 64 × 256) on every
/// device: FLOP/s per device. A square 256³ GEMM runs about a third
/// faster on this workplace's CPUs than these thin products, which are most
/// of a step's small ones.
absl::StatusOr<double> headProductRate(MeshRuntime &runtime, double seconds) {
  constexpr int64_t kHeads = 24, kS = 256, kD = 64;
  int64_t devices = runtime.numDevices();
  std::vector<std::vector<float>> q(devices), k(devices), v(devices),
      scores(devices), out(devices);
  for (int64_t d = 0; d < devices; ++d) {
    q[d].assign(kHeads * kS * kD, 0.5f);
    k[d].assign(kHeads * kS * kD, 0.25f);
    v[d].assign(kHeads * kS * kD, 0.5f);
    scores[d].assign(kHeads * kS * kS, 0.0f);
    out[d].assign(kHeads * kS * kD, 0.0f);
  }
  absl::StatusOr<double> best =
      bestSeconds(runtime, seconds, [&](Device &device, int64_t reps) {
        int64_t d = device.id() - runtime.firstDeviceId();
        for (int64_t r = 0; r < reps; ++r) {
          kernels::gemm(kHeads, false, true, kS, kS, kD, q[d].data(), kD,
                        kS * kD, k[d].data(), kD, kS * kD, 0.0f,
                        scores[d].data(), kS, kS * kS);
          kernels::gemm(kHeads, false, false, kS, kD, kS, scores[d].data(), kS,
                        kS * kS, v[d].data(), kD, kS * kD, 0.0f, out[d].data(),
                        kD, kS * kD);
        }
      });
  if (!best.ok())
    return best.status();
  return 2.0 * 2.0 * double(kHeads * kS * kS * kD) / *best;
}

/// The bytes per second sd's non-product kernels move on every device at
/// once: one pass of a fused elementwise loop, as a device program compiles
/// them (each operand element read once, each result written once, the
/// device's threads splitting the loop), here kernels::addScaled over three
/// arrays of 16 MiB, more than the caches hold. A normalization kernel is
/// bound by its arithmetic on a CPU (layer norm moves under half these
/// bytes per second here), so it would price the step's loops too slow.
absl::StatusOr<double> kernelBandwidth(MeshRuntime &runtime, double seconds) {
  constexpr int64_t kFloats = (int64_t(16) << 20) / 4;
  int64_t devices = runtime.numDevices();
  std::vector<std::vector<float>> a(devices), b(devices), c(devices);
  for (int64_t d = 0; d < devices; ++d) {
    a[d].resize(kFloats);
    for (int64_t i = 0; i < kFloats; ++i)
      a[d][i] = float(i % 7);
    b[d].assign(kFloats, 0.5f);
    c[d].assign(kFloats, 0.0f);
  }
  absl::StatusOr<double> best =
      bestSeconds(runtime, seconds, [&](Device &device, int64_t reps) {
        int64_t d = device.id() - runtime.firstDeviceId();
        const float *x = a[d].data(), *y = b[d].data();
        float *z = c[d].data();
        for (int64_t r = 0; r < reps; ++r)
          kernels::addScaled(x, y, 1.0f + float(r % 2), z, kFloats);
      });
  if (!best.ok())
    return best.status();
  return 3.0 * double(kFloats) * 4.0 / *best;
}

/// sd's flash attention, forward then backward, on every device: a
/// self-attention of 8 heads of 1,024 tokens and head_dim 64 in the block
/// sizes sd-tile-attention derives for this machine's cache; FLOP/s per
/// device as the cost model counts the two (the backward's dQ fused).
absl::StatusOr<double> attentionRate(MeshRuntime &runtime, double seconds) {
  constexpr int64_t kB = 1, kH = 8, kS = 1024, kD = 64;
  FlashTiling t = completeFlashTiling({}, kD, kD, hostL2CacheBytes(), kS);
  SdFlashBlocks blocks{t.blockQ,    t.blockKvCompute, t.blockKv,
                       t.blockQDkv, t.blockKvDkv,     t.blockKvDkvCompute,
                       t.blockQDq,  t.blockKvDq,      t.useFusedBwdKernel};
  int threads = runtime.threadsPerDevice();
  int64_t elements = kB * kH * kS * kD, rows = kB * kH * kS;
  int64_t scratch = std::max(kernels::flashAttentionScratchFloats(
                                 kB, kH, kS, kS, kD, kD, blocks, threads),
                             kernels::flashAttentionBackwardScratchFloats(
                                 kB, kH, kS, kS, kD, kD, blocks, threads));
  struct Buffers {
    std::vector<float> q, k, v, out, lse, dOut, dq, dk, dv, scratch;
  };
  std::vector<Buffers> buffers(runtime.numDevices());
  for (Buffers &b : buffers) {
    for (std::vector<float> *x : {&b.q, &b.k, &b.v, &b.dOut}) {
      x->resize(elements);
      for (int64_t i = 0; i < elements; ++i)
        (*x)[i] = 0.01f * float(i % 13);
    }
    for (std::vector<float> *x : {&b.out, &b.dq, &b.dk, &b.dv})
      x->assign(elements, 0.0f);
    b.lse.assign(rows, 0.0f);
    b.scratch.assign(scratch, 0.0f);
  }
  double scale = 1.0 / std::sqrt(double(kD));
  absl::StatusOr<double> best =
      bestSeconds(runtime, seconds, [&](Device &device, int64_t reps) {
        Buffers &b = buffers[device.id() - runtime.firstDeviceId()];
        for (int64_t r = 0; r < reps; ++r) {
          kernels::flashAttention(b.q.data(), b.k.data(), b.v.data(), nullptr,
                                  0, 0, b.out.data(), b.lse.data(), kB, kH, kS,
                                  kS, kD, kD, scale, blocks, b.scratch.data());
          kernels::flashAttentionBackward(
              b.q.data(), b.k.data(), b.v.data(), nullptr, 0, 0, b.out.data(),
              b.lse.data(), b.dOut.data(), b.dq.data(), b.dk.data(),
              b.dv.data(), kB, kH, kS, kS, kD, kD, scale, blocks,
              b.scratch.data());
        }
      });
  if (!best.ok())
    return best.status();
  // The cost model's counts (lib/Analysis/CostModels.cpp): forward
  // 2(D + Dv) + 6 a score; dK/dV 4D + 4Dv + 4 a score and 2Dv a row; the
  // fused dQ 2D a score.
  double scores = double(kB * kH * kS * kS);
  double flops = scores * (2 * (kD + kD) + 6) + scores * (4 * kD + 4 * kD + 4) +
                 double(rows) * 2 * kD + scores * 2 * kD;
  return flops / *best;
}

/// One all-reduce of `elements` floats over every device of the runtime
/// through its transport: seconds.
absl::StatusOr<double> allReduceSeconds(MeshRuntime &runtime, int64_t elements,
                                        double seconds,
                                        ProcessGroup *group = nullptr) {
  int64_t devices = runtime.numDevices();
  std::vector<std::vector<float>> in(devices), out(devices);
  for (int64_t d = 0; d < devices; ++d) {
    in[d].assign(elements, 1.0f);
    out[d].assign(elements, 0.0f);
  }
  SdCollective op;
  std::memset(&op, 0, sizeof(op));
  op.name = "calibration all_reduce";
  op.kind = SD_ALL_REDUCE;
  op.rank = 1;
  op.in_shape[0] = op.out_shape[0] = elements;
  op.num_axes = 1;
  const SdApi *api = MeshRuntime::api();
  return bestSeconds(
      runtime, seconds,
      [&](Device &device, int64_t reps) {
        int64_t d = device.id() - runtime.firstDeviceId();
        auto *handle = reinterpret_cast<SdDevice *>(&device);
        for (int64_t r = 0; r < reps; ++r)
          if (api->collective(handle, &op, in[d].data(), out[d].data()))
            return;
      },
      group);
}

/// The ring convention the network model prices: an all-reduce of S bytes
/// over n members sends 2(n-1)/n S per member in 2(n-1) steps. From an
/// all-reduce of n floats (latency) and one of 64 MiB: (bandwidth, latency)
/// of one link.
absl::StatusOr<std::pair<double, double>> measureLink(MeshRuntime &runtime,
                                                      int64_t members,
                                                      double seconds,
                                                      ProcessGroup *group) {
  int64_t steps = 2 * (members - 1);
  absl::StatusOr<double> tiny =
      allReduceSeconds(runtime, members, seconds, group);
  if (!tiny.ok())
    return tiny.status();
  double latency = *tiny / double(steps);
  constexpr int64_t kLarge = (int64_t(64) << 20) / 4;
  absl::StatusOr<double> large =
      allReduceSeconds(runtime, kLarge, seconds, group);
  if (!large.ok())
    return large.status();
  double sent = double(steps) / double(members) * double(kLarge) * 4.0;
  double bandwidth = sent / std::max(*large - double(steps) * latency, 1e-9);
  return std::make_pair(bandwidth, latency);
}

/// The DCN between the ranks of `ranks`, one device each over the MPI
/// transport: (bandwidth per host, latency).
absl::StatusOr<std::pair<double, double>>
measureDcn(const CalibrationRanks &ranks, double seconds) {
  MeshRuntimeOptions options;
  options.mesh = ::sd::MeshSpec({{"hosts", 1, ranks.size}});
  options.threadsPerDevice = 1;
  options.process = ranks.rank;
  options.transportFactory = ranks.transportFactory;
  options.processGroup = ranks.processGroup;
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(options);
  if (!runtime.ok())
    return runtime.status();
  return measureLink(**runtime, ranks.size, seconds, ranks.processGroup.get());
}

/// The ranks of `ranks` on this rank's host (by host name), this one
/// included.
absl::StatusOr<int64_t> ranksOnThisHost(const CalibrationRanks &ranks) {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  absl::StatusOr<std::vector<std::string>> all =
      ranks.processGroup->allGather(name);
  if (!all.ok())
    return all.status();
  return int64_t(std::count(all->begin(), all->end(), std::string(name)));
}

} // namespace

absl::StatusOr<::sd::HardwareProfile>
mlir::sd::calibrateMachine(const CalibrationOptions &options,
                           llvm::StringRef name, llvm::raw_ostream &log) {
  if (options.devices < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--calibrate needs at least one device, not %d", options.devices));
  MeshRuntimeOptions runtimeOptions;
  runtimeOptions.mesh = ::sd::MeshSpec({{"x", options.devices, 1}});
  runtimeOptions.threadsPerDevice = options.threadsPerDevice;
  absl::StatusOr<std::unique_ptr<MeshRuntime>> created =
      MeshRuntime::create(runtimeOptions);
  if (!created.ok())
    return created.status();
  MeshRuntime &runtime = **created;
  double seconds = options.secondsPerMeasurement;
  log << "sdrun --calibrate: " << options.devices << " devices x "
      << runtime.threadsPerDevice() << " threads";
  if (options.ranks)
    log << " on each of " << options.ranks->size << " ranks (hosts)";
  log << ", each measurement on every device at once\n";

  ::sd::HardwareProfile profile = *::sd::builtinProfile("cpu");
  profile.name = name.str();
  auto logRate = [&](llvm::StringRef what, double value, llvm::StringRef unit) {
    log << llvm::format("  %-40s %10.2f %s\n", what.str().c_str(), value / 1e9,
                        unit.str().c_str());
  };
  // Products by size class (sd::productSize, one product's FLOPs): small
  // ones as an attention's heads, a square GEMM for the others.
  absl::StatusOr<double> small = headProductRate(runtime, seconds);
  if (!small.ok())
    return small.status();
  profile.device.f32FlopsSmall = *small;
  logRate("f32 GEMM 24 x 256x256x64 per device", *small, "GFLOP/s");
  struct SizeClass {
    int64_t side;
    double *rate;
  } classes[] = {{768, &profile.device.f32FlopsMedium},
                 {2048, &profile.device.f32Flops}};
  for (const SizeClass &size : classes) {
    absl::StatusOr<double> rate = gemmRate(runtime, size.side, seconds, 0.5f);
    if (!rate.ok())
      return rate.status();
    *size.rate = *rate;
    logRate(absl::StrFormat("f32 GEMM %d^3 per device", size.side), *rate,
            "GFLOP/s");
  }
  // The weight gradients' form, which the runtime may give another library.
  constexpr int64_t kTransposedSide = 1024;
  absl::StatusOr<double> transposed =
      gemmRate(runtime, kTransposedSide, seconds, 0.5f, /*transposedLhs=*/true);
  if (!transposed.ok())
    return transposed.status();
  profile.device.f32FlopsTransposedLhs = *transposed;
  logRate(
      absl::StrFormat("f32 GEMM %d^3 transposed A per device", kTransposedSide),
      *transposed, "GFLOP/s");
  // 0x3f00: 0.5 in bf16.
  absl::StatusOr<double> bf16 =
      gemmRate(runtime, 2048, seconds, sd_bf16{0x3f00});
  if (!bf16.ok())
    return bf16.status();
  profile.device.bf16Flops = *bf16;
  logRate(absl::StrFormat("bf16 GEMM 2048^3 per device (%s)",
                          kernels::bf16ProductPath().isa),
          *bf16, "GFLOP/s");
  absl::StatusOr<double> attention = attentionRate(runtime, seconds);
  if (!attention.ok())
    return attention.status();
  profile.device.f32FlopsAttention = *attention;
  logRate("f32 flash attention per device", *attention, "GFLOP/s");
  absl::StatusOr<double> bandwidth = kernelBandwidth(runtime, seconds);
  if (!bandwidth.ok())
    return bandwidth.status();
  profile.device.memoryBandwidth = *bandwidth;
  logRate("elementwise bytes per device", *bandwidth, "GB/s");
  // Each device its share of the host's memory (with the other ranks'
  // devices on this host).
  int64_t sharing = options.devices;
  if (options.ranks) {
    absl::StatusOr<int64_t> onHost = ranksOnThisHost(*options.ranks);
    if (!onHost.ok())
      return onHost.status();
    sharing *= *onHost;
  }
  double hostBytes =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  profile.device.memoryBytes = hostBytes / double(sharing);
  profile.devicesPerHost = options.devices;

  std::string links;
  if (options.devices > 1) {
    absl::StatusOr<std::pair<double, double>> ici =
        measureLink(runtime, options.devices, seconds, nullptr);
    if (!ici.ok())
      return ici.status();
    std::tie(profile.network.iciBandwidth, profile.network.iciLatency) = *ici;
    logRate("shared-memory all_reduce bandwidth", profile.network.iciBandwidth,
            "GB/s");
    log << llvm::format("  %-40s %10.2f µs\n", "shared-memory step latency",
                        profile.network.iciLatency * 1e6);
    links = "ICI: all_reduce of 64 MiB and of N floats over sd's "
            "shared-memory transport; ";
  }
  if (options.ranks) {
    absl::StatusOr<std::pair<double, double>> dcn =
        measureDcn(*options.ranks, seconds);
    if (!dcn.ok())
      return dcn.status();
    std::tie(profile.network.dcnBandwidth, profile.network.dcnLatency) = *dcn;
    logRate(absl::StrFormat("MPI all_reduce bandwidth (%d ranks)",
                            options.ranks->size),
            profile.network.dcnBandwidth, "GB/s");
    log << llvm::format("  %-40s %10.2f µs\n", "MPI step latency",
                        profile.network.dcnLatency * 1e6);
    links += absl::StrFormat("DCN: all_reduce of 64 MiB and of N floats over "
                             "MPI between %d ranks, one device each",
                             options.ranks->size);
  } else {
    links += "DCN: the cpu profile's";
  }
  profile.source = absl::StrFormat(
      "sdrun --calibrate, %d devices x %d threads%s: sd's f32 GEMMs of 24 "
      "heads' 256 x 256 x 64 products, of sides 768 and 2048 and Aᵀ·B of "
      "side 1024, and bf16 of 2048, flash attention of 8 heads of 1024 x 64, "
      "an elementwise loop "
      "over 3 x 16 MiB; %s",
      options.devices, runtime.threadsPerDevice(),
      options.ranks ? absl::StrFormat(" a rank, %d ranks", options.ranks->size)
                    : "",
      links);
  return profile;
}

absl::StatusOr<CalibrationOptions>
mlir::sd::calibrationOptions(const ::sd::RunSpecFlags &values,
                             const std::string &path, int64_t processes,
                             bool writesFile) {
  if (!values.modelPath.empty())
    return absl::InvalidArgumentError(
        "--calibrate runs no model: leave out \"" + values.modelPath + "\"");
  if (writesFile) {
    if (absl::Status writable = checkOutputPath(path, "calibrate");
        !writable.ok())
      return writable;
  }
  int cpus = availableCpus();
  CalibrationOptions options;
  options.threadsPerDevice = int(values.threadsPerDevice.value_or(0));
  if (absl::Status threads = checkThreadsPerDevice(options.threadsPerDevice);
      !threads.ok())
    return threads;
  int64_t perRank = std::max(1, cpus / std::max(1, options.threadsPerDevice));
  int64_t devices = values.devices.value_or(perRank * processes);
  if (devices < processes || devices % processes != 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--devices=%d must split evenly over the %d ranks (each rank one "
        "host)",
        devices, processes));
  options.devices = devices / processes;
  return options;
}

::sd::RunDigest mlir::sd::calibrationDigest(const CalibrationOptions &options,
                                            const std::string &path) {
  return {{"calibrate", ::sd::digestQuoted(path), ""},
          {"devices_per_rank", ::sd::digestValue(options.devices), ""},
          {"threads_per_device",
           ::sd::digestValue(int64_t(options.threadsPerDevice)), ""}};
}

absl::Status mlir::sd::calibrateToFile(const CalibrationOptions &options,
                                       const std::string &path,
                                       llvm::raw_ostream &log) {
  absl::StatusOr<::sd::HardwareProfile> profile =
      calibrateMachine(options, "calibrated", log);
  if (!profile.ok())
    return profile.status();
  if (options.ranks && options.ranks->rank != 0)
    return absl::OkStatus();
  std::error_code error;
  llvm::raw_fd_ostream out(path, error);
  if (error)
    return absl::InvalidArgumentError("cannot write --calibrate file \"" +
                                      path + "\": " + error.message());
  out << ::sd::profileToYaml(*profile);
  out.close();
  if (out.has_error())
    return absl::InvalidArgumentError("cannot write --calibrate file \"" +
                                      path + "\"");
  log << "sdrun: wrote the profile to " << path
      << " (sdopt --plan --profile=" << path
      << ", sdrun --mesh=auto --profile=" << path << ")\n";
  return absl::OkStatus();
}
