#!/usr/bin/python3
"""PyTorch 1.13's eager attention at one shape, timed like sd_attention_bench.

The baseline of bench/attention.sh: matmul-softmax-matmul as DiT's PyTorch
code writes it (the same expression as bench/pytorch_dit_s2.py),
softmax(Q·Kᵀ·scale)·V on [B, H, N, D] f32 tensors, forward under no_grad and
forward+backward through autograd (dQ, dK, dV from a fixed dO). Each run is a
whole number of calls lasting at least --min-run-s; a cell's time is the best
run's time per call, forward and forward+backward runs alternating. Prints key=value lines in sd_attention_bench's format:

  cell impl=pytorch b=8 h=6 n=256 d=64 mode=fwd peak_bytes=... runs=3
       calls=20 best_s=... rss_bytes=...

peak_bytes is the score-sized tensors eager mode holds at once, counted
from the sizes (forward 2: Q·Kᵀ and its scaled copy or softmax; forward+
backward 4: P kept for backward, dP, the softmax gradient and its scaled
copy), plus the [B, H, N, D] outputs; a mode whose peak_bytes exceeds
--mem-frac of MemAvailable is skipped (skipped=1), never run.

Run with Debian's interpreter: /usr/bin/python3 bench/pytorch_attention.py
"""

import argparse
import math
import sys
import time

import torch


def attention(q, k, v, scale):
    scores = (q @ k.transpose(-1, -2)) * scale
    return torch.softmax(scores, dim=-1) @ v


def proc_bytes(path, field):
    """A "kB" field of /proc/meminfo or /proc/self/status in bytes, or -1."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def time_modes(calls, warmup, reps, min_run_s):
    """`warmup` untimed calls of each mode, then `reps` rounds in which each
    mode in turn makes one run of its `calls` calls (enough for min_run_s);
    alternating keeps load from other work off the ratio between modes.
    Returns (runs, calls, best seconds per call) per mode."""
    counts = []
    for call in calls:
        last = 0.0
        for _ in range(warmup):
            start = time.perf_counter()
            call()
            last = time.perf_counter() - start
        n = 1
        if warmup > 0 and last > 0:
            n = int(min(10000, max(1, math.ceil(min_run_s / last))))
        counts.append(n)
    best = [float("inf")] * len(calls)
    for _ in range(reps):
        for m, call in enumerate(calls):
            start = time.perf_counter()
            for _ in range(counts[m]):
                call()
            best[m] = min(best[m], (time.perf_counter() - start) / counts[m])
    return [(reps, counts[m], best[m]) for m in range(len(calls))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b", type=int, default=8)
    ap.add_argument("--h", type=int, default=6)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--min-run-s", type=float, default=0.2)
    ap.add_argument("--mem-frac", type=float, default=0.6)
    ap.add_argument("--modes", default="fwd,fwdbwd")
    args = ap.parse_args()
    if min(args.b, args.h, args.n, args.d, args.threads, args.reps) <= 0:
        sys.exit("pytorch_attention.py: sizes, --threads and --reps must be "
                 "positive")

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    shape = (args.b, args.h, args.n, args.d)
    q, k, v, d_out = (torch.rand(shape, generator=gen) * 2 - 1
                      for _ in range(4))
    scale = 1.0 / math.sqrt(args.d)
    scores = args.b * args.h * args.n * args.n * 4
    heads = args.b * args.h * args.n * args.d * 4
    need = {"fwd": 2 * scores + heads, "fwdbwd": 4 * scores + 4 * heads}
    print("torch %s threads=%d" % (torch.__version__, torch.get_num_threads()))

    def forward():
        with torch.no_grad():
            attention(q, k, v, scale)

    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]

    def forward_backward():
        for t in leaves:
            t.grad = None
        attention(*leaves, scale).backward(d_out)

    modes, calls = [], []
    available = proc_bytes("/proc/meminfo", "MemAvailable")
    for mode, call in (("fwd", forward), ("fwdbwd", forward_backward)):
        if mode not in args.modes.split(","):
            continue
        if available > 0 and need[mode] > args.mem_frac * available:
            print(line_of(args, mode, need) + " skipped=1")
            continue
        modes.append(mode)
        calls.append(call)
    if not modes:
        return
    rss_ok = reset_peak_rss()
    before = proc_bytes("/proc/self/status", "VmRSS")
    timings = time_modes(calls, args.warmup, args.reps, args.min_run_s)
    peak = proc_bytes("/proc/self/status", "VmHWM")
    for mode, (runs, count, best) in zip(modes, timings):
        line = line_of(args, mode, need) + (" runs=%d calls=%d best_s=%.6g"
                                            % (runs, count, best))
        # The peak RSS belongs to the largest mode that ran.
        if rss_ok and peak > 0 and before > 0 and mode == modes[-1]:
            line += " rss_bytes=%d" % (peak - before)
        print(line)


def line_of(args, mode, need):
    return ("cell impl=pytorch b=%d h=%d n=%d d=%d mode=%s peak_bytes=%d"
            % (args.b, args.h, args.n, args.d, mode, need[mode]))


if __name__ == "__main__":
    main()
