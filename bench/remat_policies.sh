#!/usr/bin/env bash
# Device peak, host memory and recompute FLOPs of the dit_s2 training step
# (batch 8) under each remat policy, from sdopt's cost model.
#   bash bench/remat_policies.sh [MODEL] [extra sdopt flags, e.g. --mesh=fsdp:8]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sdopt="${SDOPT:-$root/build/bin/sdopt}"
model="${1:-$root/models/dit_s2.mlir}"
shift || true
printf '%-30s %14s %14s %12s %14s %16s\n' policy device_peak activations host_peak host_moves recompute_flops
for policy in NONE MATMUL_WITHOUT_BATCH FULL OFFLOAD_MATMUL_WITHOUT_BATCH HIDDEN_STATE_WITH_OFFLOAD; do
  "$sdopt" "$model" --train --batch=8 --remat="$policy" "$@" --report=json |
    python3 -c '
import json, sys
r = json.load(sys.stdin)["per_device"]
mb = lambda b: "%.1f MB" % (b / 1e6)
print("%-30s %14s %14s %12s %14s %16s" % (sys.argv[1], mb(r["total_bytes"]),
      mb(r["activations"]["peak_bytes"]), mb(r["host"]["peak_bytes"]),
      mb(r["host"]["transfer_bytes"]), "%.1f GFLOP" % (r["recompute_flops"] / 1e9)))
' "$policy"
done
