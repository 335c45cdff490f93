#!/usr/bin/env bash
# sd's attention kernels against this machine's f32 ceiling and PyTorch.
#
# In one run: sgemm n=2048 on THREADS threads with OpenBLAS and with oneDNN,
# the two GEMM libraries of sd's kernels (sd_sgemm_bench --table, before
# each shape and at the end; a run's rate is the faster library's, and a
# shape's reference the higher of the runs just before and just after its
# cells, so that load during a measurement tends to understate sd's
# ratios), then forward and forward+backward of attention at DiT-S/2's
# shape (B 8, H 6, N 256, D 64) and two long ones (B 1, H 8, N 4,096 and
# 16,384, D 64) for
#   sd tiled    the FlashAttention-2 kernels, block sizes derived as
#               sd-tile-attention derives them from this machine's L2
#               (or --blocks=)
#   sd untiled  kernels::attention; its backward as sd-differentiate emits
#               it from primitives (gemm, softmax, elementwise)
#   PyTorch     1.13 eager matmul-softmax-matmul, autograd for the backward
# (sd_attention_bench and bench/pytorch_attention.py, one process per cell
# group). Each cell is the best of 3 runs (N 16,384: 2 runs, no warm-up); a
# run is a whole number of calls lasting >= 0.2 s. Cells whose buffers
# exceed 60% of MemAvailable are skipped, never run, and say what they
# need. Prints one markdown table with GFLOP/s (FlashAttention FLOPs:
# forward 4·B·H·N²·D, backward 2.5x that) and the fraction of sgemm, then
# the targets with PASS/FAIL:
#   tiled forward >= 50% of sgemm (each shape)
#   tiled forward+backward <= 4x tiled forward (each shape)
#   tiled forward+backward >= 2x faster than PyTorch's at N 4,096
#   tiled peak attention memory at N 16,384 < 1/20 of untiled
# Exits 1 if a target fails (not with --quick), 2 on a usage or setup error.
#
# Usage: bench/attention.sh [--quick] [--blocks=SPEC] [--out DIR]
#   --quick         only the DiT-S/2 shape (a smoke test; the long-shape
#                   targets read "not measured")
#   --blocks=SPEC   block sizes for sd tiled, MaxDiffusion's names, the rest
#                   derived: --blocks=block_q=64,block_kv=512
#                   (use_fused_bwd_kernel=1 for the fused dQ)
#   --out DIR       keep the raw logs there (default: a temp dir)
# Environment: BUILD (build dir, default build), ATTN_BENCH, SGEMM_BENCH,
#   PYTORCH_PYTHON (default /usr/bin/python3: Debian's python3-torch,
#   installed with apt-get when missing), THREADS (default 2), REPS
#   (default 3), LONG_REPS (N 16,384, default 2), MEM_FRAC (default 0.6).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="${BUILD:-build}"
ATTN_BENCH="${ATTN_BENCH:-$BUILD/bin/sd_attention_bench}"
SGEMM_BENCH="${SGEMM_BENCH:-$BUILD/bin/sd_sgemm_bench}"
PY="${PYTORCH_PYTHON:-/usr/bin/python3}"
THREADS="${THREADS:-2}"
REPS="${REPS:-3}"
LONG_REPS="${LONG_REPS:-2}"
MEM_FRAC="${MEM_FRAC:-0.6}"

die() { echo "attention.sh: $*" >&2; exit 2; }

quick=0
blocks=""
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --blocks=*) blocks="${1#--blocks=}" ;;
    --blocks) blocks="${2:?--blocks needs a value}"; shift ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
for n in THREADS REPS LONG_REPS; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || die "$n must be a positive integer, not '${!n}'"
done

# --- Preconditions, checked before anything slow runs ---------------------
[[ -x "$SGEMM_BENCH" ]] ||
  die "$SGEMM_BENCH not found: build it (scripts/build.sh sd_sgemm_bench) or set SGEMM_BENCH"
[[ -x "$ATTN_BENCH" ]] ||
  die "$ATTN_BENCH not found: build it (scripts/build.sh sd_attention_bench) or set ATTN_BENCH"
[[ -x "$PY" ]] || die "$PY not found (Debian's python3 with python3-torch; set PYTORCH_PYTHON)"

if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-attention.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2

# PyTorch 1.13 is Debian's python3-torch; PyPI is not an option.
torch_note="python3-torch was already installed"
if ! "$PY" -c 'import torch' 2>/dev/null; then
  [[ "$PY" == /usr/bin/python3 ]] ||
    die "$PY cannot import torch; install python3-torch for it or unset PYTORCH_PYTHON"
  [[ "$(id -u)" -eq 0 ]] ||
    die "python3-torch is missing and installing it needs root: apt-get install python3-torch"
  echo "attention.sh: python3-torch is missing; installing it with apt-get (log: $out/apt.log)" >&2
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch; } \
    >"$out/apt.log" 2>&1 ||
    { tail -n 20 "$out/apt.log" >&2; die "apt-get install python3-torch failed"; }
  "$PY" -c 'import torch' 2>/dev/null || die "torch still cannot be imported after apt-get"
  torch_note="python3-torch was missing and was installed by this run with apt-get"
fi

# run NAME CMD...: runs CMD with its output in $out/NAME.log; on failure
# shows the log's tail and stops.
run() {
  local name="$1"; shift
  echo "running $name: $*" >&2
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "attention.sh: $name failed; last lines of $out/$name.log:" >&2
    tail -n 30 "$out/$name.log" >&2
    exit 2
  fi
}

cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
date_start="$(date -u '+%Y-%m-%d %H:%M UTC')"

# --- Measurements -----------------------------------------------------------

# shape NAME B H N REPS WARMUP: sd tiled, sd untiled and PyTorch at one shape.
blocks_arg=()
[[ -n "$blocks" ]] && blocks_arg=(--blocks="$blocks")
shape() {
  local name="$1" b="$2" h="$3" n="$4" reps="$5" warmup="$6"
  run "sgemm_$name" env OMP_NUM_THREADS="$THREADS" "$SGEMM_BENCH" --table --n=2048
  local sizes=(--b="$b" --h="$h" --n="$n" --d=64 --reps="$reps"
               --warmup="$warmup" --mem-frac="$MEM_FRAC")
  run "${name}_tiled" env OMP_NUM_THREADS="$THREADS" "$ATTN_BENCH" \
    --impl=tiled "${sizes[@]}" ${blocks_arg[@]+"${blocks_arg[@]}"}
  run "${name}_untiled" env OMP_NUM_THREADS="$THREADS" "$ATTN_BENCH" \
    --impl=untiled "${sizes[@]}"
  run "${name}_pytorch" "$PY" bench/pytorch_attention.py --threads="$THREADS" \
    "${sizes[@]}"
}
# Tiled against untiled on the same inputs, so that what is timed is right.
run check env OMP_NUM_THREADS="$THREADS" "$ATTN_BENCH" --impl=tiled --b=8 \
  --h=6 --n=256 --d=64 --modes=none --check ${blocks_arg[@]+"${blocks_arg[@]}"}
shape dit 8 6 256 "$REPS" 1
if [[ $quick -eq 0 ]]; then
  shape n4k 1 8 4096 "$REPS" 1
  shape n16k 1 8 16384 "$LONG_REPS" 0
fi

run sgemm_end env OMP_NUM_THREADS="$THREADS" "$SGEMM_BENCH" --table --n=2048
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- Table ------------------------------------------------------------------
export OUT="$out" QUICK="$quick" THREADS CPU_MODEL="$cpu_model" \
  LOAD_START="$load_start" LOAD_END="$load_end" DATE_START="$date_start" \
  TORCH_NOTE="$torch_note" CORETYPE="${OPENBLAS_CORETYPE-(unset)}"
"$PY" - <<'EOF'
import glob, os, re, sys

out = os.environ["OUT"]
quick = os.environ["QUICK"] == "1"
failed = False


def fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def lines(name, tag):
    path = os.path.join(out, name + ".log")
    with open(path) as f:
        return [fields(l) for l in f if l.startswith(tag + " ")]


SHAPES = [("dit", "8, 6, 256, 64")]
if not quick:
    SHAPES += [("n4k", "1, 8, 4096, 64"), ("n16k", "1, 8, 16384, 64")]
IMPLS = [("tiled", "sd tiled"), ("untiled", "sd untiled"),
         ("pytorch", "PyTorch 1.13")]

sgemm_runs = []
for name in ["sgemm_" + shape for shape, _ in SHAPES] + ["sgemm_end"]:
    got = lines(name, "sgemm")
    if not got:
        sys.exit("attention.sh: no sgemm line in %s/%s.log" % (out, name))
    # One line a library: the ceiling is the faster one.
    sgemm_runs.append(max(float(g["gflops"]) for g in got))
# A shape's ceiling: the better of the sgemm runs that bracket its cells.
sgemm_of = {shape: max(sgemm_runs[i], sgemm_runs[i + 1])
            for i, (shape, _) in enumerate(SHAPES)}

cells, blocks = {}, {}
for shape, _ in SHAPES:
    for impl, _ in IMPLS:
        for c in lines("%s_%s" % (shape, impl), "cell"):
            cells[(shape, impl, c["mode"])] = c
    b = lines(shape + "_tiled", "blocks")
    if b:
        blocks[shape] = b[-1]


def flops(c, mode):
    fwd = 4.0 * int(c["b"]) * int(c["h"]) * int(c["n"]) ** 2 * int(c["d"])
    return fwd if mode == "fwd" else 3.5 * fwd


def seconds(shape, impl, mode):
    c = cells.get((shape, impl, mode))
    return float(c["best_s"]) if c and "best_s" in c else None


def gib(nbytes):
    return "%.1f GiB" % (nbytes / 2 ** 30) if nbytes >= 2 ** 30 \
        else "%.1f MiB" % (nbytes / 2 ** 20)


def time_cells(shape, impl, mode):
    c = cells.get((shape, impl, mode))
    if c is None:
        return ["missing"] * 3
    if "best_s" not in c:
        return ["skipped (needs %s)" % gib(int(c["peak_bytes"])), "", ""]
    s = float(c["best_s"])
    rate = flops(c, mode) / s / 1e9
    return ["%.1f ms" % (s * 1e3) if s < 10 else "%.2f s" % s,
            "%.1f" % rate, "%.0f%%" % (100 * rate / sgemm_of[shape])]


def runs(shape, impl):
    got = []
    for mode in ("fwd", "fwdbwd"):
        c = cells.get((shape, impl, mode))
        if c and "runs" in c:
            got.append("%s x %s" % (c["runs"], c["calls"]))
        else:
            got.append("-")
    return " / ".join(got)


def memory(shape, impl):
    c = cells.get((shape, impl, "fwdbwd"))
    if c is None:
        return "-"
    text = gib(int(c["peak_bytes"]))
    if "rss_bytes" in c:
        text += " (RSS +%s)" % gib(int(c["rss_bytes"]))
    return text


print("Attention, %s threads, %s" % (os.environ["THREADS"],
                                      os.environ["DATE_START"]))
print()
print("- CPU: %s; %d cores; OPENBLAS_CORETYPE=%s"
      % (os.environ["CPU_MODEL"], os.cpu_count(), os.environ["CORETYPE"]))
print("- load average (1, 5, 15 min): %s at start, %s at end"
      % (os.environ["LOAD_START"], os.environ["LOAD_END"]))
print("- sgemm n=2048, %s threads, the faster of OpenBLAS and oneDNN: %s "
      "GFLOP/s (before each shape, then at the end); a shape's ratios use "
      "the better of the two around it: %s"
      % (os.environ["THREADS"], ", ".join("%.1f" % g for g in sgemm_runs),
         ", ".join("%.1f at N %s" % (sgemm_of[s], l.split(", ")[2])
                   for s, l in SHAPES)))
print("- PyTorch: %s" % os.environ["TORCH_NOTE"])
for shape, label in SHAPES:
    if shape in blocks:
        b = blocks[shape]
        print("- sd tiled blocks at (%s): block_q %s, block_kv_compute %s, "
              "block_kv %s, backward %s/%s/%s, dq %s/%s, fused dQ %s "
              "(%s, L2 %s KiB)"
              % (label, b["block_q"], b["block_kv_compute"], b["block_kv"],
                 b["block_q_dkv"], b["block_kv_dkv"],
                 b["block_kv_dkv_compute"], b["block_q_dq"], b["block_kv_dq"],
                 b["use_fused_bwd_kernel"], b["source"],
                 int(b["l2_bytes"]) // 1024))
check = lines("check", "check")
if check:
    c = check[-1]
    print("- check, tiled vs untiled at (8, 6, 256, 64): max relative error "
          "out %s, dQ %s, dK %s, dV %s"
          % (c["max_rel_err_out"], c["max_rel_err_dq"], c["max_rel_err_dk"],
             c["max_rel_err_dv"]))
print()
print("| B, H, N, D | impl | fwd | fwd GFLOP/s | fwd / sgemm | fwd+bwd "
      "| fwd+bwd GFLOP/s | fwd+bwd / sgemm | fwd+bwd / fwd "
      "| peak memory, fwd+bwd | runs x calls (fwd / fwd+bwd) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for shape, label in SHAPES:
    for impl, name in IMPLS:
        f, fb = seconds(shape, impl, "fwd"), seconds(shape, impl, "fwdbwd")
        ratio = "%.2fx" % (fb / f) if f and fb else ""
        row = ([label, name] + time_cells(shape, impl, "fwd")
               + time_cells(shape, impl, "fwdbwd")
               + [ratio, memory(shape, impl), runs(shape, impl)])
        print("| %s |" % " | ".join(row))
print()
print("GFLOP/s count FlashAttention's FLOPs for every row (forward "
      "4·B·H·N²·D, backward 2.5x that). Peak memory is what the attention "
      "needs beyond Q, K, V and dO, from the buffer sizes (outputs, lse, "
      "gradients, scratch or score matrices); RSS is the measured growth of "
      "the process's peak resident memory during the cell.")
print()


def verdict(ok):
    global failed
    if ok is None:
        return "not measured"
    failed |= not ok
    return "PASS" if ok else "FAIL"


targets = []
for shape, label in SHAPES:
    f = seconds(shape, "tiled", "fwd")
    c = cells.get((shape, "tiled", "fwd"))
    if f:
        pct = 100 * flops(c, "fwd") / f / 1e9 / sgemm_of[shape]
        targets.append(("tiled forward / sgemm at (%s)" % label,
                        "%.0f%%" % pct, ">= 50%", verdict(pct >= 50)))
    else:
        targets.append(("tiled forward / sgemm at (%s)" % label, "-",
                        ">= 50%", verdict(None)))
for shape, label in SHAPES:
    f, fb = seconds(shape, "tiled", "fwd"), seconds(shape, "tiled", "fwdbwd")
    ok = fb / f <= 4 if f and fb else None
    targets.append(("tiled fwd+bwd / tiled fwd at (%s)" % label,
                    "%.3fx" % (fb / f) if f and fb else "-", "<= 4x",
                    verdict(ok)))
fb, tfb = seconds("n4k", "tiled", "fwdbwd"), seconds("n4k", "pytorch", "fwdbwd")
targets.append(("PyTorch fwd+bwd / tiled fwd+bwd at N 4,096",
                "%.3fx" % (tfb / fb) if fb and tfb else "-", ">= 2x",
                verdict(tfb / fb >= 2 if fb and tfb else None)))
t, u = cells.get(("n16k", "tiled", "fwdbwd")), cells.get(("n16k", "untiled",
                                                          "fwdbwd"))
if t and u:
    tb, ub = int(t["peak_bytes"]), int(u["peak_bytes"])
    targets.append(("peak memory at N 16,384, fwd+bwd: tiled / untiled",
                    "%s / %s = 1/%.0f" % (gib(tb), gib(ub), ub / tb), "< 1/20",
                    verdict(tb * 20 < ub)))
else:
    targets.append(("peak memory at N 16,384, fwd+bwd: tiled / untiled", "-",
                    "< 1/20", verdict(None)))
print("| target | measured | goal | result |")
print("|---|---|---|---|")
for r in targets:
    print("| %s |" % " | ".join(r))
if quick:
    print()
    print("--quick: a smoke test; the targets are not enforced")
    failed = False
sys.exit(1 if failed else 0)
EOF
