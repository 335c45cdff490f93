// RUN: sdopt %s -split-input-file -sd-async-collectives | FileCheck %s

// A permute becomes a start at its place and a done before its first
// reader, so the work in between overlaps the transfer.
// CHECK-LABEL: func.func @overlap
// CHECK-SAME: (%[[K:.*]]: tensor<4x8xf32>, %[[Q:.*]]: tensor<4x8xf32>)
// CHECK: %[[P:.*]] = sd.collective_permute_start %[[K]] @mesh axes = ["context"] pairs = {{\[\[}}0, 1], [1, 0]] : tensor<4x8xf32>
// CHECK-NEXT: %[[A:.*]] = sd.mul %[[Q]], %[[K]]
// CHECK-NEXT: %[[B:.*]] = sd.exp %[[A]]
// CHECK-NEXT: %[[D:.*]] = sd.collective_permute_done %[[P]], %[[K]] : tensor<4x8xf32>
// CHECK-NEXT: sd.add %[[B]], %[[D]]
// CHECK-NOT: sd.collective_permute
sd.mesh @mesh = <["context"=2]>
func.func @overlap(%k: tensor<4x8xf32>, %q: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %k1 = sd.collective_permute %k @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<4x8xf32>
  %a = sd.mul %q, %k : tensor<4x8xf32>
  %b = sd.exp %a : tensor<4x8xf32>
  %c = sd.add %b, %k1 : tensor<4x8xf32>
  %d = sd.mul %c, %k1 : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// Nothing to overlap: the next op reads the block, and the permute stays.
// CHECK-LABEL: func.func @next_reader
// CHECK: sd.collective_permute %{{.*}} @mesh axes = ["context"]
// CHECK-NOT: collective_permute_start
sd.mesh @mesh = <["context"=2]>
func.func @next_reader(%k: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %k1 = sd.collective_permute %k @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<4x8xf32>
  %a = sd.exp %k1 : tensor<4x8xf32>
  return %a : tensor<4x8xf32>
}

// -----

// Two blocks in flight at once, each done before its own first reader; the
// return counts as a reader.
// CHECK-LABEL: func.func @two_in_flight
// CHECK: %[[PK:.*]] = sd.collective_permute_start %[[K:[0-9a-z_]+]]
// CHECK-NEXT: %[[PV:.*]] = sd.collective_permute_start %[[V:[0-9a-z_]+]]
// CHECK-NEXT: %[[A:.*]] = sd.mul %[[K]], %[[V]]
// CHECK-NEXT: %[[K1:.*]] = sd.collective_permute_done %[[PK]], %[[K]]
// CHECK-NEXT: %[[B:.*]] = sd.add %[[A]], %[[K1]]
// CHECK-NEXT: %[[V1:.*]] = sd.collective_permute_done %[[PV]], %[[V]]
// CHECK-NEXT: return %[[B]], %[[V1]]
sd.mesh @mesh = <["context"=4]>
func.func @two_in_flight(%k: tensor<4x8xf32>, %v: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %k1 = sd.collective_permute %k @mesh axes = ["context"] pairs = [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4x8xf32>
  %v1 = sd.collective_permute %v @mesh axes = ["context"] pairs = [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<4x8xf32>
  %a = sd.mul %k, %v : tensor<4x8xf32>
  %b = sd.add %a, %k1 : tensor<4x8xf32>
  return %b, %v1 : tensor<4x8xf32>, tensor<4x8xf32>
}
