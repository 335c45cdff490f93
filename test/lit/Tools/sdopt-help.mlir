// --help lists sd's options and hides LLVM's and mlir-opt's, which
// --help-hidden still lists; hidden options are accepted.
// RUN: sdopt --help | FileCheck %s
// RUN: sdopt --help-hidden | FileCheck %s --check-prefix=HIDDEN
// RUN: sdopt %s --sd-specialize-batch=batch=2 --split-input-file | FileCheck %s --check-prefix=ACCEPTED

// CHECK: sd optimizer driver
// CHECK: sd mesh and batch options:
// CHECK: --mesh=<string>
// CHECK: sdopt options:
// CHECK: --train
// CHECK-NOT: --color
// CHECK-NOT: --sd-partition
// CHECK-NOT: --split-input-file

// HIDDEN-DAG: --color
// HIDDEN-DAG: --sd-partition
// HIDDEN-DAG: --split-input-file
// HIDDEN-DAG: --mesh=<string>

// ACCEPTED: func.func @f(%{{.*}}: tensor<2x4xf32>)
func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {sd.default_batch = 8 : i64} {
  return %x : tensor<?x4xf32>
}
