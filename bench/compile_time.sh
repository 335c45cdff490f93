#!/usr/bin/env bash
# How long a new device program takes to compile, and whether it runs as
# fast as before.
#
# Compile: `sdrun --compile-only` into an empty program cache (cold), for
#   DiT-S/2 (models/dit_s2.mlir, --mesh=data:2, batch 8) and DiT-XL/2
#   (sdgen --preset=dit-xl2, --mesh=data:2, batch 2). The time is the one
#   sdrun prints for the device program ("compiled the device program in N
#   s"); the command's whole wall time (building the step too) is shown
#   beside it.
# Step: DiT-S/2's training step, `sdrun --steps=SD_STEPS --mesh=data:2`,
#   median of the steps after the first.
# With BASELINE_SDRUN (an sdrun built from an earlier commit, e.g.
#   `git worktree add /tmp/base COMMIT && SD_BUILD_DIR=/tmp/base/build
#   /tmp/base/scripts/build.sh sdrun`), the same measurements of it, in the
#   same run, and the ratios (an sdrun without --compile-only is stopped
#   once it has printed its compile time; its whole-command time then
#   includes the start of its first step).
# Targets: DiT-S/2 compile <= 8 s, DiT-XL/2 compile <= 30 s (2 cores), and
#   with a baseline, the step no slower than the baseline's (at most 3% over,
#   the run-to-run noise on this machine). Prints a Markdown table; exits 1
#   when a target fails, 2 on a usage or setup error.
#
# Usage: bench/compile_time.sh [--out DIR]
# Environment: BUILD (default build), SDRUN, SDGEN, BASELINE_SDRUN,
#   SD_STEPS (default 4).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDRUN="${SDRUN:-$BUILD/bin/sdrun}"
SDGEN="${SDGEN:-$BUILD/bin/sdgen}"
BASELINE_SDRUN="${BASELINE_SDRUN:-}"
SD_STEPS="${SD_STEPS:-4}"

out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compile_time.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "compile_time.sh: $*" >&2; exit 2; }
[[ -x "$SDRUN" ]] || die "$SDRUN not found: build it (scripts/build.sh sdrun) or set SDRUN"
[[ -x "$SDGEN" ]] || die "$SDGEN not found: build it (scripts/build.sh sdgen) or set SDGEN"
[[ -z "$BASELINE_SDRUN" || -x "$BASELINE_SDRUN" ]] ||
  die "BASELINE_SDRUN=$BASELINE_SDRUN is not an executable"
[[ "$SD_STEPS" -ge 2 ]] || die "SD_STEPS must be >= 2 (step 1 is warm-up)"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-compile-time.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2

"$SDGEN" --preset=dit-xl2 -o "$out/dit_xl2.mlir" 2>"$out/sdgen.log" ||
  die "sdgen --preset=dit-xl2 failed (see $out/sdgen.log)"

# compile NAME SDRUN MODEL BATCH: a cold --compile-only run; prints
# "PROGRAM_SECONDS WALL_SECONDS".
compile() {
  local name="$1" sdrun="$2" model="$3" batch="$4" cache="$out/cache-$1"
  rm -rf "$cache"
  local start end
  start=$(date +%s.%N)
  # The help is read whole first: under pipefail, grep -q's early exit
  # would fail the pipeline (sdrun's write to a closed pipe).
  local help
  help="$("$sdrun" --help 2>&1 || true)"
  if grep -q -- --compile-only <<<"$help"; then
    "$sdrun" "$model" --mesh=data:2 --batch="$batch" --compile-only \
      --cache-dir="$cache" >"$out/$name.log" 2>&1 ||
      die "$name failed; see $out/$name.log"
  else
    # An sdrun from before --compile-only: a one-step run, stopped once it
    # has said how long the compile took.
    "$sdrun" "$model" --mesh=data:2 --batch="$batch" --steps=1 \
      --cache-dir="$cache" >"$out/$name.log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null &&
      ! grep -q '^compiled the device program' "$out/$name.log"; do
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  end=$(date +%s.%N)
  local program
  program=$(sed -n 's/^compiled the device program in \([0-9.]*\) s.*/\1/p' "$out/$name.log")
  [[ -n "$program" ]] || die "$out/$name.log has no 'compiled the device program in'"
  echo "$program $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
}

# step NAME SDRUN: DiT-S/2's median step time after the first, in seconds.
step() {
  local name="$1" sdrun="$2"
  "$sdrun" models/dit_s2.mlir --mesh=data:2 --batch=8 --steps="$SD_STEPS" \
    --cache-dir="$out/cache-$name-step" --metrics="$out/$name.jsonl" \
    >"$out/$name.log" 2>&1 || die "$name failed; see $out/$name.log"
  python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%.3f" % statistics.median(float(r["step_time_s"]) for r in rows if int(r["step"]) > 1))
' "$out/$name.jsonl"
}

failed=0
verdict() { if awk "BEGIN { exit !($1) }"; then echo PASS; else failed=1; echo FAIL; fi; }

read -r s2 s2_wall < <(compile s2 "$SDRUN" models/dit_s2.mlir 8)
read -r xl2 xl2_wall < <(compile xl2 "$SDRUN" "$out/dit_xl2.mlir" 2)
s2_step=$(step s2-step "$SDRUN")
if [[ -n "$BASELINE_SDRUN" ]]; then
  read -r base_s2 base_s2_wall < <(compile base-s2 "$BASELINE_SDRUN" models/dit_s2.mlir 8)
  read -r base_xl2 base_xl2_wall < <(compile base-xl2 "$BASELINE_SDRUN" "$out/dit_xl2.mlir" 2)
  base_step=$(step base-s2-step "$BASELINE_SDRUN")
fi

echo "| measure (2 cores) | sd | baseline | ratio | target | result |"
echo "|---|---:|---:|---:|---|---|"
row() { # LABEL VALUE BASE TARGET_EXPR TARGET_TEXT UNIT
  local ratio="" base="${3:-}"
  [[ -n "$base" ]] && ratio=$(awk -v a="$2" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
  echo "| $1 | $2 $6 | ${base:+$base $6} | $ratio | $5 | $(verdict "$4") |"
}
row "DiT-S/2 device program, cold compile (whole command: ${s2_wall} s)" \
  "$s2" "${base_s2:-}" "$s2 <= 8" "<= 8 s" s
row "DiT-XL/2 device program, cold compile (whole command: ${xl2_wall} s)" \
  "$xl2" "${base_xl2:-}" "$xl2 <= 30" "<= 30 s" s
if [[ -n "$BASELINE_SDRUN" ]]; then
  row "DiT-S/2 step, data:2, batch 8" "$s2_step" "$base_step" \
    "$s2_step <= 1.03 * $base_step" "<= 1.03x baseline" s
else
  echo "| DiT-S/2 step, data:2, batch 8 | $s2_step s | | | (set BASELINE_SDRUN) | |"
fi
exit "$failed"
