#!/usr/bin/env bash
# Parity with the reference models at their real widths: sd's DiT-S/2 (the
# whole model), one Flux.1-dev double-stream and one single-stream block,
# and one Wan2.1-14B block (each at the released width, heads and FFN, with
# few tokens), against the PyTorch mirrors in test/lit/E2E/Inputs/ (random
# weights under the reference's names), through sdsample --predict on one
# device and on fsdp:2,tensor:2. The CI suite checks the same at small
# widths (test/lit/E2E/sdsample-predict*.test).
#
# Prints one table row per model and mesh: parameters, tokens, the largest
# relative difference from PyTorch (target ≤ 1e-4) and the wall time of the
# --predict call (compile included); exits 1 when a row misses the target,
# 2 on a setup error. About 10 minutes and 10 GiB of memory on 2 cores.
#
# Usage: bench/parity.sh [dit|flux|wan ...]   (default: all three)
# Environment: BUILD (build dir, default build), KEEP=DIR keeps the files,
#   PYTORCH_PYTHON (a Python with torch, default /usr/bin/python3: Debian's
#   python3-torch).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
INPUTS=test/lit/E2E/Inputs
PY="${PYTORCH_PYTHON:-/usr/bin/python3}"
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "parity: $PY cannot import torch (apt-get install python3-torch)" >&2
  exit 2
fi
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(dit flux wan)
for m in "${MODELS[@]}"; do
  case "$m" in dit|flux|wan) ;; *) echo "parity: unknown model '$m' (dit, flux, wan)" >&2; exit 2 ;; esac
done
for tool in sdgen sdsample; do
  if [ ! -x "$BUILD/bin/$tool" ]; then
    echo "parity: no $BUILD/bin/$tool; run scripts/build.sh first" >&2
    exit 2
  fi
done
if [ -n "${KEEP:-}" ]; then TMP="$KEEP"; mkdir -p "$TMP"; else
  TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT; fi

FAILED=0
echo "| model | parameters | tokens | mesh | max relative error | --predict (s) | result |"
echo "|---|---:|---:|---|---:|---:|---|"
run() { # name mirror dir model params tokens
  local name="$1" mirror="$2" dir="$3" model="$4" params="$5" tokens="$6"
  for mesh in data:1 fsdp:2,tensor:2; do
    local start end err verdict
    start=$(date +%s.%N)
    "$BUILD/bin/sdsample" "$model" --weights="$dir/diffusion_pytorch_model.safetensors" \
      --predict="$dir/inputs.safetensors" --output="$dir/out.safetensors" --mesh="$mesh" > "$dir/predict.log"
    end=$(date +%s.%N)
    err=$("$PY" "$INPUTS/$mirror" compare "$dir/out.safetensors" "$dir/expected.safetensors" --tolerance 1 | awk '{print $NF}')
    verdict=$(python3 -c "print('PASS' if float('$err') <= 1e-4 else 'FAIL')")
    [ "$verdict" = PASS ] || FAILED=1
    printf "| %s | %s | %s | %s | %s | %.1f | %s |\n" "$name" "$params" "$tokens" "$mesh" "$err" \
      "$(python3 -c "print($end - $start)")" "$verdict"
  done
}
params_of() { "$BUILD/bin/sdgen" "$@" -o /dev/null 2>&1 | sed -E 's/.*: ([0-9.]+[MBK]) parameters.*/\1/'; }

for m in "${MODELS[@]}"; do
  case "$m" in
  dit)
    GEN=(--preset=dit-s2 --with-denoise)
    "$PY" "$INPUTS/dit_mirror.py" write --out-dir "$TMP/dit" --input-size 32 --patch 2 \
      --in-channels 4 --hidden 384 --depth 12 --heads 6 --num-classes 1000 --batch 4 > /dev/null
    "$BUILD/bin/sdgen" "${GEN[@]}" -o "$TMP/dit.mlir" 2> /dev/null
    run "DiT-S/2 (12 blocks)" dit_mirror.py "$TMP/dit" "$TMP/dit.mlir" "$(params_of "${GEN[@]}")" 256 ;;
  flux)
    # 16×16 latents of 16 channels (64 packed tokens) and 32 text tokens.
    GEN=(--preset=flux-dev --depth=1 --single-depth=1 --height=128 --width=128 --text-length=32 --with-denoise)
    "$PY" "$INPUTS/flux_mirror.py" write --out-dir "$TMP/flux" --height 16 --width 16 \
      --latent-channels 16 --heads 24 --head-dim 128 --layers 1 --single-layers 1 \
      --joint-attention-dim 4096 --pooled-dim 768 --text-len 32 --batch 4 > /dev/null
    "$BUILD/bin/sdgen" "${GEN[@]}" -o "$TMP/flux.mlir" 2> /dev/null
    run "Flux.1-dev (1 double + 1 single block)" flux_mirror.py "$TMP/flux" "$TMP/flux.mlir" "$(params_of "${GEN[@]}")" "64 + 32" ;;
  wan)
    # 2 × 16 × 16 latents of 16 channels (128 tokens) and 32 text tokens.
    GEN=(--preset=wan2.1-14b --depth=1 --frames=5 --height=128 --width=128 --text-length=32 --with-denoise)
    "$PY" "$INPUTS/wan_mirror.py" write --out-dir "$TMP/wan" --frames 2 --height 16 --width 16 \
      --in-channels 16 --heads 40 --head-dim 128 --text-dim 4096 --text-len 32 --freq-dim 256 \
      --ffn-dim 13824 --layers 1 --batch 4 > /dev/null
    "$BUILD/bin/sdgen" "${GEN[@]}" -o "$TMP/wan.mlir" 2> /dev/null
    run "Wan2.1-14B (1 block)" wan_mirror.py "$TMP/wan" "$TMP/wan.mlir" "$(params_of "${GEN[@]}")" "128 + 32" ;;
  esac
done
exit $FAILED
