#!/usr/bin/env bash
# Builds sd's libFuzzer targets with clang-22 in ./build-fuzz and runs each
# on a copy of its seed corpus (docs/fuzzing.md).
#
# Usage: scripts/fuzz.sh [--ci] [--no-mlir] [SECONDS-PER-TARGET] [TARGET...]
#   SECONDS-PER-TARGET  how long each target runs (default 600)
#   --ci                10 s per target (the CI run)
#   --no-mlir           skip sd-fuzz-mlir (its build compiles the compiler
#                       with clang and sanitizers)
#   TARGET...           only these (e.g. sd-fuzz-mesh)
# First every input under fuzz/regressions/<target>/ is replayed (each once
# made a target crash); then the target fuzzes. Fails when a target crashes,
# leaks, hangs (-timeout) or trips a sanitizer; the input that did it is left
# in build-fuzz/fuzz/artifacts/<target>/. New corpus entries stay in
# build-fuzz/fuzz/corpus/<target>/ (copy the useful ones into fuzz/corpus/).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SD_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"

SECONDS_PER_TARGET=600
MLIR=1
TARGETS=()
for arg in "$@"; do
  case "$arg" in
    --ci) SECONDS_PER_TARGET=10 ;;
    --no-mlir) MLIR=0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    [0-9]*) SECONDS_PER_TARGET="$arg" ;;
    sd-fuzz-*) TARGETS+=("$arg") ;;
    *) echo "fuzz.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(sd-fuzz-mesh sd-fuzz-config sd-fuzz-safetensors sd-fuzz-manifest)
  [ "$MLIR" = 1 ] && TARGETS+=(sd-fuzz-mlir)
fi

# build.sh configures (once) and builds with ninja and ccache; clang's
# warnings differ from g++'s, so they do not fail this build.
SD_BUILD_DIR="$BUILD" SD_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-22 \
  -DCMAKE_C_COMPILER=clang-22 -DSD_ENABLE_FUZZERS=ON -DSD_WERROR=OFF \
  -DBUILD_TESTING=OFF" "$ROOT/scripts/build.sh" "${TARGETS[@]}"

# The largest input each target mutates (a seed model is 17 kB); regression
# inputs are replayed whole.
max_len_for() {
  case "$1" in
    mesh) echo 256 ;;
    mlir) echo 32768 ;;
    *) echo 4096 ;;
  esac
}

status=0
for target in "${TARGETS[@]}"; do
  name="${target#sd-fuzz-}"
  bin="$BUILD/fuzz/$target"
  corpus="$BUILD/fuzz/corpus/$name"
  artifacts="$BUILD/fuzz/artifacts/$name/"
  mkdir -p "$corpus" "$artifacts"
  cp -r "$ROOT/fuzz/corpus/$name/." "$corpus/"
  opts=(-timeout=20 -rss_limit_mb=4096)
  [ -f "$ROOT/fuzz/dict/$name.dict" ] && opts+=("-dict=$ROOT/fuzz/dict/$name.dict")
  regressions=("$ROOT/fuzz/regressions/$name"/*)
  if [ -e "${regressions[0]}" ]; then
    echo "== $target: replaying ${#regressions[@]} regression input(s)"
    if ! "$bin" "${opts[@]}" -runs=1 "${regressions[@]}" \
        >"$BUILD/fuzz/$name-regressions.log" 2>&1; then
      echo "FAIL: $target crashes on a regression input" \
           "(see $BUILD/fuzz/$name-regressions.log)" >&2
      status=1
      continue
    fi
  fi
  echo "== $target: fuzzing for ${SECONDS_PER_TARGET}s"
  if ! "$bin" "${opts[@]}" -max_len="$(max_len_for "$name")" \
      -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
      -artifact_prefix="$artifacts" "$corpus" >"$BUILD/fuzz/$name.log" 2>&1; then
    echo "FAIL: $target found a crash; input in $artifacts" \
         "(log: $BUILD/fuzz/$name.log)" >&2
    tail -n 40 "$BUILD/fuzz/$name.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' \
      "$BUILD/fuzz/$name.log" | tail -n 2 || true
  fi
done
exit $status
