#!/usr/bin/env bash
# The proof that sd trains a model that learned something:
# builds scikit-learn's handwritten digits as an sd data set (sddata), trains
# models/dit_digits.mlir on data:2 from configs/dit_digits.yml (fresh noise,
# class-label dropout, EMA, the held-out loss every eval_every steps), then
# samples SAMPLES digits of each class with classifier-free guidance from the
# EMA weights (sdsample, on the same mesh), and classifies them with an SVC
# fitted on the real digits (bench/classify_digits.py).
#
# Prints the machine, the training time, the held-out loss curve, the
# accuracy per class and a PASS/FAIL line against the targets:
#   training takes at most 10 minutes on this 2-core machine
#   at least 80% of the samples are classified as the class asked for
# and writes the sample grid to OUT/samples.png (docs/digits_samples.png is
# one such grid, committed). Exits 1 if a target fails, 2 on a setup error.
#
# Usage: bench/digits.sh [--quick] [--out DIR]
#   --quick    200 steps and 10 samples per class: a smoke test, targets
#              not enforced
#   --out DIR  keep the data set, checkpoints, metrics and samples there
#              (default: a temp dir)
# Environment: BUILD (build dir, default build), STEPS (default: the
#   config's max_train_steps), SAMPLES (per class, default 100),
#   GUIDANCE (default: the config's guidance_scale), SAMPLER (default ddim),
#   DTYPE (default float32; bfloat16 trains and samples with bf16 weights
#   and activations from f32 master weights).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
QUICK=0
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT="$2"; shift ;;
    *) echo "usage: bench/digits.sh [--quick] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
for tool in sddata sdrun sdsample; do
  if [ ! -x "$BUILD/bin/$tool" ]; then
    echo "digits.sh: $BUILD/bin/$tool is missing (scripts/build.sh)" >&2
    exit 2
  fi
done
if ! /usr/bin/python3 -c "import sklearn, numpy" 2>/dev/null; then
  echo "digits.sh: /usr/bin/python3 has no scikit-learn (scripts/install-deps.sh installs python3-sklearn)" >&2
  exit 2
fi
if [ -z "$OUT" ]; then
  OUT="$(mktemp -d)"
  trap 'rm -rf "$OUT"' EXIT
fi
mkdir -p "$OUT"
SAMPLES="${SAMPLES:-100}"
SAMPLER="${SAMPLER:-ddim}"
STEPS_ARG=()
if [ "$QUICK" = 1 ]; then
  STEPS_ARG=(max_train_steps=200 eval_every=50)
  SAMPLES=10
elif [ -n "${STEPS:-}" ]; then
  STEPS_ARG=("max_train_steps=$STEPS")
fi
DTYPE="${DTYPE:-float32}"
DTYPE_ARG=(--weights-dtype="$DTYPE" --activations-dtype="$DTYPE")
GUIDANCE_ARG=()
if [ -n "${GUIDANCE:-}" ]; then
  GUIDANCE_ARG=("--guidance-scale=$GUIDANCE")
fi

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); weights and activations: $DTYPE"

rm -rf "$OUT/digits" "$OUT/ckpt" "$OUT/run"
"$BUILD/bin/sddata" digits "$OUT/digits"

start=$(date +%s.%N)
"$BUILD/bin/sdrun" models/dit_digits.mlir --config=configs/dit_digits.yml \
  "${STEPS_ARG[@]}" "${DTYPE_ARG[@]}" train_data_dir="$OUT/digits" output_dir="$OUT" \
  run_name=run checkpoint_every=-1 --checkpoint-dir="$OUT/ckpt" \
  --export-ema="$OUT/ema.safetensors" --metrics="$OUT/train.jsonl" \
  > "$OUT/train.log"
end=$(date +%s.%N)
train_seconds=$(/usr/bin/python3 -c "print(f'{$end - $start:.0f}')")
grep -E "^(sdrun|data|held-out loss every|done|per device|metrics)" "$OUT/train.log" || true

echo
echo "held-out loss (fixed noise, the data set's 180 held-out digits):"
echo "| step | training loss (mean of the 50 steps before) | held-out loss |"
echo "|---:|---:|---:|"
/usr/bin/python3 - "$OUT/train.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for i, row in enumerate(rows):
    if "heldout_loss" in row:
        window = [r["loss"] for r in rows[max(0, i - 49):i + 1]]
        print(f"| {row['step']} | {sum(window) / len(window):.4f} | "
              f"{row['heldout_loss']:.4f} |")
PY

"$BUILD/bin/sdsample" models/dit_digits.mlir --config=configs/dit_digits.yml \
  --weights="$OUT/ema.safetensors" --sampler="$SAMPLER" "${GUIDANCE_ARG[@]}" "${DTYPE_ARG[@]}" \
  --samples-per-class="$SAMPLES" --grid="$OUT/samples.png" \
  --output="$OUT/samples.safetensors" > "$OUT/sample.log"
grep -v "^compil\|^  \[" "$OUT/sample.log" || true

echo
/usr/bin/python3 bench/classify_digits.py "$OUT/samples.safetensors" | tee "$OUT/classify.txt"
accuracy=$(awk '/^accuracy/ {print $2}' "$OUT/classify.txt")

echo
echo "| target | measured | result |"
echo "|---|---:|---|"
status=0
verdict() { # measured ok
  if [ "$QUICK" = 1 ]; then echo "not enforced (--quick)";
  elif [ "$1" = 1 ]; then echo PASS; else echo FAIL; status=1; fi
}
ok=$(/usr/bin/python3 -c "print(int($train_seconds <= 600))")
echo "| training at most 10 minutes | ${train_seconds} s | $(verdict "$ok") |"
ok=$(/usr/bin/python3 -c "print(int($accuracy >= 0.8))")
echo "| samples classified as asked >= 80% | $(/usr/bin/python3 -c "print(f'{100 * $accuracy:.1f}%')") | $(verdict "$ok") |"
echo "grid: $OUT/samples.png"
exit $status
