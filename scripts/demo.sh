#!/usr/bin/env bash
# The main job: install what is missing, build, then show sd at work on the
# bundled DiT-S/2 model — sdgen writes a program, sdopt materializes a mesh
# and shards every argument with MaxDiffusion's logical axis rules.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SD_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh" sdopt sdgen

echo "== sdgen --preset=dit-tiny (summary on stderr) =="
"$BUILD/bin/sdgen" --preset=dit-tiny > /dev/null
echo
echo "== sdopt models/dit_s2.mlir --mesh=data:2,fsdp:4 (arguments and their shardings) =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:4 \
  -o "$BUILD/dit_s2.sharded.mlir"
head -n 3 "$BUILD/dit_s2.sharded.mlir" | cut -c1-300
echo "   ... (full program in $BUILD/dit_s2.sharded.mlir)"
grep -o 'sd.role = #sd.param<"[^"]*"[^>]*>, sd.sharding = #sd.sharding<[^>]*>' \
  "$BUILD/dit_s2.sharded.mlir" | head -n 12 || true
echo
echo "== sdopt on a bad mesh: one clear error, exit code 1 =="
if "$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:-1,tensor:-1 \
     --devices=8 > /dev/null; then
  echo "unexpected success"; exit 1
else
  echo "(exit code $?)"
fi
