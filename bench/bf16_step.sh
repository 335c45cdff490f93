#!/usr/bin/env bash
# sd's DiT-S/2 training step in bf16 against sd in f32 and PyTorch autocast.
#
# In one run, on the same cores: sdrun on models/dit_s2.mlir, batch 8,
# --mesh=data:2, in f32 and with --weights-dtype=bfloat16
# --activations-dtype=bfloat16, each with dot_product and with flash
# attention (--metrics JSON lines; step 1 is warm-up, the rest give
# medians; the four runs take turns, SD_ROUNDS times (flash first in every
# other round), and each figure is
# the median over all its rounds' steps, so that a slow spell of a shared
# machine falls on every configuration alike); PyTorch DDP (Debian's 1.13, or the one PYTORCH_PYTHON runs; the
# table names its version) with gloo, 2 processes x 1 thread, its forward
# under torch.autocast("cpu", dtype=torch.bfloat16) (bench/pytorch_dit_s2.py
# --autocast); the bf16 and f32 GEMM rates at n = 2048 on 2 threads
# (sd_gemm_bf16_bench --table); and the device memory of the step under
# --remat=NONE in both precisions, as sdrun predicts it (its memory check)
# and measures it. PyTorch, the GEMMs and every sd run take place twice:
# with the environment's OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, and with both
# unset (sd's f32 weight gradients are OpenBLAS's on CPUs with AVX-512 and
# no AMX where OpenBLAS runs its AVX-512 kernels, lib/Runtime/KernelsGemm.cpp;
# its other products are oneDNN's);
# each configuration's ratios use the faster of its two. Each sd row also
# gives the median page faults and involuntary context switches of its
# steps (sdrun's metrics), which tell a disturbed run from a slow one.
# Prints the CPU's
# bf16 flags and a markdown table with PASS/FAIL against the targets:
#   with AVX512_BF16 or AMX: sd bf16 >= 1.6x sd f32, and >= 2x PyTorch's
#     autocast DDP step (its faster configuration);
#   without: sd bf16 at most 10% slower than sd f32;
#   flash at least as fast as dot_product, in f32 and in bf16;
#   peak device memory at least 35% lower in bf16 (predicted and measured).
# Exits 1 if a target fails, 2 on a usage or setup error.
#
# Usage: bench/bf16_step.sh [--quick] [--out DIR]
#   --quick    2 sd steps, 1 PyTorch step; targets not enforced
#   --out DIR  keep logs and metrics there (default: a temp dir)
# Environment: BUILD (default build), PYTORCH_PYTHON (default
#   /usr/bin/python3: Debian's python3-torch), SD_STEPS (default 5),
#   SD_ROUNDS (default 3), PYTORCH_STEPS (default 3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDRUN="$BUILD/bin/sdrun"
GEMM_BENCH="$BUILD/bin/sd_gemm_bf16_bench"
PY="${PYTORCH_PYTHON:-/usr/bin/python3}"
SD_STEPS="${SD_STEPS:-5}"
SD_ROUNDS="${SD_ROUNDS:-3}"
PYTORCH_STEPS="${PYTORCH_STEPS:-3}"
MODEL=models/dit_s2.mlir
BATCH=8
BF16=(--weights-dtype=bfloat16 --activations-dtype=bfloat16)

quick=0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "bf16_step.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "bf16_step.sh: $*" >&2; exit 2; }
if [[ $quick -eq 1 ]]; then
  SD_STEPS=2
  SD_ROUNDS=1
  PYTORCH_STEPS=1
fi
[[ -x "$SDRUN" ]] || die "$SDRUN not found (ninja -C $BUILD sdrun)"
[[ -x "$GEMM_BENCH" ]] || die "$GEMM_BENCH not found (ninja -C $BUILD sd_gemm_bf16_bench)"
[[ -x "$PY" ]] || die "$PY not found (set PYTORCH_PYTHON)"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (apt-get install python3-torch)"
[[ "$SD_STEPS" -ge 2 ]] || die "SD_STEPS must be >= 2 (step 1 is warm-up)"
[[ "$SD_ROUNDS" -ge 1 ]] || die "SD_ROUNDS must be >= 1"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-bf16-step.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs and metrics: $out" >&2

run() {
  local name="$1"; shift
  echo "running $name: $*" >&2
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "bf16_step.sh: $name failed; last lines of $out/$name.log:" >&2
    tail -n 30 "$out/$name.log" >&2
    exit 2
  fi
}

# PyTorch with its kernels as the environment sets them, and unset (after
# checking, in the log, which OpenBLAS core then runs and that a matmul
# matches float64).
check_blas='import numpy, torch
from threadpoolctl import threadpool_info
print([(i.get("internal_api"), i.get("architecture")) for i in threadpool_info()])
a = torch.randn(256, 256, dtype=torch.float64)
print("matmul vs float64:", float((a.float() @ a.float() - (a @ a).float()).abs().max()))'
run blas_env "$PY" -c "$check_blas" || true
run blas_unset env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" -c "$check_blas" || true
run gemm_env env OMP_NUM_THREADS=2 "$GEMM_BENCH" --table
run gemm_unset env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 "$GEMM_BENCH" --table
run torch_env "$PY" bench/pytorch_dit_s2.py --processes=2 --threads=1 \
  --steps="$PYTORCH_STEPS" --batch="$BATCH" --autocast --flops
run torch_unset env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" \
  bench/pytorch_dit_s2.py --processes=2 --threads=1 \
  --steps="$PYTORCH_STEPS" --batch="$BATCH" --autocast --flops
for round in $(seq 1 "$SD_ROUNDS"); do
  for precision in f32 bf16; do
    extra=()
    [[ $precision == bf16 ]] && extra=("${BF16[@]}")
    # Every other round flash first, so that neither attention always
    # follows the other.
    attentions=(dot_product flash)
    (( round % 2 == 0 )) && attentions=(flash dot_product)
    for attention in "${attentions[@]}"; do
      for blas in env unset; do
        unset_blas=()
        [[ $blas == unset ]] &&
          unset_blas=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
        name="sd_${precision}_${attention}_${blas}.r$round"
        run "$name" "${unset_blas[@]}" "$SDRUN" "$MODEL" --mesh=data:2 \
          --batch="$BATCH" --steps="$SD_STEPS" --attention="$attention" \
          "${extra[@]}" --metrics="$out/$name.jsonl"
      done
    done
  done
done
for precision in f32 bf16; do
  extra=()
  [[ $precision == bf16 ]] && extra=("${BF16[@]}")
  # The prediction: sdrun's memory check names it when a budget is too
  # small (the run stops there, before compiling).
  "$SDRUN" "$MODEL" --mesh=data:2 --batch="$BATCH" --steps=1 "${extra[@]}" \
    --device-memory=1MiB >"$out/predict_$precision.log" 2>&1 || true
done

flags="$(grep -m1 -o -w -E 'avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)"
export OUT="$out" QUICK="$quick" FLAGS="$flags" ROUNDS="$SD_ROUNDS" \
  TORCH_VERSION="$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')" \
  CPU_MODEL="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - <<'EOF'
import json, os, re, statistics, sys

out = os.environ["OUT"]
failed = False


def text(name):
    return open(os.path.join(out, name + ".log")).read()


def sd(name):
    # Every round's steps after the first of each run; the losses of the
    # first round (every round computes the same).
    rounds = []
    for r in range(1, int(os.environ["ROUNDS"]) + 1):
        path = os.path.join(out, "%s.r%d.jsonl" % (name, r))
        rounds.append([json.loads(l) for l in open(path) if l.strip()])
    rows = [row for run in rounds for row in run]
    timed = [r for r in rows if int(r["step"]) > 1]
    return {"step_s": statistics.median(float(r["step_time_s"]) for r in timed),
            # What the process counted in those steps (sdrun's getrusage):
            # a run that took page faults or lost its cores shows here.
            "faults": statistics.median(int(r.get("page_faults", 0)) for r in timed),
            "switches": statistics.median(
                int(r.get("involuntary_context_switches", 0)) for r in timed),
            "flops": float(timed[-1].get("model_flops", 0)),
            "peak": max(int(r.get("peak_device_bytes", 0)) for r in rows),
            "loss": [float(r["loss"]) for r in rounds[0]]}


def torch_step(name):
    return float(re.findall(r"step_s=([0-9.]+)", text(name))[-1])


def gemm(name):
    return {lib: float(g) for lib, g in
            re.findall(r"\bimpl=(\S+) .*\bgflops=([0-9.]+)", text(name))}


def predicted(precision):
    m = re.search(r"predicted to need ([0-9.]+) MiB", text("predict_" + precision))
    return float(m.group(1)) if m else float("nan")


def verdict(ok):
    global failed
    failed |= not ok
    return "PASS" if ok else "FAIL"


native = "avx512_bf16" in os.environ["FLAGS"] or "amx_bf16" in os.environ["FLAGS"]
blas_settings = {"env": "environment's OpenBLAS settings",
                 "unset": "OpenBLAS variables unset"}
each = {(p, a, b): sd("sd_%s_%s_%s" % (p, a, b)) for p in ("f32", "bf16")
        for a in ("dot_product", "flash") for b in blas_settings}
# Each configuration in its faster setting.
runs = {(p, a): min((each[(p, a, b)] for b in blas_settings),
                    key=lambda m: m["step_s"])
        for p in ("f32", "bf16") for a in ("dot_product", "flash")}
t_env, t_unset = torch_step("torch_env"), torch_step("torch_unset")
g_env, g_unset = gemm("gemm_env"), gemm("gemm_unset")
print("CPU: %s; bf16 flags: %s; load %s" % (
    os.environ["CPU_MODEL"], os.environ["FLAGS"] or "none", os.environ["LOAD"]))
print()
print("| measure | value | target | result |")
print("|---|---:|---|---|")
for label, g in (("environment's OpenBLAS settings", g_env),
                 ("OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE unset", g_unset)):
    for impl, rate in sorted(g.items()):
        print("| GEMM n=2048, 2 threads, %s (%s) | %.1f GFLOP/s | | |"
              % (impl, label, rate))
ceiling = max(max(g_env.values()), max(g_unset.values()))
bf16_ceiling = max(v for k, v in list(g_env.items()) + list(g_unset.items())
                   if "bf16" in k)
print("| PyTorch %s DDP 2x1, autocast bf16 (environment's settings) | %.3f s/step | | |" % (os.environ["TORCH_VERSION"], t_env))
print("| PyTorch %s DDP 2x1, autocast bf16 (unset) | %.3f s/step | | |" % (os.environ["TORCH_VERSION"], t_unset))
for (p, a, b), m in each.items():
    rate = m["flops"] / m["step_s"] / 1e9 if m["flops"] else float("nan")
    print("| sd %s data:2, %s (%s) | %.3f s/step (%.1f GFLOP/s, %.0f%% of the %s GEMM; "
          "a step: %d page faults, %d involuntary context switches) | | |"
          % (p, a, blas_settings[b], m["step_s"], rate,
             100 * rate / (bf16_ceiling if p == "bf16" else ceiling), p,
             m["faults"], m["switches"]))
quick = os.environ["QUICK"] == "1"
for a in ("dot_product", "flash"):
    speedup = runs[("f32", a)]["step_s"] / runs[("bf16", a)]["step_s"]
    if native:
        print("| sd bf16 / sd f32 speed, %s | %.2fx | >= 1.6x | %s |"
              % (a, speedup, "-" if quick else verdict(speedup >= 1.6)))
    else:
        print("| sd bf16 / sd f32 speed, %s | %.2fx | >= 0.91x (no bf16 units) | %s |"
              % (a, speedup, "-" if quick else verdict(speedup >= 1 / 1.1)))
best_torch = min(t_env, t_unset)
vs_torch = best_torch / min(runs[("bf16", a)]["step_s"] for a in ("dot_product", "flash"))
if native:
    print("| sd bf16 / PyTorch autocast DDP speed | %.2fx | >= 2x | %s |"
          % (vs_torch, "-" if quick else verdict(vs_torch >= 2)))
for p in ("f32", "bf16"):
    ratio = runs[(p, "dot_product")]["step_s"] / runs[(p, "flash")]["step_s"]
    print("| sd %s flash / dot_product speed | %.2fx | >= 1x | %s |"
          % (p, ratio, "-" if quick else verdict(ratio >= 1)))
for what, f32, bf16 in (
        ("predicted", predicted("f32"), predicted("bf16")),
        ("measured", runs[("f32", "dot_product")]["peak"] / 2**20,
         runs[("bf16", "dot_product")]["peak"] / 2**20)):
    lower = 1 - bf16 / f32
    print("| peak device memory, remat NONE, %s: f32 %.1f MiB, bf16 %.1f MiB | %.0f%% lower | >= 35%% lower | %s |"
          % (what, f32, bf16, 100 * lower, "-" if quick else verdict(lower >= 0.35)))
print()
print("losses, f32 dot_product:", runs[("f32", "dot_product")]["loss"])
print("losses, bf16 dot_product:", runs[("bf16", "dot_product")]["loss"])
sys.exit(1 if failed else 0)
EOF
