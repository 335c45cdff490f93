// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-propagate-sharding | FileCheck %s
// Propagating again changes nothing: the shardings and reshards of the first
// run are annotations of the second.
// RUN: sdopt %s -split-input-file -sd-propagate-sharding -sd-propagate-sharding | FileCheck %s

// Forward through elementwise ops: the argument's batch sharding reaches
// every result and the function result.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @forward_elementwise
// CHECK-SAME: -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>})
// CHECK: %[[E:.*]] = sd.exp %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
// CHECK: sd.add %[[E]], %[[E]] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
// CHECK-NOT: sd.reshard
func.func @forward_elementwise(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %y = sd.add %e, %e : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Data parallelism: the batch of x passes through the dot; the replicated
// weight needs nothing.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @data_parallel_dot
// CHECK: sd.dot_general
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>
// CHECK-NOT: sd.reshard
func.func @data_parallel_dot(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                             %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// A parameter sharded on its contracting dimension (FSDP without a sharded
// batch): the open activation follows, the dot's result is a partial sum
// over fsdp, and the function result gets it reduced.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
// CHECK-LABEL: func.func @fsdp_contracting
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"fsdp", ?}]>}
// CHECK: %[[Y:.*]] = sd.dot_general %[[X]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}], unreduced = ["fsdp"]>]>
// CHECK: %[[R:.*]] = sd.reshard %[[Y]] sharding = <@mesh, [{"data"}, {}]>
// CHECK: return %[[R]]
func.func @fsdp_contracting(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {?}]>},
                            %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Megatron MLP: a column-split weight shards the hidden activation over
// tensor; the row-split weight contracts it, leaving a partial sum that is
// reduced (a reshard) before the residual add.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @megatron_mlp
// CHECK: %[[H:.*]] = sd.dot_general
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>
// CHECK: %[[G:.*]] = sd.gelu %[[H]] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>}
// CHECK: %[[O:.*]] = sd.dot_general %[[G]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}], unreduced = ["tensor"]>]>
// CHECK: %[[R:.*]] = sd.reshard %[[O]] sharding = <@mesh, [{"data"}, {}]>
// CHECK: sd.add %[[R]], %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
func.func @megatron_mlp(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                        %w1: tensor<16x64xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>},
                        %w2: tensor<64x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) -> tensor<8x16xf32> {
  %h = sd.dot_general %x, %w1 batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = sd.gelu %h : tensor<8x64xf32>
  %o = sd.dot_general %g, %w2 batch = [] x [] contract = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %y = sd.add %o, %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Backward from a function result annotation to unannotated arguments.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @backward_from_result
// CHECK-SAME: %{{.*}}: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}
// CHECK-SAME: %{{.*}}: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{?}, {"tensor", ?}]>}
// CHECK-SAME: -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>})
// CHECK-NOT: sd.reshard
func.func @backward_from_result(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>)
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Backward from a sharding constraint through a transpose to an open
// argument, and forward from it to the end.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @backward_from_constraint
// CHECK-SAME: %{{.*}}: tensor<16x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor", ?}, {"data", ?}]>}
// CHECK: sd.transpose
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>
// CHECK: %[[C:.*]] = sd.sharding_constraint
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data"}, {"tensor"}]>]>
// CHECK: sd.neg %[[C]] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?}]>]>}
// CHECK-NOT: sd.reshard
func.func @backward_from_constraint(%x: tensor<16x8xf32>) -> tensor<8x16xf32> {
  %t = sd.transpose %x permutation = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %c = sd.sharding_constraint %t sharding = <@mesh, [{"data"}, {"tensor"}]> : tensor<8x16xf32>
  %y = sd.neg %c : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A closed argument and a closed constraint disagree: the constraint wins
// at its op, with a reshard of the argument before it; the argument keeps
// its sharding.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @closed_conflict
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}
// CHECK: %[[R:.*]] = sd.reshard %[[X]] sharding = <@mesh, [{}, {"data"}]>
// CHECK: sd.sharding_constraint %[[R]] sharding = <@mesh, [{}, {"data"}]>
func.func @closed_conflict(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
  %c = sd.sharding_constraint %x sharding = <@mesh, [{}, {"data"}]> : tensor<8x16xf32>
  return %c : tensor<8x16xf32>
}

// -----

// Open dimensions gain axes, closed ones never change: %a is closed and
// replicated, %b open; both feed a constrained add.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @open_and_closed
// CHECK-SAME: %[[A:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: %[[B:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}
// CHECK: %[[R:.*]] = sd.reshard %[[A]] sharding = <@mesh, [{"data"}, {}]>
// CHECK: sd.add %[[R]], %[[B]]
func.func @open_and_closed(%a: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>},
                           %b: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{?}, {?}]>}) -> tensor<8x16xf32> {
  %s = sd.add %a, %b : tensor<8x16xf32>
  %c = sd.sharding_constraint %s sharding = <@mesh, [{"data"}, {}]> : tensor<8x16xf32>
  return %c : tensor<8x16xf32>
}

// -----

// User priorities: the p0 sharding of %b beats the p1 sharding of %a on the
// add, whatever the order of the operands; %a is resharded.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @priority
// CHECK-SAME: %[[A:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}p1, {}]>}
// CHECK: %[[R:.*]] = sd.reshard %[[A]] sharding = <@mesh, [{"data"}, {}]>
// CHECK: sd.add %[[R]], %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
func.func @priority(%a: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}p1, {}]>},
                    %b: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}p0, {}]>}) -> tensor<8x16xf32> {
  %s = sd.add %a, %b : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// need_replication: the softmax dimension is never sharded; its operand is
// resharded to gather it, and the other dimension passes.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @softmax_dimension
// CHECK: %[[R:.*]] = sd.reshard %{{.*}} sharding = <@mesh, [{"data"}, {}]>
// CHECK: sd.softmax %[[R]] dim = 1 {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
func.func @softmax_dimension(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) -> tensor<8x16xf32> {
  %y = sd.softmax %x dim = 1 : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A sliced dimension is never sharded: the argument only takes the batch
// from the annotated result; the slice produces its result whole along the
// sliced dimension and a reshard after it shards it.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @slice_dimension
// CHECK-SAME: %{{.*}}: tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}
// CHECK: %[[S:.*]] = sd.slice
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>
// CHECK: %[[R:.*]] = sd.reshard %[[S]] sharding = <@mesh, [{"data"}, {"tensor"}]>
// CHECK: return %[[R]]
func.func @slice_dimension(%x: tensor<8x32xf32>)
    -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) {
  %s = sd.slice %x start = [0, 0] limit = [8, 16] strides = [1, 1] : (tensor<8x32xf32>) -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// Reshapes use compound factors: merging [batch, seq, heads, head_dim] into
// [batch, seq, heads·head_dim] keeps the heads sharding on the merged
// dimension, and splitting it back recovers it.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @reshape_heads
// CHECK: %[[M:.*]] = sd.reshape
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}, {"tensor", ?}]>]>
// CHECK: sd.reshape %[[M]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}, {"tensor", ?}, {?}]>]>
// CHECK-NOT: sd.reshard
func.func @reshape_heads(%x: tensor<8x16x4x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"tensor"}, {}]>}) -> tensor<8x16x4x32xf32> {
  %m = sd.reshape %x : (tensor<8x16x4x32xf32>) -> tensor<8x16x128xf32>
  %s = sd.reshape %m : (tensor<8x16x128xf32>) -> tensor<8x16x4x32xf32>
  return %s : tensor<8x16x4x32xf32>
}

// -----

// Broadcasts propagate backward before forward: the broadcast bias takes
// its layout from its consumer (a reduction whose result is on tensor), not
// from the bias (on fsdp), which is resharded instead.
sd.mesh @mesh = <["fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @broadcast_backward
// CHECK-SAME: %[[B:.*]]: tensor<64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}]>}
// CHECK: %[[R:.*]] = sd.reshard %[[B]] sharding = <@mesh, [{"tensor"}]>
// CHECK: %[[X:.*]] = sd.broadcast_in_dim %[[R]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{?}, {"tensor", ?}]>]>
// CHECK: sd.reduce_sum %[[X]]
func.func @broadcast_backward(%b: tensor<64xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}]>})
    -> (tensor<64xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}]>}) {
  %x = sd.broadcast_in_dim %b dims = [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %s = sd.reduce_sum %x dims = [0] : (tensor<8x64xf32>) -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// -----

// A mesh axis is used once per tensor (FSDP): the batch of x holds fsdp, so
// the contraction cannot take it from the weight, which is gathered.
sd.mesh @mesh = <["fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @axis_once
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}
// CHECK-SAME: %[[W:.*]]: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>}
// CHECK: %[[R:.*]] = sd.reshard %[[W]] sharding = <@mesh, [{}, {"tensor"}]>
// CHECK: sd.dot_general %[[X]], %[[R]]
// CHECK-SAME: sd.sharding = #sd.sharding_per_value<[<@mesh, [{"fsdp", ?}, {"tensor", ?}]>]>
func.func @axis_once(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>},
                     %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Dimensions stay divisible by their axes: [12] split over data (4) cannot
// become [3, 4] split on its 3 rows, so the reshape's result stays whole and
// its operand is gathered.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @divisibility
// CHECK: %[[R:.*]] = sd.reshard %{{.*}} sharding = <@mesh, [{}]>
// CHECK: sd.reshape %[[R]] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{?}, {?}]>]>}
func.func @divisibility(%x: tensor<12xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) -> tensor<3x4xf32> {
  %y = sd.reshape %x : (tensor<12xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// Uneven shards: a batch of 6 over data=4 propagates as it is (padded
// blocks of 2), through elementwise ops and a reshape whose [6] is the
// minor-most factor of its dimension.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @padded_forward
// CHECK: sd.exp %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>}
// CHECK: sd.reshape %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{?}, {"data", ?}, {?}]>]>}
// CHECK-NOT: sd.reshard
func.func @padded_forward(%x: tensor<6x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<1x6x16xf32> {
  %e = sd.exp %x : tensor<6x16xf32>
  %r = sd.reshape %e : (tensor<6x16xf32>) -> tensor<1x6x16xf32>
  return %r : tensor<1x6x16xf32>
}

// -----

// A padded factor that is not the minor-most of a dimension cannot pass:
// the 6 heads of [6 · 64] over tensor=4 would be blocks of 128 features,
// which are not the blocks of 96 that 384 features split into. The
// reshape's input stays whole and is resharded (sd-partition pads and
// slices it).
sd.mesh @mesh = <["tensor"=4]>
// CHECK-LABEL: func.func @padded_heads_stop_at_reshape
// CHECK: %[[R:.*]] = sd.reshape %{{.*}} {sd.sharding = #sd.sharding_per_value<[<@mesh, [{?}, {?}, {?}]>]>}
// CHECK: sd.reshard %[[R]] sharding = <@mesh, [{}, {"tensor"}, {}]>
func.func @padded_heads_stop_at_reshape(%x: tensor<8x384xf32>) -> (tensor<8x6x64xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}, {}]>}) {
  %r = sd.reshape %x : (tensor<8x384xf32>) -> tensor<8x6x64xf32>
  return %r : tensor<8x6x64xf32>
}
