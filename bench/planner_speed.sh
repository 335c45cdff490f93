#!/usr/bin/env bash
# How long sdopt --plan takes, single-threaded, on real-size models and
# cluster shapes, against issue 29's targets:
#   DiT-XL/2 (batch 8) on 8 devices, tpu-v5p             <= 1 s
#   Wan2.1-14B on 256 devices (64 hosts x 4), tpu-v5p    <= 10 s
#   Flux.1-dev on 256 devices (64 hosts x 4), tpu-v5p    <= 10 s
# plus DiT-S/2 (8 devices) and DiT-XL/2 with its attention fixed to flash
# (120 candidates rather than 360), and Wan2.1-14B on a v5p-8 (4 devices,
# batch 1, bf16: the README's anchor), each on one thread
# (--mlir-disable-threading); and DiT-XL/2, Wan2.1-14B and Flux.1-dev again
# with sdopt partitioning on every core, and checks that they print the
# same tables as on one. The models come from sdgen; each row
# is one run's wall time and peak resident memory (/usr/bin/time), with the
# candidates and how many were priced from sdopt's last line. Prints a markdown table; exit 1 if a
# target fails, 2 on a setup error.
#
# Usage: bench/planner_speed.sh [--quick] [--out DIR]
#   --quick  DiT-S/2 and DiT-XL/2 only (the 256-device rows take minutes)
# Environment: BUILD (build dir, default build).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDOPT="$BUILD/bin/sdopt"
SDGEN="$BUILD/bin/sdgen"

quick=0
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "planner_speed.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "planner_speed.sh: $*" >&2; exit 2; }
for tool in "$SDOPT" "$SDGEN"; do
  [[ -x "$tool" ]] || die "$tool not found: build it first"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt install time)"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-planner-speed.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2

for preset in dit-s2 dit-xl2 wan2.1-14b flux-dev; do
  [[ $quick -eq 1 && "$preset" != dit-* ]] && continue
  "$SDGEN" --preset="$preset" -o "$out/$preset.mlir" 2>/dev/null ||
    die "sdgen --preset=$preset failed"
done

# The targets are single-threaded (--mlir-disable-threading); the rows
# named with threads let sdopt partition on every core (nproc).
threads="$(nproc)"
fail=0
# row NAME TARGET_SECONDS MODEL FLAGS...: one timed sdopt --plan.
row() {
  local name="$1" target="$2" model="$3"; shift 3
  local log="$out/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').log"
  echo "running $name" >&2
  if ! /usr/bin/time -f 'WALL %e RSS %M' "$SDOPT" "$out/$model.mlir" --plan "$@" >"$log" 2>&1; then
    grep -q "no plan fits" "$log" || { tail -5 "$log" >&2; die "$name failed"; }
  fi
  local wall rss candidates priced result=""
  wall="$(sed -n 's/^WALL \([0-9.]*\) .*/\1/p' "$log")"
  rss="$(sed -n 's/^WALL .* RSS \([0-9]*\)$/\1/p' "$log")"
  candidates="$(sed -n 's/.*: \([0-9]*\) candidates.*/\1/p' "$log" | head -1)"
  priced="$(sed -n 's/^priced \([0-9]*\),.*/\1/p' "$log")"
  if [[ -n "$target" ]]; then
    if awk -v w="$wall" -v t="$target" 'BEGIN { exit !(w <= t) }'; then
      result="PASS"
    else
      result="FAIL"; fail=1
    fi
  fi
  echo "| $name | $candidates | ${priced:-0} | ${wall} s | $((rss / 1024)) MiB | ${target:+<= $target s} | $result |"
  last_log="$log"
}
# same LOG: whether the last row printed the same table (and error) as LOG.
same() {
  if ! diff <(grep -v '^WALL ' "$1") <(grep -v '^WALL ' "$last_log") >/dev/null; then
    echo "| (the row above printed another table than on one thread) | | | | | | FAIL |"
    fail=1
  fi
}

echo "# sdopt --plan's speed, $(date -u '+%Y-%m-%d %H:%M UTC'), sd $(git describe --always --dirty 2>/dev/null || echo unknown)"
echo
echo "| search | candidates | priced | time | peak memory | target | result |"
echo "|---|---:|---:|---:|---:|---|---|"
one=--mlir-disable-threading
row "DiT-S/2, batch 8, 8 devices, tpu-v5p" "" dit-s2 --devices=8 --profile=tpu-v5p --batch=8 $one
row "DiT-XL/2, batch 8, 8 devices, tpu-v5p" 1 dit-xl2 --devices=8 --profile=tpu-v5p --batch=8 $one
xl2="$last_log"
row "DiT-XL/2, batch 8, 8 devices, tpu-v5p, --attention=flash" "" dit-xl2 --devices=8 --profile=tpu-v5p --batch=8 --attention=flash $one
row "DiT-XL/2, batch 8, 8 devices, tpu-v5p, $threads threads" "" dit-xl2 --devices=8 --profile=tpu-v5p --batch=8
same "$xl2"
if [[ $quick -eq 0 ]]; then
  row "Wan2.1-14B, batch 1, bf16, 4 devices (v5p-8)" "" wan2.1-14b --devices=4 --profile=tpu-v5p --batch=1 --weights-dtype=bfloat16 --activations-dtype=bfloat16 --rules=configs/wan_14b_v5p8.yml $one
  row "Wan2.1-14B, 256 devices (64 hosts x 4), tpu-v5p" 10 wan2.1-14b --devices=256 --hosts=64 --profile=tpu-v5p $one
  wan="$last_log"
  row "Wan2.1-14B, 256 devices (64 hosts x 4), tpu-v5p, $threads threads" "" wan2.1-14b --devices=256 --hosts=64 --profile=tpu-v5p
  same "$wan"
  row "Flux.1-dev, 256 devices (64 hosts x 4), tpu-v5p" 10 flux-dev --devices=256 --hosts=64 --profile=tpu-v5p $one
  flux="$last_log"
  row "Flux.1-dev, 256 devices (64 hosts x 4), tpu-v5p, $threads threads" "" flux-dev --devices=256 --hosts=64 --profile=tpu-v5p
  same "$flux"
fi
exit $fail
