#!/usr/bin/env bash
# Training what no single process holds: Wan2.1-1.3B at its published size
# (sdgen --preset=wan2.1-1.3b: 30 layers, 1536 wide, 12 heads, FFN 8960) at
# a small resolution (1 frame of 64×64 pixels: 16 tokens, 512 text tokens),
# FSDP over 8 devices. Its f32 parameters, gradients and AdamW moments are
# about 21 GB; this machine has 24 GiB. The runs recompute activations in
# the backward pass (--remat=FULL, MaxDiffusion's remat_policy: FULL): 4.82
# GiB per process of 4 instead of 5.54 GiB without it (sdrun prints what a
# refused run would hold at its activation peak).
#
# Runs (each sdrun under mpirun with a timeout; --threads-per-device=1):
#  1. 4 ranks, --mesh=fsdp:2 --dcn-mesh=fsdp:4: 2 steps, checkpoint.
#  2. 2 ranks, --mesh=fsdp:4 --dcn-mesh=fsdp:2 (the same 8 devices): resume
#     to step 3, export the parameters.
#  3. 4 ranks again: resume from step 2 to step 3 (step 3's checkpoint of
#     run 2 removed): its step-3 loss must equal run 2's bitwise (the same
#     mesh on another process count).
#  4. 1 rank, --mesh=fsdp:8: one step (one process holds it all).
#  5. A run whose prediction exceeds --host-memory-limit is refused before
#     compiling (and quickly).
# Table: per run the largest per-rank peak resident memory against the
# prediction (target <= 1.2x), and ranks × peak against the one-copy total
# (parameters, gradients and moments of the whole model; target <= 1.3x).
# With BASELINE_SDRUN (an sdrun of an earlier commit), run 1 of it under a
# per-rank address-space limit of BASELINE_LIMIT_GB (default 8) shows where
# it stops ("before"). Exits 1 when a target fails, 2 on a setup error.
#
# Usage: bench/scale_out.sh [--out DIR]
# Environment: BUILD (default build), SDRUN, SDGEN, BASELINE_SDRUN,
#   BASELINE_LIMIT_GB, TIMEOUT (seconds per run, default 1800).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDRUN="${SDRUN:-$BUILD/bin/sdrun}"
SDGEN="${SDGEN:-$BUILD/bin/sdgen}"
BASELINE_SDRUN="${BASELINE_SDRUN:-}"
BASELINE_LIMIT_GB="${BASELINE_LIMIT_GB:-8}"
TIMEOUT="${TIMEOUT:-1800}"

out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale_out.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "scale_out.sh: $*" >&2; exit 2; }
[[ -x "$SDRUN" ]] || die "$SDRUN not found: build it (scripts/build.sh sdrun) or set SDRUN"
[[ -x "$SDGEN" ]] || die "$SDGEN not found: build it (scripts/build.sh sdgen) or set SDGEN"
command -v mpirun >/dev/null || die "mpirun not found (scripts/install-deps.sh installs it)"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-scale-out.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_rmaps_base_oversubscribe=1

model="$out/wan13.mlir"
"$SDGEN" --preset=wan2.1-1.3b --frames=1 --height=64 --width=64 -o "$model" \
  2>"$out/sdgen.log" || die "sdgen failed (see $out/sdgen.log)"
sed 's/^/  /' "$out/sdgen.log" >&2
ckpt="$out/ckpt"
rm -rf "$ckpt"

# run NAME RANKS SDRUN_ARGS...: one sdrun job; its log is $out/NAME.log.
run() {
  local name="$1" ranks="$2"
  shift 2
  local start end
  start=$(date +%s.%N)
  if [[ "$ranks" == 1 ]]; then
    timeout "$TIMEOUT" "$SDRUN" "$model" --threads-per-device=1 --batch=8 \
      --remat=FULL --cache-dir="$out/cache" "$@" >"$out/$name.log" 2>&1
  else
    timeout "$TIMEOUT" mpirun -np "$ranks" "$SDRUN" "$model" \
      --threads-per-device=1 --batch=8 --remat=FULL --cache-dir="$out/cache" \
      "$@" >"$out/$name.log" 2>&1
  fi || die "$name failed; see $out/$name.log"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }' >"$out/$name.seconds"
}

run four 4 --mesh=fsdp:2 --dcn-mesh=fsdp:4 --steps=2 --checkpoint-dir="$ckpt" \
  --metrics="$out/four.jsonl"
run two 2 --mesh=fsdp:4 --dcn-mesh=fsdp:2 --steps=3 --checkpoint-dir="$ckpt" \
  --resume --metrics="$out/two.jsonl" --export="$out/wan13.safetensors"
rm -rf "$ckpt/step_00000003"
run again 4 --mesh=fsdp:2 --dcn-mesh=fsdp:4 --steps=3 --checkpoint-dir="$ckpt" \
  --resume --metrics="$out/again.jsonl"
rm -rf "$ckpt"
run one 1 --mesh=fsdp:8 --steps=1

# The refusal: a limit below the prediction, before anything compiles.
start=$(date +%s.%N)
if timeout 300 mpirun -np 4 "$SDRUN" "$model" --mesh=fsdp:2 --dcn-mesh=fsdp:4 \
  --batch=8 --steps=1 --host-memory-limit=2GiB --cache-dir="$out/cache-refused" \
  >"$out/refused.log" 2>&1; then
  refused="ran (not refused)"
else
  refused="$(grep -m1 'error:' "$out/refused.log" | sed 's/|/\\|/g' || true)"
fi
refused_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
compiled_refused=$( [[ -d "$out/cache-refused" ]] && ls "$out/cache-refused" | wc -l || echo 0)

if [[ -n "$BASELINE_SDRUN" ]]; then
  ( ulimit -v $((BASELINE_LIMIT_GB * 1024 * 1024))
    timeout "$TIMEOUT" mpirun -np 4 "$BASELINE_SDRUN" "$model" \
      --threads-per-device=1 --batch=8 --mesh=fsdp:2 --dcn-mesh=fsdp:4 \
      --steps=2 --cache-dir="$out/cache-base" >"$out/baseline.log" 2>&1 ) || true
fi

# DiT-XL/2 on fsdp:2 (batch 2): peak resident memory against the prediction,
# and with BASELINE_SDRUN the same run's peak (GNU time's maximum RSS).
"$SDGEN" --preset=dit-xl2 -o "$out/dit_xl2.mlir" 2>/dev/null ||
  die "sdgen --preset=dit-xl2 failed"
xl2() { # NAME SDRUN
  /usr/bin/time -f "maxrss_kib %M" "$2" "$out/dit_xl2.mlir" --mesh=fsdp:2 \
    --batch=2 --steps=2 --cache-dir="$out/cache-xl2" >"$out/$1.log" 2>&1 ||
    die "$1 failed; see $out/$1.log"
}
xl2 xl2 "$SDRUN"
[[ -n "$BASELINE_SDRUN" ]] && xl2 xl2-base "$BASELINE_SDRUN"
# DiT-S/2 on data:2, warm program cache: the time to the first step (the
# second of two runs), and both sdruns' whole one-step command.
s2() { # NAME SDRUN
  "$2" models/dit_s2.mlir --mesh=data:2 --steps=1 --cache-dir="$out/cache-s2-$1" \
    >/dev/null 2>&1 || die "$1 failed"
  local start
  start=$(date +%s.%N)
  "$2" models/dit_s2.mlir --mesh=data:2 --steps=1 --cache-dir="$out/cache-s2-$1" \
    >"$out/$1.log" 2>&1 || die "$1 failed; see $out/$1.log"
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }' >"$out/$1.seconds"
}
s2 s2 "$SDRUN"
[[ -n "$BASELINE_SDRUN" ]] && s2 s2-base "$BASELINE_SDRUN"

python3 - "$out" "$BASELINE_LIMIT_GB" "$refused" "$refused_s" "$compiled_refused" <<'PY'
import json, re, sys
out, limit, refused, refused_s, compiled = sys.argv[1:6]
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
def size(text):
    number, unit = text.split()
    return float(number) * units[unit]
def summary(name):
    log = open(f"{out}/{name}.log").read()
    m = re.search(r"per process: peak resident memory ([0-9.]+ \w+)"
                  r"(?: \(the largest of (\d+) processes; ([0-9.]+ \w+) in all\))?"
                  r", predicted ([0-9.]+ \w+)", log)
    if not m:
        sys.exit(f"{name}.log has no memory summary")
    peak, ranks, total, predicted = m.groups()
    first = re.search(r"time to first step: ([0-9.]+) s", log)
    return (size(peak), int(ranks or 1), size(total) if total else size(peak),
            size(predicted), float(first.group(1)) if first else float("nan"))
def losses(name):
    return {json.loads(l)["step"]: json.loads(l)["loss"]
            for l in open(f"{out}/{name}.jsonl") if l.strip()}
one_copy = None
log = open(f"{out}/one.log").read()
header = re.search(r"sdrun: \S+, (\d+) parameters", log)
params = int(header.group(1))
# Parameters, gradients and two AdamW moments, f32.
one_copy = params * 4 * 4
failed = False
def verdict(ok):
    global failed
    failed |= not ok
    return "PASS" if ok else "FAIL"
gib = lambda b: f"{b / 2**30:.2f} GiB"
print(f"Wan2.1-1.3B: {params:,} parameters; parameters, gradients and moments "
      f"{gib(one_copy)} (the one-copy total)\n")
print("| run | ranks | peak per rank (largest) | predicted | peak / predicted | "
      "ranks × peak | / one copy | time to first step | wall | result |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for name, label in [("four", "2 steps + checkpoint"), ("two", "resume to step 3 + export"),
                    ("again", "resume to step 3"), ("one", "1 step")]:
    peak, ranks, total, predicted, first = summary(name)
    wall = open(f"{out}/{name}.seconds").read().strip()
    ok = peak <= 1.2 * predicted and ranks * peak <= 1.3 * one_copy
    print(f"| {label} | {ranks} | {gib(peak)} | {gib(predicted)} | "
          f"{peak / predicted:.2f} | {gib(ranks * peak)} | {ranks * peak / one_copy:.2f} | "
          f"{first:.1f} s | {wall} s | {verdict(ok)} |")
two, again, four = losses("two"), losses("again"), losses("four")
same = two.get(3) == again.get(3) and two.get(3) is not None
print(f"\nlosses: steps 1-2 on 4 ranks {four.get(1)!r}, {four.get(2)!r}; step 3 "
      f"resumed on 2 ranks {two.get(3)!r}, on 4 ranks {again.get(3)!r}: "
      f"{'bitwise equal' if same else 'DIFFERENT'} ({verdict(same)})")
ok = refused != "ran (not refused)" and int(compiled) == 0
print(f"--host-memory-limit=2GiB on 4 ranks: {refused} ({refused_s} s, "
      f"{compiled} programs compiled; {verdict(ok)})")
xl2 = open(f"{out}/xl2.log").read()
m = re.search(r"per process: peak resident memory ([0-9.]+ \w+), predicted ([0-9.]+ \w+)", xl2)
peak, predicted = size(m.group(1)), size(m.group(2))
line = (f"\nDiT-XL/2, fsdp:2, batch 2: peak resident {gib(peak)}, predicted {gib(predicted)}: "
        f"{peak / predicted:.2f} ({verdict(peak <= 1.2 * predicted)})")
try:
    base = re.search(r"maxrss_kib (\d+)", open(f"{out}/xl2-base.log").read())
    line += f"; baseline sdrun's peak {gib(int(base.group(1)) * 1024)}"
except (FileNotFoundError, AttributeError):
    pass
print(line)
s2 = open(f"{out}/s2.log").read()
first = re.search(r"time to first step: ([0-9.]+) s \(.*first step ([0-9.]+) s\)", s2)
before_step = float(first.group(1)) - float(first.group(2))
line = (f"DiT-S/2, data:2, warm cache: {first.group(0)}; before the step "
        f"{before_step:.2f} s ({verdict(before_step <= 1.5)}: <= 1.5 s); whole 1-step "
        f"command {open(f'{out}/s2.seconds').read()} s")
try:
    line += f" (baseline sdrun: {open(f'{out}/s2-base.seconds').read()} s)"
except FileNotFoundError:
    pass
print(line)
try:
    base = open(f"{out}/baseline.log").read()
    lines = [l for l in base.splitlines() if "error" in l.lower() or "memory" in l.lower()]
    print(f"baseline sdrun under a {limit} GiB per-rank limit: "
          f"{lines[0] if lines else base.strip().splitlines()[-1]}")
except (FileNotFoundError, IndexError):
    pass
sys.exit(1 if failed else 0)
PY
