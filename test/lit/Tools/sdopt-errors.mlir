// Bad flags: one clear error and exit code 1, never a crash.
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:-1,fsdp:-1 --devices=8 2>&1 | FileCheck %s --check-prefix=TWOFILL
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:4 --per-device-batch=0.3 2>&1 | FileCheck %s --check-prefix=FRACTION
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:4 --batch=4 --per-device-batch=1 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:2 --rules=unknown 2>&1 | FileCheck %s --check-prefix=RULES
// RUN: not sdopt %S/Inputs/small_model.mlir --mesh=data:2 --devices=4 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not sdopt %S/Inputs/does_not_exist.mlir --mesh=data:2 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not sdopt %s 2>&1 | FileCheck %s --check-prefix=PARSE
// A FIFO or /dev/zero is refused unopened; a sparse 8 GiB file by its size.
// RUN: rm -rf %t && mkdir -p %t && mkfifo %t/fifo.mlir && truncate -s 8G %t/huge.mlir
// RUN: not sdopt %t/fifo.mlir 2>&1 | FileCheck %s --check-prefix=FIFO
// RUN: not sdopt /dev/zero 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not sdopt %t/huge.mlir 2>&1 | FileCheck %s --check-prefix=HUGE
// Flags are checked like the config keys they set (sd/Config/RunSpec.h).
// RUN: not sdopt %S/Inputs/small_model.mlir --train --adam-eps=0 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not sdopt %S/Inputs/small_model.mlir --sd-default-pipeline="mesh=data:2 rules=nope" 2>&1 | FileCheck %s --check-prefix=PIPELINE-RULES
// The exit code is exactly 1.
// RUN: %python -c "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:], capture_output=True).returncode != 1)" sdopt %S/Inputs/small_model.mlir --mesh=data:0

// TWOFILL: error: mesh axes "data" and "fsdp" are both -1; at most one ICI axis may be -1
// FRACTION: error: --per-device-batch=0.3 × 4 devices = 1.2 is not a whole, positive global batch
// BOTH: error: give --batch or --per-device-batch, not both
// RULES: error: unknown logical axis rules preset "unknown"
// DEVICES: error: mesh data:2 has 2 devices but --devices=4
// FIFO: error: cannot read input file "{{.*}}fifo.mlir": not a regular file
// ZERO: error: cannot read input file "/dev/zero": not a regular file
// HUGE: error: cannot read input file "{{.*}}huge.mlir": 8589934592 bytes is above the limit of 1073741824
// NOFILE: error: cannot read input file "{{.*}}does_not_exist.mlir": No such file or directory
// PARSE: error: custom op 'sd.not_an_op' is unknown
// EPS: error: --adam-eps must be positive, not 0
// PIPELINE-RULES: {{^}}error: unknown logical axis rules preset "nope"

func.func @f() {
  sd.not_an_op
  return
}
