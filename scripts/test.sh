#!/usr/bin/env bash
# Install what is missing, build everything and run every test: GoogleTest
# suites and the lit suite, both through ctest.
#   scripts/test.sh              Release build in ./build, every test
#   scripts/test.sh --sanitize   ASan + UBSan build in ./build-asan, with
#                                clang (its instrumented builds compile in
#                                about half of g++'s time): every GoogleTest
#                                case, the fast lit directories and the
#                                end-to-end runs labelled e2e-smoke
#                                (test/CMakeLists.txt lists them)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

"$ROOT/scripts/install-deps.sh"
if [ "${1:-}" = "--sanitize" ]; then
  export SD_BUILD_DIR="${SD_BUILD_DIR:-$ROOT/build-asan}"
  # ASan + UBSan (the runtime's memory pools do not cache released buffers
  # in an ASan build, so ASan sees a use after release), compiled by clang,
  # whose warnings differ from g++'s: the Release build's warnings fail.
  export SD_CMAKE_ARGS="-DSD_ENABLE_SANITIZERS=ON -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_COMPILER=clang-22 -DSD_WERROR=OFF"
  # libMLIR.so is not instrumented, so the allocator poisoning that LLVM's
  # headers compile into our code would give false reports: ignore it.
  export ASAN_OPTIONS="detect_leaks=0:allow_user_poisoning=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
fi
BUILD="${SD_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh"
cd "$BUILD"
LABELS=()
if [ "${1:-}" = "--sanitize" ]; then
  LABELS=(-L '^(unit|lit|e2e-smoke)$')
fi
ctest --output-on-failure -j "$(nproc)" "${LABELS[@]}"
