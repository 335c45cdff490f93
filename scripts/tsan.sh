#!/usr/bin/env bash
# ThreadSanitizer over the runtime: builds the MLIR-free libraries and their
# tests with -fsanitize=thread in ./build-tsan and runs the runtime's tests
# (device threads, memory pools, shared-memory transport and collectives,
# trace recorders), plus the checkpoint tests, whose devices write their
# shards in parallel.
#   scripts/tsan.sh [ctest -R regex]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

"$ROOT/scripts/install-deps.sh"
export SD_BUILD_DIR="${SD_BUILD_DIR:-$ROOT/build-tsan}"
export SD_CMAKE_ARGS="-DSD_ENABLE_TSAN=ON -DSD_PLAIN_ONLY=ON"
# OpenMP's runtime (LLVM's libomp, which the tests load as libgomp.so.1) is
# not instrumented: Archer, its OpenMP tool, tells TSan about OpenMP's
# barriers and tasks, and TSan ignores what happens inside the runtime.
export OMP_TOOL_LIBRARIES="${OMP_TOOL_LIBRARIES:-/usr/lib/llvm-22/lib/libarcher.so}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
"$ROOT/scripts/build.sh" SDRuntimeTests SDCheckpointTests
cd "$SD_BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" -R "${1:-^(Collectives|Kernels|MemoryPool|MeshRuntime|MeshRuntimeApi|Program|Session|Trace|Checkpoint)}"
