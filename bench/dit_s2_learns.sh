#!/usr/bin/env bash
# DiT-S/2 (33M parameters, models/dit_s2.mlir) learns at its real size:
# with fresh noise and timesteps at every step (sd/Data/Batches.h), 20 AdamW
# steps at learning rate 1e-3 on a data:2 mesh, batch 8, bring the mean loss
# of the last 5 steps at least 5% below that of the first 5 (one step's loss
# varies by about 2% with its noise). The CI suite checks the same property
# on small models (test/lit/E2E/sdrun-data.test: dit_digits on its data).
#
# Prints the losses, the two means, their ratio and PASS/FAIL; exits 1 when
# the target fails, 2 on a setup error. About 2 minutes on 2 cores.
#
# Usage: bench/dit_s2_learns.sh
# Environment: BUILD (build dir, default build), STEPS (default 20).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
STEPS="${STEPS:-20}"
if [ $# -gt 0 ]; then
  echo "usage: bench/dit_s2_learns.sh (no arguments; see the comment)" >&2
  exit 2
fi
if [ ! -x "$BUILD/bin/sdrun" ]; then
  echo "dit_s2_learns: no $BUILD/bin/sdrun; run scripts/build.sh first" >&2
  exit 2
fi
if [ "$STEPS" -lt 10 ]; then
  echo "dit_s2_learns: STEPS=$STEPS; give at least 10 (two windows of 5)" >&2
  exit 2
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$BUILD/bin/sdrun" models/dit_s2.mlir --mesh=data:2 --batch=8 \
  --steps="$STEPS" --lr=1e-3 --metrics="$TMP/metrics.jsonl" > "$TMP/run.log"
grep -E "^sdrun: |^done" "$TMP/run.log"
python3 - "$TMP/metrics.jsonl" <<'PY'
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
print("| step | loss |")
print("|---:|---:|")
for step, loss in enumerate(losses, 1):
    print(f"| {step} | {loss:.4f} |")
ratio = last / first
verdict = "PASS" if ratio < 0.95 else "FAIL"
print(f"\nmean of the first 5 steps {first:.4f}, of the last 5 {last:.4f}: "
      f"ratio {ratio:.3f} (target < 0.95) {verdict}")
sys.exit(0 if verdict == "PASS" else 1)
PY
