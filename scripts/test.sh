#!/usr/bin/env bash
# Install what is missing, build everything and run every test: GoogleTest
# suites and the lit suite, both through ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SD_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
