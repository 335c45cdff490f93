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
echo "== sdopt models/dit_s2.mlir --mesh=data:2,fsdp:4 (each argument's sharding) =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:4 \
  -o "$BUILD/dit_s2.sharded.mlir"
/usr/bin/python3 "$ROOT/scripts/summarize_shardings.py" "$BUILD/dit_s2.sharded.mlir" 16
echo "   (the whole program: $BUILD/dit_s2.sharded.mlir)"
echo
echo "== sdopt on a bad mesh: one clear error, exit code 1 =="
if "$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:-1,tensor:-1 \
     --devices=8 > /dev/null; then
  echo "unexpected success"; exit 1
else
  echo "(exit code $?)"
fi
