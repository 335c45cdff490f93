// RUN: sdopt %s -split-input-file -sd-bucket-collectives | FileCheck %s
// RUN: sdopt %s -split-input-file -sd-bucket-collectives="bucket-bytes=3000" | FileCheck %s --check-prefix=SMALL
// RUN: sdopt %s -split-input-file -sd-bucket-collectives="bucket-bytes=0" | FileCheck %s --check-prefix=OFF
// RUN: not sdopt %s -split-input-file -sd-bucket-collectives="bucket-bytes=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// Each gradient's reduction moves down to the next one, and the updates
// that read them wait until the bucket closes (at the return here): the
// reductions run back to back. The work that does not read them stays.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[D2:.*]] = sd.reduce_sum
// CHECK-NEXT: %[[D3:.*]] = sd.reduce_sum
// CHECK-NEXT: %[[G1:.*]] = sd.all_reduce %{{.*}} @mesh axes = ["data"]
// CHECK-NEXT: %[[G2:.*]] = sd.all_reduce %[[D2]] @mesh axes = ["data"]
// CHECK-NEXT: %[[G3:.*]] = sd.all_reduce %[[D3]] @mesh axes = ["data"]
// CHECK-NEXT: sd.sub %{{.*}}, %[[G1]]
// CHECK-NEXT: sd.sub %{{.*}}, %[[G2]]
// CHECK-NEXT: sd.sub %{{.*}}, %[[G3]]
// CHECK-NEXT: return
// SMALL-LABEL: func.func @bucket
// SMALL: %[[D2:.*]] = sd.reduce_sum
// SMALL-NEXT: %[[G1:.*]] = sd.all_reduce %{{.*}} @mesh axes = ["data"]
// SMALL-NEXT: %[[G2:.*]] = sd.all_reduce %[[D2]] @mesh axes = ["data"]
// SMALL-NEXT: sd.sub %{{.*}}, %[[G1]]
// SMALL-NEXT: sd.sub %{{.*}}, %[[G2]]
// SMALL-NEXT: %[[D3:.*]] = sd.reduce_sum
// SMALL-NEXT: %[[G3:.*]] = sd.all_reduce %[[D3]] @mesh axes = ["data"]
// SMALL-NEXT: sd.sub %{{.*}}, %[[G3]]
// SMALL-NEXT: return
// OFF-LABEL: func.func @bucket
// OFF: sd.all_reduce
// OFF-NEXT: sd.sub
// OFF-NEXT: sd.reduce_sum
// OFF-NEXT: sd.all_reduce
// NEGATIVE: error: sd-bucket-collectives: bucket-bytes must be at least 0, not -1
sd.mesh @mesh = <["data"=2]>
func.func @bucket(%d1: tensor<384xf32>, %x: tensor<4x384xf32>, %w1: tensor<384xf32>,
                  %w2: tensor<384xf32>, %w3: tensor<384xf32>)
    -> (tensor<384xf32>, tensor<384xf32>, tensor<384xf32>) {
  %g1 = sd.all_reduce %d1 @mesh axes = ["data"] : tensor<384xf32>
  %p1 = sd.sub %w1, %g1 : tensor<384xf32>
  %d2 = sd.reduce_sum %x dims = [0] : (tensor<4x384xf32>) -> tensor<384xf32>
  %g2 = sd.all_reduce %d2 @mesh axes = ["data"] : tensor<384xf32>
  %p2 = sd.sub %w2, %g2 : tensor<384xf32>
  %d3 = sd.reduce_sum %x dims = [0] : (tensor<4x384xf32>) -> tensor<384xf32>
  %g3 = sd.all_reduce %d3 @mesh axes = ["data"] : tensor<384xf32>
  %p3 = sd.sub %w3, %g3 : tensor<384xf32>
  return %p1, %p2, %p3 : tensor<384xf32>, tensor<384xf32>, tensor<384xf32>
}

// -----

// A reduction that reads the bucket's results (through an op waiting for
// them) closes the bucket before it and opens the next one; a reduction
// over other axes keeps its place.
// CHECK-LABEL: func.func @dependent
// CHECK: %[[OTHER:.*]] = sd.all_reduce %{{.*}} @mesh axes = ["tensor"]
// CHECK-NEXT: %[[G1:.*]] = sd.all_reduce %{{.*}} @mesh axes = ["data"]
// CHECK-NEXT: %[[G2:.*]] = sd.all_reduce %{{.*}} @mesh axes = ["data"]
// CHECK-NEXT: %[[M:.*]] = sd.mul %[[G1]], %[[G2]]
// CHECK-NEXT: %[[G3:.*]] = sd.all_reduce %[[M]] @mesh axes = ["data"]
// CHECK-NEXT: return %[[G3]], %[[OTHER]]
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @dependent(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>)
    -> (tensor<8xf32>, tensor<8xf32>) {
  %g1 = sd.all_reduce %a @mesh axes = ["data"] : tensor<8xf32>
  %other = sd.all_reduce %c @mesh axes = ["tensor"] : tensor<8xf32>
  %g2 = sd.all_reduce %b @mesh axes = ["data"] : tensor<8xf32>
  %m = sd.mul %g1, %g2 : tensor<8xf32>
  %g3 = sd.all_reduce %m @mesh axes = ["data"] : tensor<8xf32>
  return %g3, %other : tensor<8xf32>, tensor<8xf32>
}

// -----

// Reduce-scatters bucket among themselves, apart from all-reduces; an op
// that is not pure (a permute's start) closes the open bucket before it,
// and nothing moves across it.
// CHECK-LABEL: func.func @scatter
// CHECK: %[[R:.*]] = sd.all_reduce
// CHECK-NEXT: %[[S1:.*]] = sd.reduce_scatter %{{.*}} @mesh [{"fsdp"}]
// CHECK-NEXT: %[[S2:.*]] = sd.reduce_scatter %{{.*}} @mesh [{"fsdp"}]
// CHECK-NEXT: sd.exp %[[S1]]
// CHECK-NEXT: sd.exp %[[S2]]
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute_start
// CHECK-NEXT: %[[S3:.*]] = sd.reduce_scatter
// CHECK-NEXT: sd.collective_permute_done %[[P]]
sd.mesh @mesh = <["fsdp"=2]>
func.func @scatter(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) {
  %s1 = sd.reduce_scatter %a @mesh [{"fsdp"}] : (tensor<8xf32>) -> tensor<4xf32>
  %e1 = sd.exp %s1 : tensor<4xf32>
  %r = sd.all_reduce %c @mesh axes = ["fsdp"] : tensor<8xf32>
  %s2 = sd.reduce_scatter %b @mesh [{"fsdp"}] : (tensor<8xf32>) -> tensor<4xf32>
  %e2 = sd.exp %s2 : tensor<4xf32>
  %p = sd.collective_permute_start %c @mesh axes = ["fsdp"] pairs = [[0, 1], [1, 0]] : tensor<8xf32>
  %s3 = sd.reduce_scatter %c @mesh [{"fsdp"}] : (tensor<8xf32>) -> tensor<4xf32>
  %d = sd.collective_permute_done %p, %c : tensor<8xf32>
  return %e1, %e2, %r, %s3, %d : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>
}
