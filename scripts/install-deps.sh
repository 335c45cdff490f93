#!/usr/bin/env bash
# Installs the Debian packages sd builds and tests with. Idempotent and
# non-interactive: packages already present are skipped without touching apt.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ python3
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libomp-22-dev
  clang-22 libclang-rt-22-dev
  libabsl-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libopenblas0-openmp libdnnl-dev libopenmpi-dev openmpi-bin libzstd-dev zlib1g-dev libpng-dev libjpeg-dev python3-sklearn
  # sdopt's allocator (CMakeLists.txt: SD_USE_JEMALLOC).
  libjemalloc-dev
  # The PyTorch mirrors of the reference models that parity tests compare
  # with (test/lit/E2E/Inputs/dit_mirror.py), and the bench baselines.
  python3-torch
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
