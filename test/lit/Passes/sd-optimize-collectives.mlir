// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-optimize-collectives | FileCheck %s

// A gather of a gather is one gather; the later one's axes are the major.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @merge_all_gathers
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[X]] @mesh [{"data", "fsdp"}, {"tensor"}] : (tensor<2x4xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @merge_all_gathers(%x: tensor<2x4xf32>) -> tensor<8x8xf32> {
  %a = sd.all_gather %x @mesh [{"fsdp"}, {"tensor"}] : (tensor<2x4xf32>) -> tensor<4x8xf32>
  %b = sd.all_gather %a @mesh [{"data"}, {}] : (tensor<4x8xf32>) -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// -----

// Sums over disjoint axes merge; over a common axis they must not.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @merge_all_reduces
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = sd.all_reduce %[[X]] @mesh axes = ["data", "fsdp"] : tensor<4xf32>
// CHECK-NEXT: %[[A:.*]] = sd.all_reduce %[[X]] @mesh axes = ["data"] {tag} : tensor<4xf32>
// CHECK-NEXT: %[[B:.*]] = sd.all_reduce %[[A]] @mesh axes = ["data"] : tensor<4xf32>
// CHECK-NEXT: return %[[M]], %[[B]]
func.func @merge_all_reduces(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = sd.all_reduce %x @mesh axes = ["data"] : tensor<4xf32>
  %b = sd.all_reduce %a @mesh axes = ["fsdp"] : tensor<4xf32>
  %c = sd.all_reduce %x @mesh axes = ["data"] {tag} : tensor<4xf32>
  %d = sd.all_reduce %c @mesh axes = ["data"] : tensor<4xf32>
  return %b, %d : tensor<4xf32>, tensor<4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @merge_all_slices
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %{{.*}} @mesh [{"data", "fsdp"}] : (tensor<8xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %[[S]]
func.func @merge_all_slices(%x: tensor<8xf32>) -> tensor<2xf32> {
  %a = sd.all_slice %x @mesh [{"data"}] : (tensor<8xf32>) -> tensor<4xf32>
  %b = sd.all_slice %a @mesh [{"fsdp"}] : (tensor<4xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

// Gathering then slicing the same axes gives the operand back, and so does
// slicing then gathering.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @cancel
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x4xf32>
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @cancel(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %g = sd.all_gather %x @mesh [{"data"}, {"fsdp"}] : (tensor<4x4xf32>) -> tensor<8x8xf32>
  %s = sd.all_slice %g @mesh [{"data"}, {"fsdp"}] : (tensor<8x8xf32>) -> tensor<4x4xf32>
  %t = sd.all_slice %x @mesh [{}, {"data"}] : (tensor<4x4xf32>) -> tensor<4x2xf32>
  %u = sd.all_gather %t @mesh [{}, {"data"}] : (tensor<4x2xf32>) -> tensor<4x4xf32>
  return %s, %u : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Partly: slicing back the major axis of a two-axis gather leaves a gather
// of the minor one; gathering the minor axis of a two-axis slice leaves a
// slice of the major one.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @cancel_partly
// CHECK-SAME: %[[X:[^:]*]]: tensor<2xf32>, %[[Y:[^:]*]]: tensor<8xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[X]] @mesh [{"fsdp"}] : (tensor<2xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %[[Y]] @mesh [{"data"}] : (tensor<8xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[G]], %[[S]]
func.func @cancel_partly(%x: tensor<2xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %g = sd.all_gather %x @mesh [{"data", "fsdp"}] : (tensor<2xf32>) -> tensor<8xf32>
  %s = sd.all_slice %g @mesh [{"data"}] : (tensor<8xf32>) -> tensor<4xf32>
  %t = sd.all_slice %y @mesh [{"data", "fsdp"}] : (tensor<8xf32>) -> tensor<2xf32>
  %u = sd.all_gather %t @mesh [{"fsdp"}] : (tensor<2xf32>) -> tensor<4xf32>
  return %s, %u : tensor<4xf32>, tensor<4xf32>
}

// -----

// A gather whose other users keep it is not split into a second gather.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @gather_kept
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %{{.*}} @mesh [{"data", "fsdp"}] : (tensor<2xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %[[G]] @mesh [{"data"}] : (tensor<8xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[G]], %[[S]]
func.func @gather_kept(%x: tensor<2xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %g = sd.all_gather %x @mesh [{"data", "fsdp"}] : (tensor<2xf32>) -> tensor<8xf32>
  %s = sd.all_slice %g @mesh [{"data"}] : (tensor<8xf32>) -> tensor<4xf32>
  return %g, %s : tensor<8xf32>, tensor<4xf32>
}

// -----

// An all_reduce sliced over its axes is a reduce_scatter.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @reduce_scatter
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = sd.reduce_scatter %[[X]] @mesh [{"fsdp"}, {}] : (tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @reduce_scatter(%x: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %s = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<8x16xf32>
  %y = sd.all_slice %s @mesh [{"fsdp"}, {}] : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Sliced over one of two summed axes: the other stays an all_reduce. A
// slice over other axes moves before the sum, which then adds less.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @reduce_then_slice
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32>
// CHECK-NEXT: %[[A:.*]] = sd.all_reduce %[[X]] @mesh axes = ["data"] : tensor<8x16xf32>
// CHECK-NEXT: %[[R:.*]] = sd.reduce_scatter %[[A]] @mesh [{"fsdp"}, {}] : (tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = sd.all_slice %[[X]] @mesh [{}, {"tensor"}] : (tensor<8x16xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[B:.*]] = sd.all_reduce %[[S]] @mesh axes = ["fsdp"] : tensor<8x8xf32>
// CHECK-NEXT: return %[[R]], %[[B]]
func.func @reduce_then_slice(%x: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<8x8xf32>) {
  %s = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<8x16xf32>
  %y = sd.all_slice %s @mesh [{"fsdp"}, {}] : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %t = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<8x16xf32>
  %z = sd.all_slice %t @mesh [{}, {"tensor"}] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return %y, %z : tensor<4x16xf32>, tensor<8x8xf32>
}

// -----

// Axes of size 1 do nothing: collectives over only such axes go, others
// lose them; so does a permute whose pairs keep every block in place.
sd.mesh @mesh = <["data"=1, "fsdp"=2, "context"=2]>
// CHECK-LABEL: func.func @no_ops
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %[[X]] @mesh [{"fsdp"}, {}] : (tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[X]], %[[G]], %[[X]], %[[X]]
func.func @no_ops(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %r = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x4xf32>
  %g = sd.all_gather %x @mesh [{"data", "fsdp"}, {}] : (tensor<4x4xf32>) -> tensor<8x4xf32>
  %a = sd.all_to_all %x @mesh axes = ["data"] src_dim = 0 tgt_dim = 1 : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %p = sd.collective_permute %x @mesh axes = ["context"] pairs = [[0, 0], [1, 1]] : tensor<4x4xf32>
  return %r, %g, %a, %p : tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A permute loses its size-1 axes (member indices stay) and its pairs
// [s, s]; one without pairs, or only over size-1 axes, goes.
sd.mesh @mesh = <["data"=1, "fsdp"=2, "context"=2]>
// CHECK-LABEL: func.func @permute_no_ops
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x4xf32>
// CHECK-NEXT: %[[P:.*]] = sd.collective_permute %[[X]] @mesh axes = ["fsdp", "context"] pairs = {{\[}}[1, 2], [2, 1]] : tensor<4x4xf32>
// CHECK-NEXT: return %[[P]], %[[X]], %[[X]]
func.func @permute_no_ops(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %p = sd.collective_permute %x @mesh axes = ["fsdp", "data", "context"] pairs = [[0, 0], [1, 2], [2, 1], [3, 3]] : tensor<4x4xf32>
  %q = sd.collective_permute %x @mesh axes = ["fsdp"] pairs = [] : tensor<4x4xf32>
  %r = sd.collective_permute %x @mesh axes = ["data"] pairs = [[0, 0]] : tensor<4x4xf32>
  return %p, %q, %r : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Identical collectives of one value become one.
sd.mesh @mesh = <["data"=2]>
// CHECK-LABEL: func.func @duplicates
// CHECK-NEXT: %[[G:.*]] = sd.all_gather %{{.*}} @mesh [{"data"}] : (tensor<4xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[G]], %[[G]]
func.func @duplicates(%x: tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = sd.all_gather %x @mesh [{"data"}] : (tensor<4xf32>) -> tensor<8xf32>
  %b = sd.all_gather %x @mesh [{"data"}] : (tensor<4xf32>) -> tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// The sum of all-reduces over the same axes (in any order) is one all-reduce
// of the sum, through a chain (microbatch gradients); not over other axes,
// nor when an all-reduce has another user.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @sum_before_all_reduce
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>, %[[Y:[^:]*]]: tensor<4xf32>, %[[Z:[^:]*]]: tensor<4xf32>
// CHECK-NEXT: %[[XY:.*]] = sd.add %[[X]], %[[Y]] : tensor<4xf32>
// CHECK-NEXT: %[[XYZ:.*]] = sd.add %[[XY]], %[[Z]] : tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = sd.all_reduce %[[XYZ]] @mesh axes = ["data", "fsdp"] : tensor<4xf32>
// CHECK-NEXT: %[[O1:.*]] = sd.all_reduce %[[X]] @mesh axes = ["data"] {tag} : tensor<4xf32>
// CHECK-NEXT: %[[O2:.*]] = sd.all_reduce %[[Y]] @mesh axes = ["fsdp"] {tag} : tensor<4xf32>
// CHECK-NEXT: %[[OTHER:.*]] = sd.add %[[O1]], %[[O2]] : tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = sd.all_reduce %[[Z]] @mesh axes = ["data"] {used} : tensor<4xf32>
// CHECK-NEXT: %[[V:.*]] = sd.all_reduce %[[Y]] @mesh axes = ["data"] {also} : tensor<4xf32>
// CHECK-NEXT: %[[USED:.*]] = sd.add %[[U]], %[[V]] : tensor<4xf32>
// CHECK-NEXT: return %[[R]], %[[OTHER]], %[[USED]], %[[U]]
func.func @sum_before_all_reduce(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<4xf32>
  %b = sd.all_reduce %y @mesh axes = ["fsdp", "data"] : tensor<4xf32>
  %ab = sd.add %a, %b : tensor<4xf32>
  %c = sd.all_reduce %z @mesh axes = ["data", "fsdp"] : tensor<4xf32>
  %abc = sd.add %ab, %c : tensor<4xf32>
  %o1 = sd.all_reduce %x @mesh axes = ["data"] {tag} : tensor<4xf32>
  %o2 = sd.all_reduce %y @mesh axes = ["fsdp"] {tag} : tensor<4xf32>
  %other = sd.add %o1, %o2 : tensor<4xf32>
  %u = sd.all_reduce %z @mesh axes = ["data"] {used} : tensor<4xf32>
  %v = sd.all_reduce %y @mesh axes = ["data"] {also} : tensor<4xf32>
  %used = sd.add %u, %v : tensor<4xf32>
  return %abc, %other, %used, %u : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
