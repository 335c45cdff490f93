#!/usr/bin/env bash
# sd's training step of a reduced SD-2-style UNet against this machine's f32
# ceiling and PyTorch DDP on the same cores.
#
# The model: sdgen --preset=sd2-base --block-channels=64,128,256,256
# --attention-heads=2,4,8,8 --transformer-layers=1,1,1,1 --latent-size=32
# --text-dim=256 --text-length=77 (SD 2's layers_per_block 2 and 32 norm
# groups, epsilon prediction; 34,966,724 parameters), batch 8 of 32x32x4
# latents with 77x256 text states, f32. PyTorch 1.13 trains the same
# architecture, the project's mirror of diffusers' UNet2DConditionModel
# (bench/pytorch_unet.py on test/lit/E2E/Inputs/unet_mirror.py), with the
# same loss and AdamW; the parameter counts must be equal (sdopt --report's
# exact count and sdgen's summary line against PyTorch's), or the run fails
# (with --quick too).
#
# In one run: sgemm n=2048 on 2 threads with OpenBLAS and with oneDNN
# (sd_sgemm_bench --table; the ceiling is the fastest figure), PyTorch on 2
# threads in one process and data-parallel (DDP, gloo on 127.0.0.1) over 2
# processes x 1 thread with the batch split 4 + 4, both with channels_last
# tensors (PyTorch's faster layout for these convolutions on CPU), and
# sdrun --batch=8 on --mesh=data:2 and on one device with
# --threads-per-device=2. Each sdrun writes JSON lines (--metrics); step 1
# is warm-up, the rest give medians; achieved GFLOP/s are sdrun's
# model_flops over the median step time. When the environment sets
# OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE (the workplace does on some CPUs),
# sgemm and PyTorch DDP also run with both unset, both figures are printed,
# and the targets use the faster of each (the higher ceiling, the faster
# PyTorch); sd runs in the environment as it is. Prints the machine (CPU,
# load average at start and end, the OpenBLAS settings) and a markdown
# table with PASS/FAIL against the targets:
#   sd data:2 step >= 1.5x faster than PyTorch DDP (2 processes x 1 thread)
#   sd data:2 achieved GFLOP/s >= 50% of sgemm
# With --bf16, also sd's mixed-precision step (--weights-dtype and
# --activations-dtype bfloat16 on data:2) and PyTorch DDP under
# torch.autocast("cpu", dtype=torch.bfloat16) (both OpenBLAS settings as
# above), printed with the CPU's bf16 flags and compared with the f32 steps
# (no target: docs/precision.md says what runs in bf16).
# Exits 1 if a target fails, 2 on a usage or setup error.
#
# Usage: bench/unet_step.sh [--quick] [--bf16] [--out DIR]
#   --quick    a smoke test: 2 sd steps, 1 PyTorch step; the timing
#              targets are not enforced (the parameter check is)
#   --bf16     add the bf16 rows
#   --out DIR  keep the model, logs and metrics there (default: a temp dir)
# Environment: BUILD (build dir, default build), PYTORCH_PYTHON (default
#   /usr/bin/python3: Debian's python3-torch), SD_STEPS (default 5),
#   PYTORCH_STEPS (default 3; a PyTorch step takes seconds to tens of
#   seconds on 2 cores), ROUNDS (default 1: runs every measurement that
#   many times, in turn, and keeps each one's best round; 2 or 3 on a
#   machine that others load).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="${BUILD:-build}"
SDRUN="$BUILD/bin/sdrun"
SDGEN="$BUILD/bin/sdgen"
SDOPT="$BUILD/bin/sdopt"
SGEMM_BENCH="$BUILD/bin/sd_sgemm_bench"
PY="${PYTORCH_PYTHON:-/usr/bin/python3}"
SD_STEPS="${SD_STEPS:-5}"
PYTORCH_STEPS="${PYTORCH_STEPS:-3}"
ROUNDS="${ROUNDS:-1}"
THREADS=2  # the cores: data:2, 2 DDP processes x 1 thread, 2 threads
BATCH=8
SDGEN_FLAGS=(--preset=sd2-base "--block-channels=64,128,256,256"
  "--attention-heads=2,4,8,8" "--transformer-layers=1,1,1,1"
  --latent-size=32 --text-dim=256 --text-length=77)

quick=0
bf16=0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --bf16) bf16=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unet_step.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "unet_step.sh: $*" >&2; exit 2; }
if [[ $quick -eq 1 ]]; then
  SD_STEPS=2
  PYTORCH_STEPS=1
fi

# --- Preconditions, checked before anything slow runs ---------------------
for tool in "$SDGEN" "$SDRUN" "$SDOPT" "$SGEMM_BENCH"; do
  [[ -x "$tool" ]] || die "$tool not found: build it (ninja -C $BUILD $(basename "$tool"))"
done
[[ -x "$PY" ]] || die "$PY not found (Debian's python3-torch interpreter; set PYTORCH_PYTHON)"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (apt install python3-torch)"
[[ "$SD_STEPS" =~ ^[0-9]+$ && "$SD_STEPS" -ge 2 ]] ||
  die "SD_STEPS must be an integer >= 2 (step 1 is warm-up), not '$SD_STEPS'"
[[ "$PYTORCH_STEPS" =~ ^[1-9][0-9]*$ ]] ||
  die "PYTORCH_STEPS must be a positive integer, not '$PYTORCH_STEPS'"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, not '$ROUNDS'"

if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-unet-step.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs and metrics: $out" >&2

# run NAME CMD...: runs CMD with its output in $out/NAME.log; on failure
# shows the log's tail and stops.
run() {
  local name="$1"; shift
  echo "running $name: $*" >&2
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "unet_step.sh: $name failed; last lines of $out/$name.log:" >&2
    tail -n 30 "$out/$name.log" >&2
    exit 2
  fi
}

# The OpenBLAS settings as the environment has them; with either set, the
# baselines also run with both unset.
coretype="${OPENBLAS_CORETYPE-(unset)}"
l2size="${OPENBLAS_L2_SIZE-(unset)}"
blas_unset=0
if [[ -n "${OPENBLAS_CORETYPE+x}${OPENBLAS_L2_SIZE+x}" ]]; then
  blas_unset=1
fi
UNSET=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)

cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
date_start="$(date -u '+%Y-%m-%d %H:%M UTC')"
commit="$(git describe --always --dirty 2>/dev/null || echo unknown)"

# --- The model and its parameter count -------------------------------------
model="$out/unet.mlir"
run sdgen "$SDGEN" "${SDGEN_FLAGS[@]}" -o "$model"
# "sdgen: sd2-base: 34.97M parameters (686 tensors), 713 ops (1425 inlined)"
sdgen_summary="$(grep -m1 'parameters (' "$out/sdgen.log" || true)"
[[ -n "$sdgen_summary" ]] || die "no summary line in $out/sdgen.log"
# The exact count: sdopt's report ("686 tensors, 34,966,724 elements").
run sdopt_report "$SDOPT" "$model" --batch="$BATCH" --report
sd_params="$({ grep -m1 '^ *parameters' "$out/sdopt_report.log" || true; } |
  sed -n 's/.*tensors, \([0-9,]*\) elements.*/\1/p' | tr -d ,)"
[[ -n "$sd_params" ]] || die "no parameter count in $out/sdopt_report.log"

# --- Measurements ---------------------------------------------------------
# ROUNDS rounds of every measurement in the same order; each measure keeps
# its best round (the highest sgemm rate, the lowest step time), so that a
# burst of load from other work spoils one round, not the comparison.
for ((round = 1; round <= ROUNDS; round++)); do
  r=".r$round"
  run "sgemm$r" env OMP_NUM_THREADS="$THREADS" "$SGEMM_BENCH" --table --n=2048
  run "pytorch$r" "$PY" bench/pytorch_unet.py --threads="$THREADS" \
    --steps="$PYTORCH_STEPS" --batch="$BATCH" --channels-last
  # PyTorch's fastest use of the cores: one single-threaded process per core.
  run "pytorch_ddp$r" "$PY" bench/pytorch_unet.py --processes="$THREADS" \
    --threads=1 --steps="$PYTORCH_STEPS" --batch="$BATCH" --channels-last
  if [[ $blas_unset -eq 1 ]]; then
    run "sgemm_unset$r" "${UNSET[@]}" OMP_NUM_THREADS="$THREADS" \
      "$SGEMM_BENCH" --table --n=2048
    run "pytorch_ddp_unset$r" "${UNSET[@]}" "$PY" bench/pytorch_unet.py \
      --processes="$THREADS" --threads=1 --steps="$PYTORCH_STEPS" \
      --batch="$BATCH" --channels-last
  fi
  run "sd_data2$r" "$SDRUN" "$model" --mesh=data:2 --batch="$BATCH" \
    --steps="$SD_STEPS" --metrics="$out/sd_data2$r.jsonl"
  run "sd_single$r" "$SDRUN" "$model" --batch="$BATCH" --steps="$SD_STEPS" \
    --threads-per-device="$THREADS" --metrics="$out/sd_single$r.jsonl"
  if [[ $bf16 -eq 1 ]]; then
    run "pytorch_ddp_bf16$r" "$PY" bench/pytorch_unet.py --autocast \
      --processes="$THREADS" --threads=1 --steps="$PYTORCH_STEPS" \
      --batch="$BATCH" --channels-last
    if [[ $blas_unset -eq 1 ]]; then
      run "pytorch_ddp_bf16_unset$r" "${UNSET[@]}" "$PY" bench/pytorch_unet.py \
        --autocast --processes="$THREADS" --threads=1 \
        --steps="$PYTORCH_STEPS" --batch="$BATCH" --channels-last
    fi
    run "sd_data2_bf16$r" "$SDRUN" "$model" --mesh=data:2 --batch="$BATCH" \
      --steps="$SD_STEPS" --weights-dtype=bfloat16 \
      --activations-dtype=bfloat16 --metrics="$out/sd_data2_bf16$r.jsonl"
  fi
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- Table ----------------------------------------------------------------
bf16_flags="$(grep -m1 -o -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)"
export ROUNDS THREADS OUT="$out" QUICK="$quick" BLAS_UNSET="$blas_unset" \
  BF16="$bf16" BF16_FLAGS="${bf16_flags:-none}" \
  SD_PARAMS="$sd_params" SDGEN_SUMMARY="$sdgen_summary" \
  CPU_MODEL="$cpu_model" LOAD_START="$load_start" LOAD_END="$load_end" \
  DATE_START="$date_start" COMMIT="$commit" CORETYPE="$coretype" \
  L2SIZE="$l2size"
"$PY" - <<'EOF'
import json, os, re, statistics, sys

out = os.environ["OUT"]
rounds = range(1, int(os.environ["ROUNDS"]) + 1)
threads = os.environ["THREADS"]
blas_unset = os.environ["BLAS_UNSET"] == "1"
failed = False


def text(name):
    return open(os.path.join(out, name + ".log")).read()


def field(name, key):
    """KEY=... of the last line holding it in NAME.rR.log, every round."""
    values = []
    for r in rounds:
        found = re.findall(r"\b%s=([^ \n]*)" % key, text("%s.r%d" % (name, r)))
        if not found:
            sys.exit("unet_step.sh: no %s= in %s.r%d.log" % (key, name, r))
        values.append(float(found[-1]))
    return values


def sgemm(name):
    """{library: the best GFLOP/s over the rounds} of NAME's logs."""
    best = {}
    for r in rounds:
        found = re.findall(r"\blibrary=(\S+) .*\bgflops=([0-9.]+)",
                           text("%s.r%d" % (name, r)))
        if not found:
            sys.exit("unet_step.sh: no library=... gflops=... in %s.r%d.log"
                     % (name, r))
        for lib, g in found:
            best[lib] = max(best.get(lib, 0.0), float(g))
    return best


def metrics_of(name):
    """Medians over the steps after the first (warm-up) of NAME.jsonl."""
    path = os.path.join(out, name + ".jsonl")
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit("unet_step.sh: %s line %d: %s" % (path, n, e))
    timed = [r for r in rows if int(r["step"]) > 1]
    if not timed:
        sys.exit("unet_step.sh: %s has no step after the warm-up" % path)
    m = {"steps": len(timed),
         "step_s": statistics.median(float(r["step_time_s"]) for r in timed),
         "losses": [float(r["loss"]) for r in rows],
         "model_flops": float(timed[-1].get("model_flops", 0))}
    if m["model_flops"] <= 0:
        sys.exit("unet_step.sh: %s has no model_flops" % path)
    m["gflops"] = m["model_flops"] / m["step_s"] / 1e9
    for k in ("peak_device_bytes", "comm_bytes_per_device"):
        m[k] = max(int(r.get(k, 0)) for r in rows)
    return m


def metrics(name):
    """The round of NAME with the lowest median step time."""
    return min((metrics_of("%s.r%d" % (name, r)) for r in rounds),
               key=lambda m: m["step_s"])


def verdict(ok):
    global failed
    failed |= not ok
    return "PASS" if ok else "FAIL"


def summary_count(n):
    """n as sdgen's summary line writes it (formatModelSummary)."""
    if n >= 1e9:
        return "%.2fB" % (n / 1e9)
    if n >= 1e6:
        return "%.2fM" % (n / 1e6)
    return "%.1fK" % (n / 1e3)


LIBRARY_NAMES = {"openblas": "OpenBLAS", "onednn": "oneDNN"}
settings = "OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s" % (
    os.environ["CORETYPE"], os.environ["L2SIZE"])
gemm_runs = [("the environment's %s" % settings if blas_unset else None,
              sgemm("sgemm"))]
if blas_unset:
    gemm_runs.append(("both unset", sgemm("sgemm_unset")))
ceiling = max(g for _, libs in gemm_runs for g in libs.values())
torch_s = min(field("pytorch", "step_s"))
ddp_runs = [("environment's settings" if blas_unset else None,
             min(field("pytorch_ddp", "step_s")))]
if blas_unset:
    ddp_runs.append(("OpenBLAS settings unset",
                     min(field("pytorch_ddp_unset", "step_s"))))
ddp_s = min(s for _, s in ddp_runs)
torch_params = int(field("pytorch", "params")[0])
torch_tensors = int(re.findall(r"in (\d+) tensors", text("pytorch.r1"))[0])
d2, one = metrics("sd_data2"), metrics("sd_single")
flops = d2["model_flops"]

# sd's count: sdopt's exact figure, and sdgen's summary line (rounded).
sd_params = int(os.environ["SD_PARAMS"])
summary = os.environ["SDGEN_SUMMARY"]
m = re.search(r"(\S+) parameters \((\d+) tensors\)", summary)
if not m:
    sys.exit("unet_step.sh: cannot read sdgen's summary: %s" % summary)
sdgen_count, sdgen_tensors = m.group(1), int(m.group(2))
params_ok = (sd_params == torch_params and
             sdgen_count == summary_count(torch_params) and
             sdgen_tensors == torch_tensors)

rows = []
for label, libs in gemm_runs:
    rows += [("sgemm n=2048, %s threads, %s%s"
              % (threads, LIBRARY_NAMES.get(lib, lib),
                 " (%s)" % label if label else ""),
              "%.1f GFLOP/s" % g, "", "") for lib, g in sorted(libs.items())]
rows += [
    ("PyTorch parameters (sd: %d exact, sdopt; sdgen: %s in %d tensors)"
     % (sd_params, sdgen_count, sdgen_tensors),
     "%d in %d tensors" % (torch_params, torch_tensors), "= sd",
     verdict(params_ok)),
    ("PyTorch 1.13 UNet step, %s threads" % threads,
     "%.2f s/step (%.1f GFLOP/s)" % (torch_s, flops / torch_s / 1e9), "", ""),
]
for label, s in ddp_runs:
    rows.append(("PyTorch 1.13 UNet step, DDP (gloo) %s processes x 1 thread%s"
                 % (threads, ", %s" % label if label else ""),
                 "%.2f s/step (%.1f GFLOP/s)" % (s, flops / s / 1e9), "", ""))
pct = 100 * d2["gflops"] / ceiling
speedup = ddp_s / d2["step_s"]
overhead = d2["step_s"] / one["step_s"] - 1
rows += [
    ("sd data:2 step", "%.3f s/step" % d2["step_s"], "", ""),
    ("sd data:2 achieved", "%.1f GFLOP/s" % d2["gflops"], "", ""),
    ("sd data:2 / sgemm (%.1f GFLOP/s)" % ceiling, "%.1f%%" % pct, ">= 50%",
     verdict(pct >= 50)),
    ("sd data:2 speed-up vs PyTorch DDP%s"
     % (" (its faster run)" if blas_unset else ""), "%.3fx" % speedup,
     ">= 1.5x", verdict(speedup >= 1.5)),
    ("sd data:2 speed-up vs PyTorch, %s threads" % threads,
     "%.3fx" % (torch_s / d2["step_s"]), "", ""),
    ("sd single device step (%s threads)" % threads,
     "%.3f s/step" % one["step_s"], "", ""),
    ("partitioning overhead (data:2 / single - 1)",
     "%+.1f%%" % (100 * overhead), "", ""),
]
if os.environ["BF16"] == "1":
    b16 = metrics("sd_data2_bf16")
    bf16_runs = [("environment's settings" if blas_unset else None,
                  min(field("pytorch_ddp_bf16", "step_s")))]
    if blas_unset:
        bf16_runs.append(("OpenBLAS settings unset",
                          min(field("pytorch_ddp_bf16_unset", "step_s"))))
    autocast_s = min(s for _, s in bf16_runs)
    for label, s in bf16_runs:
        rows.append(("PyTorch 1.13 UNet step, DDP (gloo) %s processes x 1 "
                     "thread, autocast bf16%s"
                     % (threads, ", %s" % label if label else ""),
                     "%.2f s/step" % s, "", ""))
    rows += [
        ("sd data:2 step, bf16 weights and activations",
         "%.3f s/step" % b16["step_s"], "", ""),
        ("sd data:2 bf16 / f32 speed-up", "%.3fx"
         % (d2["step_s"] / b16["step_s"]), "", ""),
        ("sd data:2 bf16 speed-up vs PyTorch autocast DDP%s"
         % (" (its faster run)" if blas_unset else ""),
         "%.3fx" % (autocast_s / b16["step_s"]), "", ""),
        ("sd data:2 peak device memory, bf16 / f32",
         "%.1f / %.1f MB" % (b16["peak_device_bytes"] / 1e6,
                             d2["peak_device_bytes"] / 1e6), "", ""),
    ]

print("Reduced SD-2 UNet training step (64,128,256,256 channels), batch 8, "
      "32x32x4 latents, %s, %s" % ("f32 and bf16" if os.environ["BF16"] == "1" else "f32", os.environ["DATE_START"]))
print()
print("- sd: %s" % os.environ["COMMIT"])
print("- CPU: %s; %d cores; %s" % (os.environ["CPU_MODEL"], os.cpu_count(),
                                   settings))
if os.environ["BF16"] == "1":
    print("- CPU bf16 flags: %s" % os.environ["BF16_FLAGS"])
print("- load average (1, 5, 15 min): %s at start, %s at end"
      % (os.environ["LOAD_START"], os.environ["LOAD_END"]))
if len(rounds) > 1:
    print("- %d rounds, each measure its best" % len(rounds))
print("- model FLOPs per step (sdrun's count, used for every GFLOP/s): %.1f "
      "GFLOP" % (flops / 1e9))
print("- sgemm, the ceiling the targets use: %.1f GFLOP/s, the fastest "
      "figure above" % ceiling)
print()
print("| measure | value | target | result |")
print("|---|---|---|---|")
for r in rows:
    print("| %s |" % " | ".join(r))
print()
for name, m in (("data:2", d2), ("single", one)):
    print("sd %s: %d timed steps, peak device %.1f MB, comm %.1f MB/device; "
          "losses %s" % (name, m["steps"], m["peak_device_bytes"] / 1e6,
                         m["comm_bytes_per_device"] / 1e6,
                         " ".join("%.4f" % l for l in m["losses"])))
if os.environ["QUICK"] == "1":
    print()
    print("--quick: a smoke test; the timing targets are not enforced")
    failed = not params_ok
sys.exit(1 if failed else 0)
EOF
