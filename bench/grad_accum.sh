#!/usr/bin/env bash
# Gradient accumulation at a real size: DiT-S/2 (models/dit_s2.mlir) on
# --mesh=data:2, one optimizer step on a global batch of 4b against K = 4
# microbatches of b (--grad-accum=4), same seed, SD_STEPS steps each.
#
# Targets (issue 27): the same loss at every step to 1e-5 relative (f32),
# and the accumulating step's peak activation memory at most 35% of the
# large batch's: sdopt --report's "activations (peak)" per device of each
# training step (the values live at the peak beside parameters, optimizer
# state and inputs) less its "accumulator" row, the f32 sums of the
# microbatches' gradients live there (gradient memory, one parameter-sized
# buffer, which PyTorch and optax count apart from activations too); both
# are printed, with sdrun's measured peak device memory beside them (and
# that peak less the arguments and the accumulator: the measured
# activations).
# Prints a Markdown table; exits 1 when a target fails, 2 on a usage or
# setup error.
#
# Usage: bench/grad_accum.sh [--out DIR]
# Environment: BUILD (default build), SDRUN, SDOPT, MICRO (b, default 4),
#   SD_STEPS (default 3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SDRUN="${SDRUN:-$BUILD/bin/sdrun}"
SDOPT="${SDOPT:-$BUILD/bin/sdopt}"
MICRO="${MICRO:-4}"
SD_STEPS="${SD_STEPS:-3}"

out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift ;;
    --out=*) out="${1#--out=}" ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "grad_accum.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "grad_accum.sh: $*" >&2; exit 2; }
[[ -x "$SDRUN" ]] || die "$SDRUN not found: build it (scripts/build.sh sdrun) or set SDRUN"
[[ "$MICRO" -ge 2 && $((MICRO % 2)) -eq 0 ]] || die "MICRO must be even (data:2)"
if [[ -z "$out" ]]; then
  out="$(mktemp -d "${TMPDIR:-/tmp}/sd-grad-accum.XXXXXX")"
else
  mkdir -p "$out"
fi
echo "logs: $out" >&2
big=$((4 * MICRO))

# run NAME ARGS...: sdrun on DiT-S/2, its metrics and log in $out.
run() {
  local name="$1"
  shift
  "$SDRUN" models/dit_s2.mlir --mesh=data:2 --steps="$SD_STEPS" --seed=0 \
    --cache-dir="$out/cache-$name" --metrics="$out/$name.jsonl" "$@" \
    >"$out/$name.log" 2>&1 || die "$name failed; see $out/$name.log"
}
run large --batch="$big"
run accum --batch="$big" --grad-accum=4
[[ -x "$SDOPT" ]] || die "$SDOPT not found: build it (scripts/build.sh sdopt) or set SDOPT"
"$SDOPT" models/dit_s2.mlir --train --mesh=data:2 --batch="$big" --report \
  >"$out/large.report" 2>&1 || die "sdopt failed; see $out/large.report"
"$SDOPT" models/dit_s2.mlir --train --mesh=data:2 --batch="$big" \
  --grad-accum=4 --report >"$out/accum.report" 2>&1 ||
  die "sdopt failed; see $out/accum.report"

python3 - "$out" "$MICRO" "$big" <<'EOF'
import json, re, sys
out, micro, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def losses(name):
    rows = [json.loads(l) for l in open("%s/%s.jsonl" % (out, name)) if l.strip()]
    return {int(r["step"]): float(r["loss"]) for r in rows}

UNITS = {"B": 1e-6, "kB": 1e-3, "MB": 1, "GB": 1e3, "KiB": 1.024e-3,
         "MiB": 1.048576, "GiB": 1073.741824}

def size(pattern, text):
    m = re.search(pattern + r"\s+([0-9.]+) (B|kB|MB|GB|KiB|MiB|GiB)", text)
    return float(m.group(1)) * UNITS[m.group(2)]

def memory(name):
    report = open("%s/%s.report" % (out, name)).read()
    log = open("%s/%s.log" % (out, name)).read()
    # The accumulator row is there only with microbatches.
    summed = size("accumulator", report) if "accumulator" in report else 0.0
    # What the pools hold beside the arguments: the measured activations.
    arguments = sum(size(row, report) for row in
                    ("parameters", "optimizer state", "inputs"))
    return (size(r"activations \(peak\)", report), summed,
            size("peak device memory", log), arguments)

large, accum = losses("large"), losses("accum")
worst = max(abs(large[s] - accum[s]) / abs(large[s]) for s in large)
(act_l, sum_l, peak_l, args_l), (act_a, sum_a, peak_a, args_a) = \
    memory("large"), memory("accum")
measured_l, measured_a = peak_l - args_l, peak_a - args_a - sum_a
alone_l, alone_a = act_l - sum_l, act_a - sum_a
loss_ok = worst <= 1e-5
mem_ok = alone_a <= 0.35 * alone_l
print("# Gradient accumulation: DiT-S/2, data:2")
print()
print("| measure | batch %d, one step | 4 microbatches of %d | ratio | target | result |" % (big, micro))
print("|---|---:|---:|---:|---|---|")
for s in sorted(large):
    print("| loss, step %d | %.7f | %.7f | %.2g rel. | | |" % (s, large[s], accum[s], abs(large[s] - accum[s]) / abs(large[s])))
print("| largest loss difference | | | %.2g | <= 1e-5 | %s |" % (worst, "PASS" if loss_ok else "FAIL"))
print("| activations at the peak (sdopt --report, per device, less the accumulator) | %.1f MB | %.1f MB | %.1f%% | <= 35%% | %s |"
      % (alone_l, alone_a, 100 * alone_a / alone_l, "PASS" if mem_ok else "FAIL"))
print("| the f32 gradient accumulator at the peak (report's accumulator row) | %.1f MB | %.1f MB | | | |"
      % (sum_l, sum_a))
print("| activations at the peak with the accumulator (report's activations row) | %.1f MB | %.1f MB | %.1f%% | | |"
      % (act_l, act_a, 100 * act_a / act_l))
print("| peak device memory (sdrun, measured, per device) | %.1f MB | %.1f MB | %.1f%% | | |"
      % (peak_l, peak_a, 100 * peak_a / peak_l))
print("| the same less parameters, optimizer state, inputs and accumulator | %.1f MB | %.1f MB | %.1f%% | | |"
      % (measured_l, measured_a, 100 * measured_a / measured_l))
sys.exit(0 if loss_ok and mem_ok else 1)
EOF
