//===- attention_bench.cpp - sd's attention kernels, timed ---------------===//
//
// One attention shape, one implementation, forward and forward+backward, for
// bench/attention.sh:
//
//   tiled    kernels::flashAttention + flashAttentionBackward, the block
//            sizes derived as sd-tile-attention derives them
//            (completeFlashTiling with this machine's L2) unless --blocks=
//            gives some.
//   untiled  kernels::attention forward; forward+backward is that forward
//            and then attention's VJP as sd-differentiate emits it today from
//            primitives: scores recomputed by gemm, scaled, softmax,
//            dV = Pᵀ·dO, dP = dO·Vᵀ, dS = scale·P∘(dP − rowsum(dP∘P)),
//            dQ = dS·K, dK = dSᵀ·Q.
//
// Each run is a whole number of calls lasting at least --min-run-s (one
// call for the long shapes); a cell's time is the best run's time per call.
// Forward and forward+backward runs alternate, so that load from other work
// does not skew the ratio between them.
// Peak extra memory (beyond Q, K, V, dO) comes from the buffer sizes; the
// peak RSS growth the kernel caused is measured too (VmHWM after
// /proc/self/clear_refs). A mode whose buffers exceed --mem-frac of
// MemAvailable is skipped, never run. Output: key=value lines, one per cell:
//
//   blocks block_q=128 ... l2_bytes=2097152 source=derived
//   cell impl=tiled b=8 h=6 n=256 d=64 mode=fwd runs=3 calls=40 best_s=...
//        peak_bytes=... rss_bytes=...
//   cell impl=untiled ... mode=fwdbwd skipped=1 peak_bytes=...
//   check ... max_rel_err_out=... (--check: tiled against untiled)
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/FlashTiling.h"
#include "sd/Runtime/Kernels.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kernels = sd::rt::kernels;

namespace {

struct Options {
  std::string impl = "tiled";
  int64_t b = 8, h = 6, n = 256, d = 64;
  int reps = 3, warmup = 1;
  double minRunS = 0.2, memFrac = 0.6;
  std::string blocks, modes = "fwd,fwdbwd";
  int64_t l2 = 0;
  bool check = false;
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "sd_attention_bench: %s\n"
               "usage: sd_attention_bench [--impl=tiled|untiled] [--b=B] "
               "[--h=H] [--n=N] [--d=D] [--reps=R] [--warmup=W] "
               "[--min-run-s=S] [--modes=fwd,fwdbwd] [--blocks=K=V,...] "
               "[--l2=BYTES] [--mem-frac=F] [--check]\n",
               why);
  std::exit(2);
}

bool parseInt(const char *text, int64_t &out) {
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0')
    return false;
  out = value;
  return true;
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto eq = arg.find('=');
    std::string key = arg.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    int64_t number = 0;
    auto intValue = [&]() {
      if (!parseInt(value.c_str(), number))
        usage(("'" + arg + "' needs an integer").c_str());
      return number;
    };
    if (key == "--impl")
      o.impl = value;
    else if (key == "--b")
      o.b = intValue();
    else if (key == "--h")
      o.h = intValue();
    else if (key == "--n")
      o.n = intValue();
    else if (key == "--d")
      o.d = intValue();
    else if (key == "--reps")
      o.reps = static_cast<int>(intValue());
    else if (key == "--warmup")
      o.warmup = static_cast<int>(intValue());
    else if (key == "--l2")
      o.l2 = intValue();
    else if (key == "--min-run-s")
      o.minRunS = std::atof(value.c_str());
    else if (key == "--mem-frac")
      o.memFrac = std::atof(value.c_str());
    else if (key == "--blocks")
      o.blocks = value;
    else if (key == "--modes")
      o.modes = value;
    else if (arg == "--check")
      o.check = true;
    else
      usage(("unknown argument '" + arg + "'").c_str());
  }
  if (o.impl != "tiled" && o.impl != "untiled")
    usage(("--impl must be tiled or untiled, not '" + o.impl + "'").c_str());
  if (o.b <= 0 || o.h <= 0 || o.n <= 0 || o.d <= 0 || o.reps <= 0 ||
      o.warmup < 0 || o.l2 < 0 || o.memFrac <= 0)
    usage("sizes, --reps and --mem-frac must be positive");
  return o;
}

/// `spec` ("block_q=64,block_kv=512,use_fused_bwd_kernel=1", MaxDiffusion's
/// names) over the open sizes of `t`.
mlir::sd::FlashTiling parseBlocks(const std::string &spec) {
  mlir::sd::FlashTiling t;
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma - start);
    start = comma == std::string::npos ? spec.size() : comma + 1;
    if (item.empty())
      continue;
    auto eq = item.find('=');
    int64_t value = 0;
    if (eq == std::string::npos ||
        !parseInt(item.substr(eq + 1).c_str(), value) || value < 0)
      usage(("--blocks item '" + item + "' is not NAME=N, N >= 0").c_str());
    std::string name = item.substr(0, eq);
    if (name == "block_q")
      t.blockQ = value;
    else if (name == "block_kv_compute")
      t.blockKvCompute = value;
    else if (name == "block_kv")
      t.blockKv = value;
    else if (name == "block_q_dkv")
      t.blockQDkv = value;
    else if (name == "block_kv_dkv")
      t.blockKvDkv = value;
    else if (name == "block_kv_dkv_compute")
      t.blockKvDkvCompute = value;
    else if (name == "block_q_dq")
      t.blockQDq = value;
    else if (name == "block_kv_dq")
      t.blockKvDq = value;
    else if (name == "use_fused_bwd_kernel")
      t.useFusedBwdKernel = value != 0;
    else
      usage(("--blocks: unknown block size '" + name + "'").c_str());
  }
  return t;
}

/// A /proc/meminfo or /proc/self/status field in bytes ("kB" lines), or -1.
int64_t procBytes(const char *file, const char *field) {
  std::ifstream in(file);
  std::string line;
  size_t len = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, len, field) == 0 && line.size() > len &&
        line[len] == ':')
      return std::atoll(line.c_str() + len + 1) * 1024;
  return -1;
}

/// Resets the process's peak RSS to its current RSS; false if the kernel
/// does not allow it (then no RSS figure is printed).
bool resetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f)
    return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Zeroed float storage: the zeroing touches every page, so that page faults
/// fall outside the timed calls.
struct Buffer {
  explicit Buffer(int64_t floats)
      : data(floats > 0 ? static_cast<float *>(std::malloc(
                              static_cast<size_t>(floats) * sizeof(float)))
                        : nullptr),
        size(floats) {
    if (floats > 0 && !data) {
      std::fprintf(stderr, "sd_attention_bench: cannot allocate %lld floats\n",
                   static_cast<long long>(floats));
      std::exit(2);
    }
    if (data)
      std::memset(data, 0, static_cast<size_t>(floats) * sizeof(float));
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  float *data;
  int64_t size;
};

void fillRandom(Buffer &buf, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < buf.size; ++i)
    buf.data[i] = dist(rng);
}

struct Problem {
  int64_t b, h, n, d;
  double scale;
  int threads;
  int64_t pairs() const { return b * h; }
  int64_t headFloats() const { return pairs() * n * d; }
  int64_t scoreFloats() const { return pairs() * n * n; }
};

SdFlashBlocks toAbi(const mlir::sd::FlashTiling &t) {
  return SdFlashBlocks{
      t.blockQ,    t.blockKvCompute, t.blockKv,
      t.blockQDkv, t.blockKvDkv,     t.blockKvDkvCompute,
      t.blockQDq,  t.blockKvDq,      t.useFusedBwdKernel ? 1 : 0};
}

/// The untiled backward from primitives; `p` and `dp` are [B,H,N,N].
void untiledBackward(const Problem &pr, const float *q, const float *k,
                     const float *v, const float *dOut, float *dq, float *dk,
                     float *dv, float *p, float *dp) {
  int64_t bh = pr.pairs(), n = pr.n, d = pr.d, nn = n * n, nd = n * d;
  auto scale = static_cast<float>(pr.scale);
  // S = Q·Kᵀ, scaled, softmax in place: P.
  kernels::gemm(bh, false, true, n, n, d, q, d, nd, k, d, nd, 0.0f, p, n, nn);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < bh * nn; ++i)
    p[i] *= scale;
  int64_t shape[4] = {pr.b, pr.h, n, n};
  kernels::softmax(p, p, 4, shape, 3);
  // dV = Pᵀ·dO, dP = dO·Vᵀ.
  kernels::gemm(bh, true, false, n, d, n, p, n, nn, dOut, d, nd, 0.0f, dv, d,
                nd);
  kernels::gemm(bh, false, true, n, n, d, dOut, d, nd, v, d, nd, 0.0f, dp, n,
                nn);
  // dS = scale·P∘(dP − rowsum(dP∘P)), in place of dP.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < bh * n; ++row) {
    float *dpRow = dp + row * n;
    const float *pRow = p + row * n;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j)
      sum += dpRow[j] * pRow[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      dpRow[j] = scale * pRow[j] * (dpRow[j] - sum);
  }
  // dQ = dS·K, dK = dSᵀ·Q.
  kernels::gemm(bh, false, false, n, d, n, dp, n, nn, k, d, nd, 0.0f, dq, d,
                nd);
  kernels::gemm(bh, true, false, n, d, n, dp, n, nn, q, d, nd, 0.0f, dk, d, nd);
}

/// The extra floats of each mode (beyond Q, K, V, dO), as the bench
/// allocates them.
struct Footprint {
  int64_t fwd, fwdbwd;
};

Footprint tiledFootprint(const Problem &pr, const SdFlashBlocks &blocks) {
  int64_t fwdScratch = kernels::flashAttentionScratchFloats(
      pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads);
  int64_t bwdScratch = kernels::flashAttentionBackwardScratchFloats(
      pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads);
  int64_t outLse = pr.headFloats() + pr.pairs() * pr.n;
  return {outLse + fwdScratch,
          outLse + 3 * pr.headFloats() + std::max(fwdScratch, bwdScratch)};
}

/// Untiled: the forward's per-thread score rows; forward+backward shares
/// that scratch with P and adds dP (dS in place).
Footprint untiledFootprint(const Problem &pr) {
  int64_t fwdScratch =
      kernels::attentionScratchFloats(pr.n, pr.n, pr.d, pr.threads);
  int64_t first = std::max(fwdScratch, pr.scoreFloats());
  return {pr.headFloats() + fwdScratch,
          pr.headFloats() + 3 * pr.headFloats() + first + pr.scoreFloats()};
}

/// Times the modes' calls: `warmup` untimed calls of each, then `reps`
/// rounds in which each mode in turn makes one run of `calls` calls (its
/// `calls` chosen from its warm-up so that a run lasts >= minRunS). The
/// modes alternate so that a burst of load from other work hits both, not
/// the ratio between them.
struct Timing {
  int runs = 0, calls = 1;
  double best = 1e300;
};
std::vector<Timing> timeModes(const Options &o,
                              const std::vector<std::function<void()>> &calls) {
  std::vector<Timing> t(calls.size());
  for (size_t m = 0; m < calls.size(); ++m) {
    double last = 0;
    for (int i = 0; i < o.warmup; ++i) {
      double start = now();
      calls[m]();
      last = now() - start;
    }
    if (o.warmup > 0 && last > 0)
      t[m].calls = static_cast<int>(
          std::clamp(std::ceil(o.minRunS / last), 1.0, 10000.0));
  }
  for (int r = 0; r < o.reps; ++r)
    for (size_t m = 0; m < calls.size(); ++m) {
      double start = now();
      for (int c = 0; c < t[m].calls; ++c)
        calls[m]();
      t[m].best = std::min(t[m].best, (now() - start) / t[m].calls);
      t[m].runs = r + 1;
    }
  return t;
}

void printCell(const Options &o, const char *mode, int64_t floats,
               const Timing *t, int64_t rss) {
  std::printf("cell impl=%s b=%lld h=%lld n=%lld d=%lld mode=%s "
              "peak_bytes=%lld",
              o.impl.c_str(), static_cast<long long>(o.b),
              static_cast<long long>(o.h), static_cast<long long>(o.n),
              static_cast<long long>(o.d), mode,
              static_cast<long long>(floats * 4));
  if (t)
    std::printf(" runs=%d calls=%d best_s=%.6g", t->runs, t->calls, t->best);
  else
    std::printf(" skipped=1");
  if (rss >= 0)
    std::printf(" rss_bytes=%lld", static_cast<long long>(rss));
  std::printf("\n");
  std::fflush(stdout);
}

double maxRelErr(const float *a, const float *b, int64_t size) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < size; ++i) {
    err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
    ref = std::max(ref, std::fabs(double(b[i])));
  }
  return ref > 0 ? err / ref : err;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  Problem pr{
      o.b, o.h, o.n, o.d, 1.0 / std::sqrt(double(o.d)), omp_get_max_threads()};

  int64_t l2 = o.l2 > 0 ? o.l2 : mlir::sd::hostL2CacheBytes();
  mlir::sd::FlashTiling tiling =
      mlir::sd::completeFlashTiling(parseBlocks(o.blocks), o.d, o.d, l2, o.n);
  SdFlashBlocks blocks = toAbi(tiling);
  if (o.impl == "tiled" || o.check)
    std::printf("blocks block_q=%lld block_kv_compute=%lld block_kv=%lld "
                "block_q_dkv=%lld block_kv_dkv=%lld block_kv_dkv_compute=%lld "
                "block_q_dq=%lld block_kv_dq=%lld use_fused_bwd_kernel=%d "
                "l2_bytes=%lld source=%s threads=%d\n",
                static_cast<long long>(blocks.block_q),
                static_cast<long long>(blocks.block_kv_compute),
                static_cast<long long>(blocks.block_kv),
                static_cast<long long>(blocks.block_q_dkv),
                static_cast<long long>(blocks.block_kv_dkv),
                static_cast<long long>(blocks.block_kv_dkv_compute),
                static_cast<long long>(blocks.block_q_dq),
                static_cast<long long>(blocks.block_kv_dq), blocks.fused_bwd,
                static_cast<long long>(l2),
                o.blocks.empty() ? "derived" : "--blocks", pr.threads);

  Buffer q(pr.headFloats()), k(pr.headFloats()), v(pr.headFloats()),
      dOut(pr.headFloats());
  fillRandom(q, 1);
  fillRandom(k, 2);
  fillRandom(v, 3);
  fillRandom(dOut, 4);
  bool tiled = o.impl == "tiled";
  Footprint need = tiled ? tiledFootprint(pr, blocks) : untiledFootprint(pr);
  int64_t hd = pr.headFloats(), lseFloats = pr.pairs() * pr.n;

  // The modes asked for, less those whose buffers would not fit.
  bool wantFwd = false, wantBwd = false;
  int64_t available = procBytes("/proc/meminfo", "MemAvailable");
  auto fits = [&](int64_t floats) {
    return available <= 0 || double(floats) * 4 <= o.memFrac * available;
  };
  for (const char *mode : {"fwd", "fwdbwd"}) {
    if (("," + o.modes + ",").find("," + std::string(mode) + ",") ==
        std::string::npos)
      continue;
    bool backward = std::strcmp(mode, "fwdbwd") == 0;
    int64_t floats = backward ? need.fwdbwd : need.fwd;
    if (!fits(floats))
      printCell(o, mode, floats, nullptr, -1);
    else
      (backward ? wantBwd : wantFwd) = true;
  }

  if (wantFwd || wantBwd) {
    // One set of buffers, the forward+backward's when it runs (the forward
    // uses a part of them); the peak RSS is that of the largest mode.
    bool rssOk = resetPeakRss();
    int64_t rssBefore = procBytes("/proc/self/status", "VmRSS");
    int64_t gradFloats = wantBwd ? hd : 0;
    Buffer out(hd), lse(tiled ? lseFloats : 0);
    Buffer dq(gradFloats), dk(gradFloats), dv(gradFloats);
    int64_t fwdScratch =
        tiled ? kernels::flashAttentionScratchFloats(
                    pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads)
              : kernels::attentionScratchFloats(pr.n, pr.n, pr.d, pr.threads);
    int64_t bwdScratch = 0;
    if (wantBwd)
      bwdScratch =
          tiled ? kernels::flashAttentionBackwardScratchFloats(
                      pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads)
                : pr.scoreFloats();
    // Tiled: one scratch for both passes. Untiled: the forward's score rows,
    // then P in the same buffer; dP (and dS) in `second`.
    Buffer scratch(std::max(fwdScratch, bwdScratch));
    Buffer second(!tiled && wantBwd ? pr.scoreFloats() : 0);
    auto forward = [&] {
      if (tiled)
        kernels::flashAttention(q.data, k.data, v.data, nullptr, 1, 1, out.data,
                                lse.data, pr.b, pr.h, pr.n, pr.n, pr.d, pr.d,
                                pr.scale, blocks, scratch.data);
      else
        kernels::attention(q.data, k.data, v.data, nullptr, 1, 1, out.data,
                           pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, pr.scale,
                           scratch.data);
    };
    auto forwardBackward = [&] {
      forward();
      if (tiled)
        kernels::flashAttentionBackward(
            q.data, k.data, v.data, nullptr, 1, 1, out.data, lse.data,
            dOut.data, dq.data, dk.data, dv.data, pr.b, pr.h, pr.n, pr.n, pr.d,
            pr.d, pr.scale, blocks, scratch.data);
      else
        untiledBackward(pr, q.data, k.data, v.data, dOut.data, dq.data, dk.data,
                        dv.data, scratch.data, second.data);
    };
    std::vector<std::function<void()>> calls;
    if (wantFwd)
      calls.push_back(forward);
    if (wantBwd)
      calls.push_back(forwardBackward);
    std::vector<Timing> t = timeModes(o, calls);
    int64_t peak = procBytes("/proc/self/status", "VmHWM");
    int64_t rss = rssOk && peak > 0 && rssBefore > 0 ? peak - rssBefore : -1;
    if (wantFwd)
      printCell(o, "fwd", need.fwd, &t[0], wantBwd ? -1 : rss);
    if (wantBwd)
      printCell(o, "fwdbwd", need.fwdbwd, &t.back(), rss);
  }

  if (o.check) {
    // Tiled against untiled on the same inputs: output and gradients.
    Buffer out(hd), lse(lseFloats), outRef(hd);
    Buffer scratch(
        std::max(kernels::flashAttentionScratchFloats(
                     pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads),
                 kernels::flashAttentionBackwardScratchFloats(
                     pr.b, pr.h, pr.n, pr.n, pr.d, pr.d, blocks, pr.threads)));
    Buffer dq(hd), dk(hd), dv(hd), dqRef(hd), dkRef(hd), dvRef(hd);
    Buffer p(
        std::max(kernels::attentionScratchFloats(pr.n, pr.n, pr.d, pr.threads),
                 pr.scoreFloats())),
        dp(pr.scoreFloats());
    kernels::flashAttention(q.data, k.data, v.data, nullptr, 1, 1, out.data,
                            lse.data, pr.b, pr.h, pr.n, pr.n, pr.d, pr.d,
                            pr.scale, blocks, scratch.data);
    kernels::flashAttentionBackward(q.data, k.data, v.data, nullptr, 1, 1,
                                    out.data, lse.data, dOut.data, dq.data,
                                    dk.data, dv.data, pr.b, pr.h, pr.n, pr.n,
                                    pr.d, pr.d, pr.scale, blocks, scratch.data);
    kernels::attention(q.data, k.data, v.data, nullptr, 1, 1, outRef.data, pr.b,
                       pr.h, pr.n, pr.n, pr.d, pr.d, pr.scale, p.data);
    untiledBackward(pr, q.data, k.data, v.data, dOut.data, dqRef.data,
                    dkRef.data, dvRef.data, p.data, dp.data);
    double errs[4] = {maxRelErr(out.data, outRef.data, hd),
                      maxRelErr(dq.data, dqRef.data, hd),
                      maxRelErr(dk.data, dkRef.data, hd),
                      maxRelErr(dv.data, dvRef.data, hd)};
    std::printf("check b=%lld h=%lld n=%lld d=%lld max_rel_err_out=%.3g "
                "max_rel_err_dq=%.3g max_rel_err_dk=%.3g max_rel_err_dv=%.3g\n",
                static_cast<long long>(o.b), static_cast<long long>(o.h),
                static_cast<long long>(o.n), static_cast<long long>(o.d),
                errs[0], errs[1], errs[2], errs[3]);
    if (*std::max_element(errs, errs + 4) > 1e-3) {
      std::fprintf(stderr, "sd_attention_bench: tiled and untiled attention "
                           "disagree by more than 1e-3\n");
      return 1;
    }
  }
  return 0;
}
