#!/usr/bin/env bash
# sd's DiT-S/2 training step against this machine's f32 ceiling and PyTorch.
#
# In one run: sgemm n=2048 on 2 threads with OpenBLAS and with oneDNN, the
# two GEMM libraries of sd's kernels (sd_sgemm_bench --table; the ceiling
# the targets use is the faster of them),
# the PyTorch 1.13 step on 2 threads and PyTorch data-parallel (DDP, gloo on
# 127.0.0.1) over 2 processes x 1 thread with the batch split 4 + 4 (both
# bench/pytorch_dit_s2.py), and sdrun on models/dit_s2.mlir, batch 8: over
# --mesh=data:2 with the default (dot_product) attention and with
# --attention=flash, and on a single device with --threads-per-device=2.
# Each sdrun writes JSON lines (--metrics); step 1 is warm-up, the rest give
# medians. Prints the machine (CPU model, load average at start and end) and
# a markdown table with PASS/FAIL against the targets:
#   sd data:2 achieved GFLOP/s >= 50% of sgemm
#   sd data:2 step >= 4x faster than PyTorch (2 threads)
#   partitioning overhead (data:2 time / single-device time - 1) <= 15%
#   sd data:2 --attention=flash achieved GFLOP/s >= 85% of sgemm
#   sd data:2 (each attention) >= 1.5x faster than PyTorch DDP
#   sd data:2 as 2 MPI ranks (mpirun -np 2, --dcn-mesh=data:2, one device
#   per rank) at most 15% slower than data:2 in one process (skipped
#   when mpirun is missing)
# Exits 1 if a target fails, 2 on a usage or setup error.
#
# Usage: bench/train_step.sh [--quick] [--baselines-only] [--out DIR]
#   --quick           a smoke test: 2 sd steps, 1 PyTorch step; the
#                     targets are not enforced
#   --baselines-only  only sgemm and PyTorch (no sdrun needed)
#   --out DIR         keep logs and metrics there (default: a temp dir)
# Environment: BUILD (build dir, default build), SDRUN, SGEMM_BENCH,
#   PYTORCH_PYTHON (default /usr/bin/python3: Debian's python3-torch),
#   SD_STEPS (default 5), PYTORCH_STEPS (default 3), THREADS (default 2;
#   also the number of DDP processes, 1 thread each), ROUNDS (default 1:
#   runs every measurement that many times, in turn, and keeps each one's
#   best round; 2 or 3 on a machine that others load).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BUILD="${BUILD:-build}"
SDRUN="${SDRUN:-$BUILD/bin/sdrun}"
SGEMM_BENCH="${SGEMM_BENCH:-$BUILD/bin/sd_sgemm_bench}"
PY="${PYTORCH_PYTHON:-/usr/bin/python3}"
SD_STEPS="${SD_STEPS:-5}"
PYTORCH_STEPS="${PYTORCH_STEPS:-3}"
THREADS="${THREADS:-2}"
ROUNDS="${ROUNDS:-1}"
MODEL=models/dit_s2.mlir
BATCH=8

baselines_only=0
quick=0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --baselines-only) baselines_only=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "train_step.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "train_step.sh: $*" >&2; exit 2; }
if [[ $quick -eq 1 ]]; then
  SD_STEPS=2
  PYTORCH_STEPS=1
fi

# --- Preconditions, checked before anything slow runs ---------------------
[[ -x "$SGEMM_BENCH" ]] ||
  die "$SGEMM_BENCH not found: build it (ninja -C $BUILD sd_sgemm_bench) or set SGEMM_BENCH"
[[ -x "$PY" ]] || die "$PY not found (Debian's python3-torch interpreter; set PYTORCH_PYTHON)"
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (apt install python3-torch)"
if [[ $baselines_only -eq 0 ]]; then
  [[ -x "$SDRUN" ]] ||
    die "$SDRUN not found: sdrun is not built yet (ninja -C $BUILD sdrun), or set SDRUN; --baselines-only runs sgemm and PyTorch alone"
  [[ -f "$MODEL" ]] || die "$MODEL not found"
fi
[[ "$SD_STEPS" -ge 2 ]] || die "SD_STEPS must be >= 2 (step 1 is warm-up)"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive integer, not '$ROUNDS'"
has_flash=0
if [[ $baselines_only -eq 0 ]]; then
  # The help is read whole first: under pipefail, grep -q's early exit
  # makes sdrun's write fail and the pipeline with it.
  sdrun_help="$("$SDRUN" --help 2>&1 || true)"
  if grep -q -- '--attention=' <<<"$sdrun_help"; then
    has_flash=1
  else
    echo "train_step.sh: $SDRUN has no --attention; no flash row" >&2
  fi
fi

if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-train-step.XXXXXX")"
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
    echo "train_step.sh: $name failed; last lines of $out/$name.log:" >&2
    tail -n 30 "$out/$name.log" >&2
    exit 2
  fi
}

# field FILE KEY: the value of KEY=... on the last line holding it.
field() {
  { grep -o "\b$2=[^ ]*" "$1" || true; } | tail -n 1 | cut -d= -f2
}

cpu_model="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
date_start="$(date -u '+%Y-%m-%d %H:%M UTC')"

# --- Measurements ---------------------------------------------------------
# ROUNDS rounds of every measurement in the same order; each measure keeps
# its best round (the highest sgemm rate, the lowest step time), so that a
# burst of load from other work spoils one round, not the comparison.
sd_params=""
for ((round = 1; round <= ROUNDS; round++)); do
  r=".r$round"
  run "sgemm$r" env OMP_NUM_THREADS="$THREADS" "$SGEMM_BENCH" --table --n=2048
  run "pytorch$r" "$PY" bench/pytorch_dit_s2.py --threads="$THREADS" \
    --steps="$PYTORCH_STEPS" --batch="$BATCH" --flops
  # PyTorch's fastest use of the cores: one single-threaded process per core.
  run "pytorch_ddp$r" "$PY" bench/pytorch_dit_s2.py --processes="$THREADS" \
    --threads=1 --steps="$PYTORCH_STEPS" --batch="$BATCH" --flops
  if [[ $baselines_only -eq 0 ]]; then
    run "sd_data2$r" "$SDRUN" "$MODEL" --mesh=data:2 --batch="$BATCH" \
      --steps="$SD_STEPS" --metrics="$out/sd_data2$r.jsonl"
    run "sd_single$r" "$SDRUN" "$MODEL" --batch="$BATCH" --steps="$SD_STEPS" \
      --threads-per-device="$THREADS" --metrics="$out/sd_single$r.jsonl"
    if [[ $has_flash -eq 1 ]]; then
      run "sd_data2_flash$r" "$SDRUN" "$MODEL" --mesh=data:2 --batch="$BATCH" \
        --steps="$SD_STEPS" --attention=flash \
        --metrics="$out/sd_data2_flash$r.jsonl"
    fi
    # The same mesh over two processes (rank 0 writes the metrics).
    if command -v mpirun >/dev/null; then
      run "sd_data2_mpi$r" env OMPI_ALLOW_RUN_AS_ROOT=1 \
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 600 mpirun --oversubscribe \
        -np 2 "$SDRUN" "$MODEL" --mesh=data:1 --dcn-mesh=data:2 \
        --batch="$BATCH" --steps="$SD_STEPS" \
        --metrics="$out/sd_data2_mpi$r.jsonl"
    fi
  fi
done
pytorch_params="$(field "$out/pytorch.r1.log" params)"

# sd's parameter count, from sdopt's report ("131 tensors, 32,865,056
# elements"), to check that the PyTorch model is the same size.
if [[ -x "$BUILD/bin/sdopt" ]]; then
  "$BUILD/bin/sdopt" "$MODEL" --batch="$BATCH" --report >"$out/sdopt_report.log" 2>&1 || true
  sd_params="$({ grep -m1 '^ *parameters' "$out/sdopt_report.log" || true; } |
    sed -n 's/.*tensors, \([0-9,]*\) elements.*/\1/p' | tr -d ,)"
fi
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- Table ----------------------------------------------------------------
export ROUNDS PYTORCH_PARAMS="$pytorch_params" SD_PARAMS="$sd_params" THREADS BASELINES_ONLY="$baselines_only" \
  OUT="$out" QUICK="$quick" CPU_MODEL="$cpu_model" LOAD_START="$load_start" \
  LOAD_END="$load_end" DATE_START="$date_start"
"$PY" - <<'EOF'
import json, os, re, statistics, sys

out = os.environ["OUT"]
rounds = range(1, int(os.environ["ROUNDS"]) + 1)


def field(name, key):
    """KEY=... of the last line holding it in NAME.log, for every round."""
    values = []
    for r in rounds:
        path = os.path.join(out, "%s.r%d.log" % (name, r))
        found = re.findall(r"\b%s=([^ \n]*)" % key, open(path).read())
        if not found:
            sys.exit("train_step.sh: no %s= in %s" % (key, path))
        values.append(float(found[-1]))
    return values


def sgemm_of_round(r):
    """{library: GFLOP/s} of round R's sgemm log."""
    path = os.path.join(out, "sgemm.r%d.log" % r)
    found = re.findall(r"\blibrary=(\S+) .*\bgflops=([0-9.]+)",
                       open(path).read())
    if not found:
        sys.exit("train_step.sh: no library=... gflops=... line in %s" % path)
    return {lib: float(g) for lib, g in found}


sgemm_libraries = [sgemm_of_round(r) for r in rounds]
# Each round's ceiling: the faster library.
sgemm_rounds = [max(libs.values()) for libs in sgemm_libraries]
sgemm = max(sgemm_rounds)
sgemm_best = {lib: max(libs.get(lib, 0.0) for libs in sgemm_libraries)
              for lib in sgemm_libraries[0]}
torch_s = min(field("pytorch", "step_s"))
ddp_s = min(field("pytorch_ddp", "step_s"))
threads = os.environ["THREADS"]
failed = False


def metrics(name):
    """The round of NAME with the lowest median step time."""
    return min((metrics_of("%s.r%d" % (name, r)) for r in rounds),
               key=lambda m: m["step_s"])


def metrics_of(name):
    """Medians over the steps after the first (warm-up) of NAME.jsonl."""
    path = os.path.join(out, name + ".jsonl")
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit("train_step.sh: %s line %d: %s" % (path, n, e))
    timed = [r for r in rows if int(r["step"]) > 1]
    if not timed:
        sys.exit("train_step.sh: %s has no step after the warm-up" % path)
    med = lambda k: statistics.median(float(r[k]) for r in timed if k in r)
    m = {"steps": len(timed), "step_s": med("step_time_s"),
         "losses": [float(r["loss"]) for r in rows],
         "model_flops": float(timed[-1].get("model_flops", 0))}
    if m["model_flops"] > 0:
        m["gflops"] = m["model_flops"] / m["step_s"] / 1e9
    else:
        m["gflops"] = med("achieved_gflops")
    for k in ("peak_device_bytes", "peak_host_bytes", "comm_bytes_per_device"):
        m[k] = max(int(r.get(k, 0)) for r in rows)
    return m


def verdict(ok):
    global failed
    failed |= not ok
    return "PASS" if ok else "FAIL"


LIBRARY_NAMES = {"openblas": "OpenBLAS", "onednn": "oneDNN"}
rows = [("sgemm n=2048, %s threads, %s" % (threads, LIBRARY_NAMES.get(lib, lib)),
         "%.1f GFLOP/s" % g, "", "") for lib, g in sgemm_best.items()]
rows += [("PyTorch 1.13 DiT-S/2 step, %s threads" % threads,
          "%.2f s/step" % torch_s, "", ""),
         ("PyTorch 1.13 DiT-S/2 step, DDP (gloo) %s processes x 1 thread"
          % threads, "%.2f s/step" % ddp_s, "", "")]
sd_params = os.environ["SD_PARAMS"]
torch_params = os.environ["PYTORCH_PARAMS"]
if sd_params:
    rows.append(("PyTorch parameters (sd: %s)" % sd_params, torch_params,
                 "= sd", verdict(sd_params == torch_params)))
else:
    rows.append(("PyTorch parameters", torch_params, "", ""))
if os.environ["BASELINES_ONLY"] == "0":
    d2, one = metrics("sd_data2"), metrics("sd_single")
    pct = 100 * d2["gflops"] / sgemm
    speedup = torch_s / d2["step_s"]
    overhead = d2["step_s"] / one["step_s"] - 1
    rows += [
        ("sd data:2 step", "%.3f s/step" % d2["step_s"], "", ""),
        ("sd data:2 achieved", "%.1f GFLOP/s" % d2["gflops"], "", ""),
        ("sd data:2 / sgemm", "%.1f%%" % pct, ">= 50%", verdict(pct >= 50)),
        ("sd data:2 speed-up vs PyTorch", "%.3fx" % speedup, ">= 4x",
         verdict(speedup >= 4)),
        ("sd single device step (%s threads)" % threads,
         "%.3f s/step" % one["step_s"], "", ""),
        ("partitioning overhead (data:2 / single - 1)",
         "%+.1f%%" % (100 * overhead), "<= 15%", verdict(overhead <= 0.15)),
        ("sd data:2 speed-up vs PyTorch DDP", "%.3fx" % (ddp_s / d2["step_s"]),
         ">= 1.5x", verdict(ddp_s / d2["step_s"] >= 1.5)),
    ]
    flash = None
    if os.path.exists(os.path.join(out, "sd_data2_flash.r1.jsonl")):
        flash = metrics("sd_data2_flash")
        # The same model FLOPs as the data:2 row: sdrun's count for the
        # tiled program adds the backward's recompute, which is no useful
        # work.
        if d2["model_flops"] > 0:
            flash["gflops"] = d2["model_flops"] / flash["step_s"] / 1e9
        fpct = 100 * flash["gflops"] / sgemm
        rows += [
            ("sd data:2 --attention=flash step",
             "%.3f s/step" % flash["step_s"], "", ""),
            ("sd data:2 --attention=flash achieved (data:2's model FLOPs)",
             "%.1f GFLOP/s" % flash["gflops"], "", ""),
            ("sd data:2 --attention=flash / sgemm", "%.1f%%" % fpct, ">= 85%",
             verdict(fpct >= 85)),
            ("sd data:2 --attention=flash speed-up vs PyTorch DDP",
             "%.3fx" % (ddp_s / flash["step_s"]), ">= 1.5x",
             verdict(ddp_s / flash["step_s"] >= 1.5)),
        ]
    else:
        rows.append(("sd data:2 --attention=flash", "not run (sdrun has no "
                     "--attention)", "", ""))
    if os.path.exists(os.path.join(out, "sd_data2_mpi.r1.jsonl")):
        mpi = metrics("sd_data2_mpi")
        slower = mpi["step_s"] / d2["step_s"] - 1
        rows += [
            ("sd data:2 as 2 MPI ranks step", "%.3f s/step" % mpi["step_s"],
             "", ""),
            ("2 MPI ranks vs 1 process (ranks / process - 1)",
             "%+.1f%%" % (100 * slower), "<= 15%", verdict(slower <= 0.15)),
        ]

print("DiT-S/2 training step, batch 8, %s" % os.environ["DATE_START"])
print()
print("- CPU: %s; %d cores" % (os.environ["CPU_MODEL"], os.cpu_count()))
print("- load average (1, 5, 15 min): %s at start, %s at end"
      % (os.environ["LOAD_START"], os.environ["LOAD_END"]))
if len(rounds) > 1:
    print("- %d rounds, each measure its best; sgemm (the faster library) "
          "per round: %s GFLOP/s"
          % (len(rounds), ", ".join("%.1f" % g for g in sgemm_rounds)))
print("- sgemm, the ceiling the targets use: %.1f GFLOP/s, the faster of %s"
      % (sgemm, " and ".join(LIBRARY_NAMES.get(lib, lib)
                             for lib in sgemm_best)))
print()

print("| measure | value | target | result |")
print("|---|---|---|---|")
for r in rows:
    print("| %s |" % " | ".join(r))

if os.environ["BASELINES_ONLY"] == "0":
    print()
    runs = [("data:2", d2), ("single", one)]
    if flash:
        runs.append(("data:2 flash", flash))
    for name, m in runs:
        print("sd %s: %d timed steps, model %.1f GFLOP/step, peak device %.1f MB,"
              " peak host %.1f MB, comm %.1f MB/device; losses %s"
              % (name, m["steps"], m["model_flops"] / 1e9,
                 m["peak_device_bytes"] / 1e6, m["peak_host_bytes"] / 1e6,
                 m["comm_bytes_per_device"] / 1e6,
                 " ".join("%.4f" % l for l in m["losses"])))
if os.environ["QUICK"] == "1":
    print()
    print("--quick: a smoke test; the targets are not enforced")
    failed = False
sys.exit(1 if failed else 0)
EOF
