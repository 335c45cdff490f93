#!/usr/bin/env bash
# Whether the reference layouts cost step time: DiT-S/2's training step with
# the weights as the reference checkpoints hold them (models/dit_s2.mlir:
# Linear weights [out, in], fused qkv [3·hidden, hidden] viewed as
# [3, hidden, hidden], the patch embedding as the conv's weight) against the
# same model in sd's earlier layouts ([in, out], qkv [hidden, 3, hidden]),
# taken from the repository's history (models/dit_s2.mlir at LAYOUT_BASE,
# default 2a34db7^, the commit before the layout change), both compiled and
# run by this sdrun, in turn, in the same run.
#
# Each measurement: `sdrun MODEL --mesh=data:2 --batch=8 --steps=SD_STEPS`
# (its own program cache, compiled before the timed run), the median of the
# steps after the first. ROUNDS rounds alternate the two models; the table
# gives each round and the median over rounds.
# Target (issue 26): the reference layouts' step at most 3% over the old
# layouts' (the ratio of the medians <= 1.03). Exits 1 when it fails, 2 on
# a usage or setup error.
#
# Usage: bench/layout_step.sh [--out DIR]
# Environment: BUILD (default build), SDRUN, LAYOUT_BASE, SD_STEPS (default
#   5), ROUNDS (default 3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDRUN="${SDRUN:-$BUILD/bin/sdrun}"
LAYOUT_BASE="${LAYOUT_BASE:-2a34db7^}"
SD_STEPS="${SD_STEPS:-5}"
ROUNDS="${ROUNDS:-3}"

out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "layout_step.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "layout_step.sh: $*" >&2; exit 2; }
[[ -x "$SDRUN" ]] || die "$SDRUN not found: build it (scripts/build.sh sdrun) or set SDRUN"
[[ "$SD_STEPS" -ge 2 ]] || die "SD_STEPS must be >= 2 (step 1 is warm-up)"
[[ "$ROUNDS" -ge 1 ]] || die "ROUNDS must be >= 1"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-layout-step.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2
git show "$LAYOUT_BASE:models/dit_s2.mlir" >"$out/old_layout.mlir" 2>/dev/null ||
  die "cannot read models/dit_s2.mlir at $LAYOUT_BASE (a clone with history is needed)"
grep -q 'attn.qkv.weight", xavier_uniform, stored' models/dit_s2.mlir ||
  die "models/dit_s2.mlir does not have the reference layouts"
if grep -q 'stored\[' "$out/old_layout.mlir"; then
  die "models/dit_s2.mlir at $LAYOUT_BASE already has the reference layouts"
fi

# step NAME MODEL ROUND: the median step time after the first, in seconds.
step() {
  local name="$1" model="$2" round="$3"
  "$SDRUN" "$model" --mesh=data:2 --batch=8 --steps="$SD_STEPS" \
    --cache-dir="$out/cache-$name" --metrics="$out/$name-$round.jsonl" \
    >"$out/$name-$round.log" 2>&1 || die "$name failed; see $out/$name-$round.log"
  python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("%.3f" % statistics.median(float(r["step_time_s"]) for r in rows if int(r["step"]) > 1))
' "$out/$name-$round.jsonl"
}

# Compile both programs first, so that no timed run compiles.
"$SDRUN" models/dit_s2.mlir --mesh=data:2 --batch=8 --compile-only \
  --cache-dir="$out/cache-reference" >"$out/compile-reference.log" 2>&1 ||
  die "compiling models/dit_s2.mlir failed; see $out/compile-reference.log"
"$SDRUN" "$out/old_layout.mlir" --mesh=data:2 --batch=8 --compile-only \
  --cache-dir="$out/cache-old" >"$out/compile-old.log" 2>&1 ||
  die "compiling the old layout failed; see $out/compile-old.log"

echo "# DiT-S/2 step: reference layouts vs the layouts of $(git rev-parse --short "$LAYOUT_BASE")"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | old layouts (s) | reference layouts (s) | ratio |"
echo "|---:|---:|---:|---:|"
olds=() refs=()
for ((r = 1; r <= ROUNDS; ++r)); do
  old=$(step old "$out/old_layout.mlir" "$r")
  ref=$(step reference models/dit_s2.mlir "$r")
  olds+=("$old")
  refs+=("$ref")
  echo "| $r | $old | $ref | $(awk -v a="$ref" -v b="$old" 'BEGIN { printf "%.3f", a / b }') |"
done
read -r old_med ref_med < <(python3 -c '
import statistics, sys
n = len(sys.argv) // 2
print(statistics.median(map(float, sys.argv[1:n + 1])),
      statistics.median(map(float, sys.argv[n + 1:])))
' "${olds[@]}" "${refs[@]}")
ratio=$(awk -v a="$ref_med" -v b="$old_med" 'BEGIN { printf "%.3f", a / b }')
verdict=PASS
awk -v r="$ratio" 'BEGIN { exit !(r <= 1.03) }' || verdict=FAIL
echo "| median | $old_med | $ref_med | $ratio |"
echo
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "target: reference / old <= 1.03: $verdict"
[[ "$verdict" == PASS ]]
