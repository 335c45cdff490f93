#!/usr/bin/env bash
# The main job: install what is missing, build, then show sd at work on the
# bundled DiT-S/2 model — sdgen writes a program; sdopt materializes a mesh,
# shards every argument with MaxDiffusion's logical axis rules, propagates,
# partitions into the per-device program and reports its cost; sdrun trains
# it on a mesh of devices, from a config file, with checkpoints, a resume and
# a trace.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SD_BUILD_DIR:-$ROOT/build}"

"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh" sdopt sdgen sdrun

echo "== sdgen --preset=dit-tiny (summary on stderr) =="
"$BUILD/bin/sdgen" --preset=dit-tiny > /dev/null
echo
echo "== sdopt models/dit_s2.mlir --mesh=data:2,fsdp:4 --stage=rules (each argument's sharding) =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:4 --stage=rules \
  -o "$BUILD/dit_s2.sharded.mlir"
/usr/bin/python3 "$ROOT/scripts/summarize_shardings.py" "$BUILD/dit_s2.sharded.mlir" 16
echo
echo "== sdopt models/dit_s2.mlir --mesh=data:2,fsdp:4: the per-device program =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:4 \
  -o "$BUILD/dit_s2.partitioned.mlir"
grep -m 6 -E 'sd\.(all_gather|all_reduce|reduce_scatter|all_to_all)' \
  "$BUILD/dit_s2.partitioned.mlir" | cut -c1-150
echo "   ... (the whole program: $BUILD/dit_s2.partitioned.mlir)"
echo
echo "== sdopt models/dit_s2.mlir --mesh=data:2,fsdp:4 --report =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:4 --report
echo
echo "== sdopt models/dit_s2.mlir --train --mesh=data:2,fsdp:4 --remat=FULL --report: the training step =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --train --mesh=data:2,fsdp:4 --remat=FULL --report
echo
echo "== sdopt on a bad mesh: one clear error, exit code 1 =="
if "$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --mesh=data:2,fsdp:-1,tensor:-1 \
     --devices=8 > /dev/null; then
  echo "unexpected success"; exit 1
else
  echo "(exit code $?)"
fi
echo
echo "== sdopt models/dit_s2.mlir --train --mesh=data:2 --emit=openmp: what a device runs (excerpt) =="
"$BUILD/bin/sdopt" "$ROOT/models/dit_s2.mlir" --train --batch=8 --mesh=data:2 \
  --emit=openmp -o "$BUILD/dit_s2.data2.cpp"
grep -m 1 -B 1 -A 14 '^SD_LOCAL void k[0-9]*(.*{$' "$BUILD/dit_s2.data2.cpp" | cut -c1-120
echo "   ... ($(grep -c '^SD_LOCAL void k.*{$' "$BUILD/dit_s2.data2.cpp") distinct kernels in $(grep -c '^//--- ' "$BUILD/dit_s2.data2.cpp") files in $BUILD/dit_s2.data2.cpp)"
echo
echo "== sdrun models/dit_tiny.mlir --mesh=data:2,fsdp:2 --steps=3 --verify =="
"$BUILD/bin/sdrun" "$ROOT/models/dit_tiny.mlir" --mesh=data:2,fsdp:2 --steps=3 --verify
echo
RUN_DIR="$BUILD/demo-run"
rm -rf "$RUN_DIR"
# No warm-up: its length is a fraction of max_train_steps, which the two runs
# set differently (MaxDiffusion's schedule does the same).
echo "== sdrun models/dit_s2.mlir --config=configs/dit_s2.yml max_train_steps=4 checkpoint_every=2 warmup_steps_fraction=0: DiT-S/2 on two devices from a config file, with checkpoints =="
"$BUILD/bin/sdrun" "$ROOT/models/dit_s2.mlir" --config="$ROOT/configs/dit_s2.yml" \
  max_train_steps=4 checkpoint_every=2 warmup_steps_fraction=0 output_dir="$RUN_DIR" \
  --checkpoint-dir="$RUN_DIR/ckpt"
echo
echo "== ... max_train_steps=6 --resume --trace: continued from the last checkpoint =="
"$BUILD/bin/sdrun" "$ROOT/models/dit_s2.mlir" --config="$ROOT/configs/dit_s2.yml" \
  max_train_steps=6 checkpoint_every=2 warmup_steps_fraction=0 output_dir="$RUN_DIR" \
  --checkpoint-dir="$RUN_DIR/ckpt" --resume --trace="$RUN_DIR/trace.json"
