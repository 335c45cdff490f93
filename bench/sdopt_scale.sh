#!/usr/bin/env bash
# How sdopt's time grows with program size: for each preset, the op count of
# the inlined program and the wall time of sdopt parsing + verifying +
# printing it, alone and through the default pipeline (mesh + logical rules).
# Target: well under 1 s per 10k ops.
# Then the whole training-step compile of the largest preset: sdopt --train
# (sd-differentiate, sd-remat, sd-build-train-step, propagation, partitioning)
# on Wan2.1-14B over fsdp:4,tensor:2 with full remat, batch sdopt's choice
# (target: at most 1.5 s on a 2-core machine), and on SDXL's UNet (2.57B
# parameters, 1680 tensors) over data:2,fsdp:4 (target: at most 5 s).
#
# Usage: bench/sdopt_scale.sh [build dir]   (prints two Markdown tables)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
SDGEN="$BUILD/bin/sdgen"
SDOPT="$BUILD/bin/sdopt"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Best of three wall times of a command, in seconds.
best_of_three() {
  local best=""
  for _ in 1 2 3; do
    local start end t
    start=$(date +%s.%N)
    "$@" > /dev/null
    end=$(date +%s.%N)
    t=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
    if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN { exit !(t < b) }'; then
      best=$t
    fi
  done
  printf '%.3f' "$best"
}

echo "| preset | mesh | ops (inlined) | sdopt parse+verify+print (s) | s / 10k ops | default pipeline, batch 8 (s) | s / 10k ops |"
echo "|---|---|---:|---:|---:|---:|---:|"
for spec in "dit-s2 data:2,fsdp:4" "dit-xl2 fsdp:8" "flux-dev fsdp:4,tensor:2" "wan2.1-14b fsdp:4,context:2" "sd2-base data:2,fsdp:4" "sdxl data:2,fsdp:4"; do
  read -r preset mesh <<< "$spec"
  "$SDGEN" --preset="$preset" -o "$WORK/$preset.mlir" 2> /dev/null
  "$SDOPT" "$WORK/$preset.mlir" --inline -o "$WORK/$preset.inlined.mlir"
  ops=$(grep -cE '^\s+(%[^ ]+ = )?(sd|func)\.|^\s+return' "$WORK/$preset.inlined.mlir" || true)
  parse=$(best_of_three "$SDOPT" "$WORK/$preset.inlined.mlir" -o /dev/null)
  pipeline=$(best_of_three "$SDOPT" "$WORK/$preset.inlined.mlir" --mesh="$mesh" --batch=8 -o /dev/null)
  per=$(awk -v t="$parse" -v n="$ops" 'BEGIN { print t * 10000 / n }')
  perp=$(awk -v t="$pipeline" -v n="$ops" 'BEGIN { print t * 10000 / n }')
  printf '| %s | %s | %d | %s | %.3f | %s | %.3f |\n' "$preset" "$mesh" "$ops" "$parse" "$per" "$pipeline" "$perp"
done

echo
echo "| preset | mesh | remat | ops (training step) | sdopt --train (s) | target (s) | result |"
echo "|---|---|---|---:|---:|---:|---|"
for spec in "wan2.1-14b fsdp:4,tensor:2 FULL 1.5" "sdxl data:2,fsdp:4 NONE 5"; do
  read -r preset mesh remat target <<< "$spec"
  "$SDGEN" --preset="$preset" -o "$WORK/$preset.mlir" 2> /dev/null
  train=("$SDOPT" "$WORK/$preset.mlir" --train --mesh="$mesh" --remat="$remat")
  "${train[@]}" -o "$WORK/$preset.train.mlir" 2> /dev/null
  ops=$(grep -cE '^\s+(%[^ ]+ = )?(sd|func)\.|^\s+return' "$WORK/$preset.train.mlir" || true)
  t=$(best_of_three "${train[@]}" -o /dev/null 2> /dev/null)
  result=$(awk -v t="$t" -v g="$target" 'BEGIN { print (t <= g) ? "PASS" : "FAIL" }')
  printf '| %s | %s | %s | %d | %s | %s | %s |\n' "$preset" "$mesh" "$remat" "$ops" "$t" "$target" "$result"
done
