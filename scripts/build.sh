#!/usr/bin/env bash
# Configures (once) and builds sd with ninja and ccache in ./build.
# Usage: scripts/build.sh [ninja targets...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SD_BUILD_DIR:-$ROOT/build}"
JOBS="${SD_JOBS:-$(nproc)}"
# ccache keys on paths relative to the checkout, so every clone, worktree and
# CI run shares one cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
# The precompiled headers (CMakeLists.txt) are cached only with these.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    ${SD_CMAKE_ARGS:-}
fi
ninja -C "$BUILD" -j "$JOBS" "$@"
