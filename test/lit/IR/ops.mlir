// RUN: sdopt %s -split-input-file -verify-diagnostics | sdopt -split-input-file | FileCheck %s
// RUN: sdopt %s -split-input-file -verify-diagnostics -mlir-print-op-generic | sdopt -split-input-file | FileCheck %s

// Round trip of every sd op and attribute form, in the custom and in the
// generic syntax. One case per chunk; each names its function.

// Mesh axes with and without a DCN part; `(dcn=1)` is the default and is
// not printed.
// CHECK-LABEL: sd.mesh @mesh = <["data"=8(dcn=2), "fsdp"=4, "tensor"=2]>
// CHECK: sd.mesh @all_dcn = <["data"=2(dcn=2)]>
// CHECK: sd.mesh @single = <["data"=1]>
// CHECK-LABEL: func.func @mesh_forms
sd.mesh @mesh = <["data"=8(dcn=2), "fsdp"=4, "tensor"=2(dcn=1)]>
sd.mesh @all_dcn = <["data"=2(dcn=2)]>
sd.mesh @single = <["data"=1]>
func.func @mesh_forms() {
  return
}

// -----

// Every initializer kind of a parameter.
// CHECK-LABEL: func.func @init_kinds
// CHECK-SAME: {sd.role = #sd.param<"zeros", zeros>}
// CHECK-SAME: {sd.role = #sd.param<"ones", ones>}
// CHECK-SAME: {sd.role = #sd.param<"constant", constant(0.5)>}
// CHECK-SAME: {sd.role = #sd.param<"negative", constant(-1.0)>}
// CHECK-SAME: {sd.role = #sd.param<"normal", normal(0.02)>}
// CHECK-SAME: {sd.role = #sd.param<"uniform", uniform(0.1)>}
// CHECK-SAME: {sd.role = #sd.param<"blocks.0.attn.q.weight", xavier_uniform>}
func.func @init_kinds(
    %a: tensor<4xf32> {sd.role = #sd.param<"zeros", zeros>},
    %b: tensor<4xf32> {sd.role = #sd.param<"ones", ones>},
    %c: tensor<4xf32> {sd.role = #sd.param<"constant", constant(0.5)>},
    %d: tensor<4xf32> {sd.role = #sd.param<"negative", constant(-1.0)>},
    %e: tensor<4xf32> {sd.role = #sd.param<"normal", normal(0.02)>},
    %f: tensor<4xbf16> {sd.role = #sd.param<"uniform", uniform(1.0e-1)>},
    %g: tensor<4x8xf32> {sd.role = #sd.param<"blocks.0.attn.q.weight", xavier_uniform>}) {
  return
}

// -----

// Every model input kind, with a dynamic batch.
// CHECK-LABEL: func.func @input_kinds
// CHECK-SAME: tensor<?x8x8x4xf32> {sd.role = #sd.input<latents>}
// CHECK-SAME: tensor<?x8x8x4xf32> {sd.role = #sd.input<noise>}
// CHECK-SAME: tensor<?xf32> {sd.role = #sd.input<timestep>}
// CHECK-SAME: tensor<?x77x768xbf16> {sd.role = #sd.input<context>}
// CHECK-SAME: tensor<?x10xf32> {sd.role = #sd.input<labels>}
func.func @input_kinds(
    %x0: tensor<?x8x8x4xf32> {sd.role = #sd.input<latents>},
    %eps: tensor<?x8x8x4xf32> {sd.role = #sd.input<noise>},
    %t: tensor<?xf32> {sd.role = #sd.input<timestep>},
    %ctx: tensor<?x77x768xbf16> {sd.role = #sd.input<context>},
    %y: tensor<?x10xf32> {sd.role = #sd.input<labels>}) {
  return
}

// -----

// Logical axes: `_` and `"_"` leave a dimension unnamed; quoted identifiers
// print bare.
// CHECK-LABEL: func.func @logical_axes
// CHECK-SAME: {sd.logical_axes = #sd.logical_axes<[batch, _, embed]>, sd.role = #sd.input<latents>}
// CHECK-SAME: {sd.logical_axes = #sd.logical_axes<[_, _]>, sd.role = #sd.param<"w", zeros>}
// CHECK-SAME: {sd.logical_axes = #sd.logical_axes<[]>}
func.func @logical_axes(
    %x: tensor<?x16x384xf32> {sd.role = #sd.input<latents>,
                              sd.logical_axes = #sd.logical_axes<[batch, _, "embed"]>},
    %w: tensor<4x4xf32> {sd.role = #sd.param<"w", zeros>,
                         sd.logical_axes = #sd.logical_axes<["_", _]>},
    %s: tensor<f32> {sd.logical_axes = #sd.logical_axes<[]>}) {
  return
}

// -----

// Dimension shardings: closed, empty, several axes, open, open and empty,
// with priorities, and an explicitly replicated axis.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2, "context"=2]>
// CHECK-LABEL: func.func @sharding_forms
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"fsdp", "tensor"}]>}
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{"data"}p0, {"fsdp", ?}p1, {?}p12]>}
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["context", "tensor"]>}
func.func @sharding_forms(
    %a: tensor<8x3x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"fsdp", "tensor"}]>},
    %b: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>},
    %c: tensor<8x8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}p0, {"fsdp", ?}p1, {?} p12]>},
    %d: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["context", "tensor"]>}) {
  return
}

// -----

// Partial sums (unreduced axes, alone and after replicated ones) and the
// per-result shardings that propagation records on ops.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
// CHECK-LABEL: func.func @unreduced_and_per_value
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>}
// CHECK-SAME: {sd.sharding = #sd.sharding<@mesh, [{}, {}], replicated = ["data"], unreduced = ["fsdp", "tensor"]>}
// CHECK: sd.neg %{{.*}} {sd.provenance = ["data on dim 0 from input noise"], sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}], unreduced = ["fsdp"]>]>}
func.func @unreduced_and_per_value(
    %a: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>},
    %b: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], replicated = ["data"], unreduced = ["fsdp", "tensor"]>}) {
  %y = sd.neg %a {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}], unreduced = ["fsdp"]>]>,
                  sd.provenance = ["data on dim 0 from input noise"]} : tensor<8x8xf32>
  return
}

// -----

// Shardings of a dynamic batch (not checked for divisibility), of a scalar
// and of function results.
sd.mesh @mesh = <["data"=4(dcn=2)]>
// CHECK-LABEL: func.func @result_shardings
// CHECK-SAME: (%[[X:.*]]: tensor<?x6xf32> {sd.role = #sd.input<noise>, sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
// CHECK-SAME: -> (tensor<?x6xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}, tensor<f32> {sd.sharding = #sd.sharding<@mesh, []>})
// CHECK: %[[L:.*]] = sd.mse_loss %[[X]], %[[X]] : tensor<?x6xf32>
// CHECK: return %[[X]], %[[L]] : tensor<?x6xf32>, tensor<f32>
func.func @result_shardings(
    %x: tensor<?x6xf32> {sd.role = #sd.input<noise>,
                         sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>})
    -> (tensor<?x6xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
        tensor<f32> {sd.sharding = #sd.sharding<@mesh, []>}) {
  %l = sd.mse_loss %x, %x : tensor<?x6xf32>
  return %x, %l : tensor<?x6xf32>, tensor<f32>
}

// -----

// sd.name on op results, sd.default_batch and sd.prediction_type on the
// function.
// CHECK-LABEL: func.func @names_and_default_batch
// CHECK-SAME: attributes {sd.default_batch = 8 : i64, sd.prediction_type = #sd.prediction<v_prediction>}
// CHECK: %[[Q:.*]] = sd.exp %{{.*}} {sd.name = "query_proj"} : tensor<?x4xf32>
// CHECK: sd.neg %[[Q]] {sd.name = ""} : tensor<?x4xf32>
func.func @names_and_default_batch(%x: tensor<?x4xf32>) -> tensor<?x4xf32>
    attributes {sd.default_batch = 8, sd.prediction_type = #sd.prediction<v_prediction>} {
  %q = sd.exp %x {sd.name = "query_proj"} : tensor<?x4xf32>
  %n = sd.neg %q {sd.name = ""} : tensor<?x4xf32>
  return %n : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[H:.*]]: tensor<2x4xbf16>)
// CHECK: %[[NEG:.*]] = sd.neg %[[X]] : tensor<?x4xf32>
// CHECK: %[[EXP:.*]] = sd.exp %[[NEG]] : tensor<?x4xf32>
// CHECK: %[[LOG:.*]] = sd.log %[[EXP]] : tensor<?x4xf32>
// CHECK: %[[SQRT:.*]] = sd.sqrt %[[LOG]] : tensor<?x4xf32>
// CHECK: %[[RSQRT:.*]] = sd.rsqrt %[[SQRT]] : tensor<?x4xf32>
// CHECK: %[[TANH:.*]] = sd.tanh %[[RSQRT]] : tensor<?x4xf32>
// CHECK: %[[SIN:.*]] = sd.sin %[[TANH]] : tensor<?x4xf32>
// CHECK: %[[COS:.*]] = sd.cos %[[SIN]] : tensor<?x4xf32>
// CHECK: %[[SIG:.*]] = sd.sigmoid %[[COS]] : tensor<?x4xf32>
// CHECK: %[[SILU:.*]] = sd.silu %[[SIG]] : tensor<?x4xf32>
// CHECK: sd.silu %[[H]] : tensor<2x4xbf16>
// CHECK: %[[ERF:.*]] = sd.erf %[[SILU]] : tensor<?x4xf32>
// CHECK: return %[[ERF]]
func.func @unary(%x: tensor<?x4xf32>, %h: tensor<2x4xbf16>) -> tensor<?x4xf32> {
  %0 = sd.neg %x : tensor<?x4xf32>
  %1 = sd.exp %0 : tensor<?x4xf32>
  %2 = sd.log %1 : tensor<?x4xf32>
  %3 = sd.sqrt %2 : tensor<?x4xf32>
  %4 = sd.rsqrt %3 : tensor<?x4xf32>
  %5 = sd.tanh %4 : tensor<?x4xf32>
  %6 = sd.sin %5 : tensor<?x4xf32>
  %7 = sd.cos %6 : tensor<?x4xf32>
  %8 = sd.sigmoid %7 : tensor<?x4xf32>
  %9 = sd.silu %8 : tensor<?x4xf32>
  %10 = sd.silu %h : tensor<2x4xbf16>
  %11 = sd.erf %9 : tensor<?x4xf32>
  return %11 : tensor<?x4xf32>
}

// -----

// The tanh approximation is the default and is not printed.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
// CHECK: %[[A:.*]] = sd.gelu %[[X]] : tensor<2x4xf32>
// CHECK: %[[B:.*]] = sd.gelu %[[A]] : tensor<2x4xf32>
// CHECK: %[[C:.*]] = sd.gelu %[[B]] {approximate = false} : tensor<2x4xf32>
// CHECK: return %[[C]]
func.func @gelu(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a = sd.gelu %x : tensor<2x4xf32>
  %b = sd.gelu %a {approximate = true} : tensor<2x4xf32>
  %c = sd.gelu %b {approximate = false} : tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.*]]: tensor<?x4xf32>, %[[B:.*]]: tensor<?x4xf32>)
// CHECK: %[[ADD:.*]] = sd.add %[[A]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[SUB:.*]] = sd.sub %[[ADD]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[MUL:.*]] = sd.mul %[[SUB]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[DIV:.*]] = sd.div %[[MUL]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[MAX:.*]] = sd.max %[[DIV]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[MIN:.*]] = sd.min %[[MAX]], %[[B]] : tensor<?x4xf32>
// CHECK: %[[POW:.*]] = sd.pow %[[MIN]], %[[B]] : tensor<?x4xf32>
// CHECK: return %[[POW]]
func.func @binary(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = sd.add %a, %b : tensor<?x4xf32>
  %1 = sd.sub %0, %b : tensor<?x4xf32>
  %2 = sd.mul %1, %b : tensor<?x4xf32>
  %3 = sd.div %2, %b : tensor<?x4xf32>
  %4 = sd.max %3, %b : tensor<?x4xf32>
  %5 = sd.min %4, %b : tensor<?x4xf32>
  %6 = sd.pow %5, %b : tensor<?x4xf32>
  return %6 : tensor<?x4xf32>
}

// -----

// Every comparison direction; the result is i1 of the operands' shape.
// CHECK-LABEL: func.func @compare
// CHECK-SAME: (%[[A:.*]]: tensor<?x4xbf16>, %[[B:.*]]: tensor<?x4xbf16>)
// CHECK: sd.compare eq, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: sd.compare ne, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: sd.compare lt, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: sd.compare le, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: sd.compare gt, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: %[[GE:.*]] = sd.compare ge, %[[A]], %[[B]] : tensor<?x4xbf16>
// CHECK: return %[[GE]] : tensor<?x4xi1>
func.func @compare(%a: tensor<?x4xbf16>, %b: tensor<?x4xbf16>) -> tensor<?x4xi1> {
  %0 = sd.compare eq, %a, %b : tensor<?x4xbf16>
  %1 = sd.compare ne, %a, %b : tensor<?x4xbf16>
  %2 = sd.compare lt, %a, %b : tensor<?x4xbf16>
  %3 = sd.compare le, %a, %b : tensor<?x4xbf16>
  %4 = sd.compare gt, %a, %b : tensor<?x4xbf16>
  %5 = sd.compare ge, %a, %b : tensor<?x4xbf16>
  return %5 : tensor<?x4xi1>
}

// -----

// A static predicate may select between dynamic-batch operands.
// CHECK-LABEL: func.func @select
// CHECK-SAME: (%[[P:.*]]: tensor<2x4xi1>, %[[A:.*]]: tensor<?x4xf32>, %[[B:.*]]: tensor<?x4xf32>)
// CHECK: %[[S:.*]] = sd.select %[[P]], %[[A]], %[[B]] : tensor<2x4xi1>, tensor<?x4xf32>
// CHECK: return %[[S]] : tensor<?x4xf32>
func.func @select(%p: tensor<2x4xi1>, %a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %s = sd.select %p, %a, %b : tensor<2x4xi1>, tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @convert
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>, %[[P:.*]]: tensor<?x4xi1>)
// CHECK: %[[H:.*]] = sd.convert %[[X]] : tensor<?x4xf32> -> tensor<?x4xbf16>
// CHECK: sd.convert %[[H]] : tensor<?x4xbf16> -> tensor<?x4xf32>
// CHECK: sd.convert %[[P]] : tensor<?x4xi1> -> tensor<?x4xf32>
// CHECK: sd.convert %[[P]] : tensor<?x4xi1> -> tensor<?x4xbf16>
func.func @convert(%x: tensor<?x4xf32>, %p: tensor<?x4xi1>) -> tensor<?x4xf32> {
  %h = sd.convert %x : tensor<?x4xf32> -> tensor<?x4xbf16>
  %f = sd.convert %h : tensor<?x4xbf16> -> tensor<?x4xf32>
  %m = sd.convert %p : tensor<?x4xi1> -> tensor<?x4xf32>
  %n = sd.convert %p : tensor<?x4xi1> -> tensor<?x4xbf16>
  return %m : tensor<?x4xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<?x16x8xf32>)
// CHECK: sd.reduce_sum %[[X]] dims = [1] : (tensor<?x16x8xf32>) -> tensor<?x8xf32>
// CHECK: sd.reduce_max %[[X]] dims = [1, 2] : (tensor<?x16x8xf32>) -> tensor<?xf32>
// CHECK: sd.reduce_mean %[[X]] dims = [0, 1, 2] : (tensor<?x16x8xf32>) -> tensor<f32>
// CHECK: sd.reduce_sum %[[X]] dims = [] : (tensor<?x16x8xf32>) -> tensor<?x16x8xf32>
func.func @reductions(%x: tensor<?x16x8xf32>) -> tensor<f32> {
  %s = sd.reduce_sum %x dims = [1] : (tensor<?x16x8xf32>) -> tensor<?x8xf32>
  %m = sd.reduce_max %x dims = [1, 2] : (tensor<?x16x8xf32>) -> tensor<?xf32>
  %a = sd.reduce_mean %x dims = [0, 1, 2] : (tensor<?x16x8xf32>) -> tensor<f32>
  %n = sd.reduce_sum %x dims = [] : (tensor<?x16x8xf32>) -> tensor<?x16x8xf32>
  return %a : tensor<f32>
}

// -----

// New dimensions, size-1 dimensions that repeat, and a dynamic batch.
// CHECK-LABEL: func.func @broadcast_in_dim
// CHECK-SAME: (%[[B:.*]]: tensor<384xf32>, %[[S:.*]]: tensor<?x1xf32>, %[[C:.*]]: tensor<f32>)
// CHECK: sd.broadcast_in_dim %[[B]] dims = [2] : (tensor<384xf32>) -> tensor<?x256x384xf32>
// CHECK: sd.broadcast_in_dim %[[S]] dims = [0, 2] : (tensor<?x1xf32>) -> tensor<?x256x384xf32>
// CHECK: sd.broadcast_in_dim %[[C]] dims = [] : (tensor<f32>) -> tensor<2x3xf32>
func.func @broadcast_in_dim(%b: tensor<384xf32>, %s: tensor<?x1xf32>, %c: tensor<f32>) -> tensor<?x256x384xf32> {
  %0 = sd.broadcast_in_dim %b dims = [2] : (tensor<384xf32>) -> tensor<?x256x384xf32>
  %1 = sd.broadcast_in_dim %s dims = [0, 2] : (tensor<?x1xf32>) -> tensor<?x256x384xf32>
  %2 = sd.broadcast_in_dim %c dims = [] : (tensor<f32>) -> tensor<2x3xf32>
  return %1 : tensor<?x256x384xf32>
}

// -----

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<8x256x384xf32>, %[[Y:.*]]: tensor<?x384xbf16>)
// CHECK: sd.reshape %[[X]] : (tensor<8x256x384xf32>) -> tensor<8x256x6x64xf32>
// CHECK: sd.reshape %[[X]] : (tensor<8x256x384xf32>) -> tensor<?x384xf32>
// CHECK: sd.reshape %[[Y]] : (tensor<?x384xbf16>) -> tensor<?x6x64xbf16>
func.func @reshape(%x: tensor<8x256x384xf32>, %y: tensor<?x384xbf16>) -> tensor<?x6x64xbf16> {
  %0 = sd.reshape %x : (tensor<8x256x384xf32>) -> tensor<8x256x6x64xf32>
  %1 = sd.reshape %x : (tensor<8x256x384xf32>) -> tensor<?x384xf32>
  %2 = sd.reshape %y : (tensor<?x384xbf16>) -> tensor<?x6x64xbf16>
  return %2 : tensor<?x6x64xbf16>
}

// -----

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.*]]: tensor<?x256x6x64xf32>)
// CHECK: %[[T:.*]] = sd.transpose %[[X]] permutation = [0, 2, 1, 3] : (tensor<?x256x6x64xf32>) -> tensor<?x6x256x64xf32>
// CHECK: sd.transpose %[[T]] permutation = [3, 2, 1, 0] : (tensor<?x6x256x64xf32>) -> tensor<64x256x6x?xf32>
func.func @transpose(%x: tensor<?x256x6x64xf32>) -> tensor<?x6x256x64xf32> {
  %t = sd.transpose %x permutation = [0, 2, 1, 3] : (tensor<?x256x6x64xf32>) -> tensor<?x6x256x64xf32>
  %r = sd.transpose %t permutation = [3, 2, 1, 0] : (tensor<?x6x256x64xf32>) -> tensor<64x256x6x?xf32>
  return %t : tensor<?x6x256x64xf32>
}

// -----

// Strided slices; a dynamic dimension is taken whole with limit -1.
// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<8x384xf32>, %[[Y:.*]]: tensor<?x384xf32>)
// CHECK: sd.slice %[[X]] start = [0, 0] limit = [8, 192] strides = [1, 1] : (tensor<8x384xf32>) -> tensor<8x192xf32>
// CHECK: sd.slice %[[X]] start = [1, 0] limit = [8, 384] strides = [2, 3] : (tensor<8x384xf32>) -> tensor<4x128xf32>
// CHECK: sd.slice %[[Y]] start = [0, 192] limit = [-1, 384] strides = [1, 1] : (tensor<?x384xf32>) -> tensor<?x192xf32>
func.func @slice(%x: tensor<8x384xf32>, %y: tensor<?x384xf32>) -> tensor<?x192xf32> {
  %0 = sd.slice %x start = [0, 0] limit = [8, 192] strides = [1, 1] : (tensor<8x384xf32>) -> tensor<8x192xf32>
  %1 = sd.slice %x start = [1, 0] limit = [8, 384] strides = [2, 3] : (tensor<8x384xf32>) -> tensor<4x128xf32>
  %2 = sd.slice %y start = [0, 192] limit = [-1, 384] strides = [1, 1] : (tensor<?x384xf32>) -> tensor<?x192xf32>
  return %2 : tensor<?x192xf32>
}

// -----

// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.*]]: tensor<?x4xf32>, %[[B:.*]]: tensor<?x6xf32>, %[[C:.*]]: tensor<2x4xf32>)
// CHECK: sd.concat %[[A]], %[[B]] dim = 1 : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<?x10xf32>
// CHECK: sd.concat %[[C]], %[[C]], %[[C]] dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
// CHECK: sd.concat %[[A]], %[[C]] dim = 0 : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
// CHECK: sd.concat %[[C]] dim = 1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
func.func @concat(%a: tensor<?x4xf32>, %b: tensor<?x6xf32>, %c: tensor<2x4xf32>) -> tensor<?x10xf32> {
  %0 = sd.concat %a, %b dim = 1 : (tensor<?x4xf32>, tensor<?x6xf32>) -> tensor<?x10xf32>
  %1 = sd.concat %c, %c, %c dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  %2 = sd.concat %a, %c dim = 0 : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  %3 = sd.concat %c dim = 1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<?x10xf32>
}

// -----

// The padding value 0 is the default and is not printed.
// CHECK-LABEL: func.func @pad
// CHECK-SAME: (%[[X:.*]]: tensor<?x4x4xf32>)
// CHECK: sd.pad %[[X]] low = [0, 1, 0] high = [0, 1, 2] : (tensor<?x4x4xf32>) -> tensor<?x6x6xf32>
// CHECK: sd.pad %[[X]] low = [0, 0, 0] high = [0, 0, 0] {padding_value = -1.000000e+00 : f64} : (tensor<?x4x4xf32>) -> tensor<?x4x4xf32>
func.func @pad(%x: tensor<?x4x4xf32>) -> tensor<?x6x6xf32> {
  %0 = sd.pad %x low = [0, 1, 0] high = [0, 1, 2] : (tensor<?x4x4xf32>) -> tensor<?x6x6xf32>
  %1 = sd.pad %x low = [0, 0, 0] high = [0, 0, 0] {padding_value = -1.0} : (tensor<?x4x4xf32>) -> tensor<?x4x4xf32>
  return %0 : tensor<?x6x6xf32>
}

// -----

// A projection, attention's batched QKᵀ, and bf16 operands accumulating in
// f32 or staying bf16.
// CHECK-LABEL: func.func @dot_general
// CHECK-SAME: (%[[X:.*]]: tensor<?x256x384xf32>, %[[W:.*]]: tensor<384x1152xf32>, %[[Q:.*]]: tensor<?x6x256x64xbf16>, %[[K:.*]]: tensor<?x6x128x64xbf16>)
// CHECK: sd.dot_general %[[X]], %[[W]] batch = [] x [] contract = [2] x [0] : (tensor<?x256x384xf32>, tensor<384x1152xf32>) -> tensor<?x256x1152xf32>
// CHECK: sd.dot_general %[[Q]], %[[K]] batch = [0, 1] x [0, 1] contract = [3] x [3] : (tensor<?x6x256x64xbf16>, tensor<?x6x128x64xbf16>) -> tensor<?x6x256x128xf32>
// CHECK: sd.dot_general %[[Q]], %[[K]] batch = [0, 1] x [0, 1] contract = [3] x [3] : (tensor<?x6x256x64xbf16>, tensor<?x6x128x64xbf16>) -> tensor<?x6x256x128xbf16>
func.func @dot_general(%x: tensor<?x256x384xf32>, %w: tensor<384x1152xf32>,
                       %q: tensor<?x6x256x64xbf16>, %k: tensor<?x6x128x64xbf16>) -> tensor<?x256x1152xf32> {
  %0 = sd.dot_general %x, %w batch = [] x [] contract = [2] x [0] : (tensor<?x256x384xf32>, tensor<384x1152xf32>) -> tensor<?x256x1152xf32>
  %1 = sd.dot_general %q, %k batch = [0, 1] x [0, 1] contract = [3] x [3] : (tensor<?x6x256x64xbf16>, tensor<?x6x128x64xbf16>) -> tensor<?x6x256x128xf32>
  %2 = sd.dot_general %q, %k batch = [0, 1] x [0, 1] contract = [3] x [3] : (tensor<?x6x256x64xbf16>, tensor<?x6x128x64xbf16>) -> tensor<?x6x256x128xbf16>
  return %0 : tensor<?x256x1152xf32>
}

// -----

// Layer norm with neither, either or both of scale and bias.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<?x16x384xf32>, %[[S:.*]]: tensor<384xf32>, %[[B:.*]]: tensor<384xf32>)
// CHECK: sd.layer_norm %[[X]] : (tensor<?x16x384xf32>) -> tensor<?x16x384xf32>
// CHECK: sd.layer_norm %[[X]] scale %[[S]] : (tensor<?x16x384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
// CHECK: sd.layer_norm %[[X]] bias %[[B]] : (tensor<?x16x384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
// CHECK: sd.layer_norm %[[X]] scale %[[S]] bias %[[B]] {epsilon = 1.000000e-05 : f64} : (tensor<?x16x384xf32>, tensor<384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
func.func @layer_norm(%x: tensor<?x16x384xf32>, %s: tensor<384xf32>, %b: tensor<384xf32>) -> tensor<?x16x384xf32> {
  %0 = sd.layer_norm %x : (tensor<?x16x384xf32>) -> tensor<?x16x384xf32>
  %1 = sd.layer_norm %x scale %s : (tensor<?x16x384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
  %2 = sd.layer_norm %x bias %b : (tensor<?x16x384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
  %3 = sd.layer_norm %x scale %s bias %b {epsilon = 1.0e-5} : (tensor<?x16x384xf32>, tensor<384xf32>, tensor<384xf32>) -> tensor<?x16x384xf32>
  return %3 : tensor<?x16x384xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<?x6x256x64xbf16>, %[[S:.*]]: tensor<64xbf16>)
// CHECK: sd.rms_norm %[[X]] : (tensor<?x6x256x64xbf16>) -> tensor<?x6x256x64xbf16>
// CHECK: sd.rms_norm %[[X]] scale %[[S]] {epsilon = 1.000000e-05 : f64} : (tensor<?x6x256x64xbf16>, tensor<64xbf16>) -> tensor<?x6x256x64xbf16>
func.func @rms_norm(%x: tensor<?x6x256x64xbf16>, %s: tensor<64xbf16>) -> tensor<?x6x256x64xbf16> {
  %0 = sd.rms_norm %x : (tensor<?x6x256x64xbf16>) -> tensor<?x6x256x64xbf16>
  %1 = sd.rms_norm %x scale %s {epsilon = 1.0e-5} : (tensor<?x6x256x64xbf16>, tensor<64xbf16>) -> tensor<?x6x256x64xbf16>
  return %1 : tensor<?x6x256x64xbf16>
}

// -----

// CHECK-LABEL: func.func @group_norm
// CHECK-SAME: (%[[X:.*]]: tensor<?x8x8x64xf32>, %[[S:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: sd.group_norm %[[X]] groups = 32 : (tensor<?x8x8x64xf32>) -> tensor<?x8x8x64xf32>
// CHECK: sd.group_norm %[[X]] scale %[[S]] groups = 1 : (tensor<?x8x8x64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
// CHECK: sd.group_norm %[[X]] bias %[[B]] groups = 64 : (tensor<?x8x8x64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
// CHECK: sd.group_norm %[[X]] scale %[[S]] bias %[[B]] groups = 32 {epsilon = 1.000000e-05 : f64} : (tensor<?x8x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
func.func @group_norm(%x: tensor<?x8x8x64xf32>, %s: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x8x8x64xf32> {
  %0 = sd.group_norm %x groups = 32 : (tensor<?x8x8x64xf32>) -> tensor<?x8x8x64xf32>
  %1 = sd.group_norm %x scale %s groups = 1 : (tensor<?x8x8x64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
  %2 = sd.group_norm %x bias %b groups = 64 : (tensor<?x8x8x64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
  %3 = sd.group_norm %x scale %s bias %b groups = 32 {epsilon = 1.0e-5} : (tensor<?x8x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x8x8x64xf32>
  return %3 : tensor<?x8x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<?x6x256x256xf32>)
// CHECK: %[[A:.*]] = sd.softmax %[[X]] dim = 3 : tensor<?x6x256x256xf32>
// CHECK: sd.softmax %[[A]] dim = 0 : tensor<?x6x256x256xf32>
func.func @softmax(%x: tensor<?x6x256x256xf32>) -> tensor<?x6x256x256xf32> {
  %a = sd.softmax %x dim = 3 : tensor<?x6x256x256xf32>
  %b = sd.softmax %a dim = 0 : tensor<?x6x256x256xf32>
  return %b : tensor<?x6x256x256xf32>
}

// -----

// Self-attention with the default scale, and with a given scale.
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<?x6x256x64xf32>, %[[K:.*]]: tensor<?x6x256x64xf32>, %[[V:.*]]: tensor<?x6x256x64xf32>)
// CHECK: sd.attention %[[Q]], %[[K]], %[[V]] : (tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>) -> tensor<?x6x256x64xf32>
// CHECK: sd.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 : (tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>) -> tensor<?x6x256x64xf32>
func.func @attention(%q: tensor<?x6x256x64xf32>, %k: tensor<?x6x256x64xf32>, %v: tensor<?x6x256x64xf32>) -> tensor<?x6x256x64xf32> {
  %0 = sd.attention %q, %k, %v : (tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>) -> tensor<?x6x256x64xf32>
  %1 = sd.attention %q, %k, %v scale = 0.125 : (tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>, tensor<?x6x256x64xf32>) -> tensor<?x6x256x64xf32>
  return %1 : tensor<?x6x256x64xf32>
}

// -----

// Cross-attention (Skv != Sq, Dv != D) with a full mask, and with a mask
// broadcast over batch and heads together with a scale.
// CHECK-LABEL: func.func @attention_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x6x16x64xbf16>, %[[K:.*]]: tensor<2x6x77x64xbf16>, %[[V:.*]]: tensor<2x6x77x32xbf16>, %[[M:.*]]: tensor<2x6x16x77xi1>, %[[B:.*]]: tensor<1x1x16x77xi1>)
// CHECK: sd.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] : (tensor<2x6x16x64xbf16>, tensor<2x6x77x64xbf16>, tensor<2x6x77x32xbf16>, tensor<2x6x16x77xi1>) -> tensor<2x6x16x32xbf16>
// CHECK: sd.attention %[[Q]], %[[K]], %[[V]] mask %[[B]] scale = 5.000000e-01 : (tensor<2x6x16x64xbf16>, tensor<2x6x77x64xbf16>, tensor<2x6x77x32xbf16>, tensor<1x1x16x77xi1>) -> tensor<2x6x16x32xbf16>
func.func @attention_mask(%q: tensor<2x6x16x64xbf16>, %k: tensor<2x6x77x64xbf16>, %v: tensor<2x6x77x32xbf16>,
                          %m: tensor<2x6x16x77xi1>, %b: tensor<1x1x16x77xi1>) -> tensor<2x6x16x32xbf16> {
  %0 = sd.attention %q, %k, %v mask %m : (tensor<2x6x16x64xbf16>, tensor<2x6x77x64xbf16>, tensor<2x6x77x32xbf16>, tensor<2x6x16x77xi1>) -> tensor<2x6x16x32xbf16>
  %1 = sd.attention %q, %k, %v mask %b scale = 0.5 : (tensor<2x6x16x64xbf16>, tensor<2x6x77x64xbf16>, tensor<2x6x77x32xbf16>, tensor<1x1x16x77xi1>) -> tensor<2x6x16x32xbf16>
  return %1 : tensor<2x6x16x32xbf16>
}

// -----

// With and without bias, strided, grouped, and with a dynamic batch.
// CHECK-LABEL: func.func @conv2d
// CHECK-SAME: (%[[X:.*]]: tensor<?x64x64x4xf32>, %[[W:.*]]: tensor<3x3x4x320xf32>, %[[B:.*]]: tensor<320xf32>, %[[G:.*]]: tensor<3x3x2x8xf32>)
// CHECK: sd.conv2d %[[X]], %[[W]] bias %[[B]] strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<?x64x64x4xf32>, tensor<3x3x4x320xf32>, tensor<320xf32>) -> tensor<?x32x32x320xf32>
// CHECK: sd.conv2d %[[X]], %[[W]] strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<?x64x64x4xf32>, tensor<3x3x4x320xf32>) -> tensor<?x62x62x320xf32>
// CHECK: sd.conv2d %[[X]], %[[G]] strides = [1, 2] padding = [1, 1, 0, 1] groups = 2 : (tensor<?x64x64x4xf32>, tensor<3x3x2x8xf32>) -> tensor<?x64x32x8xf32>
func.func @conv2d(%x: tensor<?x64x64x4xf32>, %w: tensor<3x3x4x320xf32>, %b: tensor<320xf32>, %g: tensor<3x3x2x8xf32>) -> tensor<?x32x32x320xf32> {
  %0 = sd.conv2d %x, %w bias %b strides = [2, 2] padding = [1, 1, 1, 1] groups = 1 : (tensor<?x64x64x4xf32>, tensor<3x3x4x320xf32>, tensor<320xf32>) -> tensor<?x32x32x320xf32>
  %1 = sd.conv2d %x, %w strides = [1, 1] padding = [0, 0, 0, 0] groups = 1 : (tensor<?x64x64x4xf32>, tensor<3x3x4x320xf32>) -> tensor<?x62x62x320xf32>
  %2 = sd.conv2d %x, %g strides = [1, 2] padding = [1, 1, 0, 1] groups = 2 : (tensor<?x64x64x4xf32>, tensor<3x3x2x8xf32>) -> tensor<?x64x32x8xf32>
  return %0 : tensor<?x32x32x320xf32>
}

// -----

// CHECK-LABEL: func.func @upsample_nearest
// CHECK-SAME: (%[[X:.*]]: tensor<?x16x16x320xf32>)
// CHECK: sd.upsample_nearest %[[X]] scale = [2, 2] : (tensor<?x16x16x320xf32>) -> tensor<?x32x32x320xf32>
// CHECK: sd.upsample_nearest %[[X]] scale = [1, 3] : (tensor<?x16x16x320xf32>) -> tensor<?x16x48x320xf32>
func.func @upsample_nearest(%x: tensor<?x16x16x320xf32>) -> tensor<?x32x32x320xf32> {
  %0 = sd.upsample_nearest %x scale = [2, 2] : (tensor<?x16x16x320xf32>) -> tensor<?x32x32x320xf32>
  %1 = sd.upsample_nearest %x scale = [1, 3] : (tensor<?x16x16x320xf32>) -> tensor<?x16x48x320xf32>
  return %0 : tensor<?x32x32x320xf32>
}

// -----

// CHECK-LABEL: func.func @constant_iota
// CHECK: %[[C:.*]] = sd.constant dense<1.000000e+00> : tensor<384xf32>
// CHECK: %[[D:.*]] = sd.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
// CHECK: %[[I:.*]] = sd.iota dim = 1 : tensor<4x8xf32>
// CHECK: return %[[C]], %[[D]], %[[I]]
func.func @constant_iota() -> (tensor<384xf32>, tensor<2xbf16>, tensor<4x8xf32>) {
  %c = sd.constant dense<1.0> : tensor<384xf32>
  %d = sd.constant dense<[1.0, 2.0]> : tensor<2xbf16>
  %i = sd.iota dim = 1 : tensor<4x8xf32>
  return %c, %d, %i : tensor<384xf32>, tensor<2xbf16>, tensor<4x8xf32>
}

// -----

// Default distribution parameters are not printed.
// CHECK-LABEL: func.func @rng
// CHECK: sd.rng_normal seed = 0 : tensor<8x4xf32>
// CHECK: sd.rng_normal seed = 7 {mean = 1.000000e+00 : f64, stddev = 2.000000e-02 : f64} : tensor<8x4xbf16>
// CHECK: sd.rng_uniform seed = 1 : tensor<8xf32>
// CHECK: sd.rng_uniform seed = -3 {high = 5.000000e-01 : f64, low = -5.000000e-01 : f64} : tensor<8xf32>
func.func @rng() -> tensor<8x4xf32> {
  %0 = sd.rng_normal seed = 0 : tensor<8x4xf32>
  %1 = sd.rng_normal seed = 7 {mean = 1.0, stddev = 0.02} : tensor<8x4xbf16>
  %2 = sd.rng_uniform seed = 1 {low = 0.0, high = 1.0} : tensor<8xf32>
  %3 = sd.rng_uniform seed = -3 {low = -0.5, high = 0.5} : tensor<8xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// The offsets form (after sd-partition): a device's block of the global
// random tensor.
// CHECK-LABEL: func.func @rng_offsets
// CHECK-SAME: (%[[A:.*]]: tensor<f32>, %[[B:.*]]: tensor<f32>)
// CHECK: sd.rng_normal seed = 3 offsets(%[[A]], %[[B]]) global_shape = [8, 4] : tensor<4x4xf32>
// CHECK: sd.rng_uniform seed = 3 offsets(%[[A]]) global_shape = [8] {high = 2.000000e+00 : f64} : tensor<2xf32>
func.func @rng_offsets(%a: tensor<f32>, %b: tensor<f32>) -> tensor<4x4xf32> {
  %0 = sd.rng_normal seed = 3 offsets(%a, %b) global_shape = [8, 4] : tensor<4x4xf32>
  %1 = sd.rng_uniform seed = 3 offsets(%a) global_shape = [8] {low = 0.0, high = 2.0} : tensor<2xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// The loss is an f32 scalar, also of bf16 operands.
// CHECK-LABEL: func.func @mse_loss
// CHECK-SAME: (%[[P:.*]]: tensor<?x8x8x4xbf16>, %[[T:.*]]: tensor<?x8x8x4xbf16>) -> tensor<f32>
// CHECK: %[[L:.*]] = sd.mse_loss %[[P]], %[[T]] : tensor<?x8x8x4xbf16>
// CHECK: return %[[L]] : tensor<f32>
func.func @mse_loss(%p: tensor<?x8x8x4xbf16>, %t: tensor<?x8x8x4xbf16>) -> tensor<f32> {
  %l = sd.mse_loss %p, %t : tensor<?x8x8x4xbf16>
  return %l : tensor<f32>
}

// -----

// Logical, mesh and both; the constraint may carry sd.name.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
// CHECK-LABEL: func.func @sharding_constraint
// CHECK-SAME: (%[[X:.*]]: tensor<?x256x384xf32>)
// CHECK: %[[A:.*]] = sd.sharding_constraint %[[X]] logical = <[batch, _, embed]> : tensor<?x256x384xf32>
// CHECK: %[[B:.*]] = sd.sharding_constraint %[[A]] sharding = <@mesh, [{"data"}, {?}, {"tensor"}p0]> : tensor<?x256x384xf32>
// CHECK: sd.sharding_constraint %[[B]] sharding = <@mesh, [{"data", ?}, {}, {}], replicated = ["tensor"]> logical = <[batch, activation_length, _]> {sd.name = "attn_output"} : tensor<?x256x384xf32>
func.func @sharding_constraint(%x: tensor<?x256x384xf32>) -> tensor<?x256x384xf32> {
  %a = sd.sharding_constraint %x logical = <[batch, _, embed]> : tensor<?x256x384xf32>
  %b = sd.sharding_constraint %a sharding = <@mesh, [{"data"}, {?}, {"tensor"}p0]> : tensor<?x256x384xf32>
  %c = sd.sharding_constraint %b sharding = <@mesh, [{"data", ?}, {}, {}], replicated = ["tensor"]> logical = <[batch, activation_length, _]> {sd.name = "attn_output"} : tensor<?x256x384xf32>
  return %c : tensor<?x256x384xf32>
}

// -----

// Tiled attention, its two backward ops, and block sizes: those left out
// are 512 and are left out when printed.
// CHECK-LABEL: func.func @flash_attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x6x100x64xf32>, %[[K:.*]]: tensor<2x6x80x64xf32>, %[[V:.*]]: tensor<2x6x80x32xf32>, %[[M:.*]]: tensor<1x6x100x80xi1>, %[[DO:.*]]: tensor<2x6x100x32xf32>)
// CHECK: %[[O:.*]], %[[LSE:.*]] = sd.flash_attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale = 1.250000e-01 blocks = <block_q = 64, block_kv_compute = 32, block_kv = 128, use_fused_bwd_kernel = true> : (tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>, tensor<1x6x100x80xi1>) -> (tensor<2x6x100x32xf32>, tensor<2x6x100xf32>)
// CHECK: sd.flash_attention_dq %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] mask %[[M]] scale = 1.250000e-01 blocks = <> : {{.*}} -> tensor<2x6x100x64xf32>
// CHECK: sd.flash_attention_dkv %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] scale = 1.250000e-01 blocks = <block_kv_dkv = 16> : {{.*}} -> (tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>)
func.func @flash_attention(%q: tensor<2x6x100x64xf32>, %k: tensor<2x6x80x64xf32>, %v: tensor<2x6x80x32xf32>, %m: tensor<1x6x100x80xi1>, %do: tensor<2x6x100x32xf32>) -> (tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>) {
  %o, %lse = sd.flash_attention %q, %k, %v mask %m scale = 0.125 blocks = <block_q = 64, block_kv_compute = 32, block_kv = 128, use_fused_bwd_kernel = true> : (tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>, tensor<1x6x100x80xi1>) -> (tensor<2x6x100x32xf32>, tensor<2x6x100xf32>)
  %dq = sd.flash_attention_dq %q, %k, %v, %o, %lse, %do mask %m scale = 0.125 blocks = <block_q = 512> : (tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>, tensor<2x6x100x32xf32>, tensor<2x6x100xf32>, tensor<2x6x100x32xf32>, tensor<1x6x100x80xi1>) -> tensor<2x6x100x64xf32>
  %dk, %dv = sd.flash_attention_dkv %q, %k, %v, %o, %lse, %do scale = 0.125 blocks = <block_kv_dkv = 16> : (tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>, tensor<2x6x100x32xf32>, tensor<2x6x100xf32>, tensor<2x6x100x32xf32>) -> (tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>)
  return %dq, %dk, %dv : tensor<2x6x100x64xf32>, tensor<2x6x80x64xf32>, tensor<2x6x80x32xf32>
}

// -----

// Context-parallel tiled attention and its backward.
// CHECK-LABEL: func.func @flash_attention_context_parallel
// CHECK: sd.flash_attention %{{.*}}, %{{.*}}, %{{.*}} scale = 5.000000e-01 blocks = <block_q = 8> context_parallel = ring : {{.*}}
// CHECK: sd.flash_attention_dkv {{.*}} scale = 5.000000e-01 blocks = <> context_parallel = ulysses : {{.*}}
// CHECK: sd.flash_attention_dq {{.*}} scale = 5.000000e-01 blocks = <> context_parallel = ulysses_ring ulysses_shards = 2 : {{.*}}
func.func @flash_attention_context_parallel(%q: tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  %o, %lse = sd.flash_attention %q, %q, %q scale = 0.5 blocks = <block_q = 8> context_parallel = ring : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>)
  %dk, %dv = sd.flash_attention_dkv %q, %q, %q, %o, %lse, %q scale = 0.5 blocks = <> context_parallel = ulysses : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
  %dq = sd.flash_attention_dq %q, %q, %q, %o, %lse, %q scale = 0.5 blocks = <> context_parallel = ulysses_ring ulysses_shards = 2 : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  %sum = sd.add %dk, %dq : tensor<1x2x16x8xf32>
  return %o, %sum : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}

// -----

// Uneven shards are valid: 6 over data=4 is padded to blocks of 2. A
// partitioned function names the global shape of its padded blocks.
sd.mesh @mesh = <["data"=4]>
// CHECK-LABEL: func.func @padded_sharding
// CHECK-SAME: sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>
func.func @padded_sharding(%x: tensor<6x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) {
  return
}
// CHECK-LABEL: func.func @padded_blocks
// CHECK-SAME: sd.global_shape = array<i64: 6, 4>
// CHECK-SAME: attributes {sd.padding = array<i64: 1, 8>}
func.func @padded_blocks(%x: tensor<2x4xf32> {sd.local_sharding = #sd.sharding<@mesh, [{"data"}, {}]>, sd.global_shape = array<i64: 6, 4>}) attributes {sd.padding = array<i64: 1, 8>} {
  return
}

// -----

// AdamW's update, with and without weight decay.
// CHECK-LABEL: func.func @adamw
// CHECK: sd.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr = %{{.*}} corrections = (%{{.*}}, %{{.*}}) beta1 = (%{{.*}}, %{{.*}}) beta2 = (%{{.*}}, %{{.*}}) eps = %{{.*}} weight_decay = %{{.*}} : tensor<4x8xf32>
// CHECK: sd.adamw {{.*}} eps = %{{[^ ]*}} : tensor<4x8xbf16>
func.func @adamw(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %mu: tensor<4x8xf32>, %nu: tensor<4x8xf32>,
                 %q: tensor<4x8xbf16>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>) {
  %p1, %mu1, %nu1 = sd.adamw %p, %g, %mu, %nu lr = %s corrections = (%s, %s) beta1 = (%s, %s) beta2 = (%s, %s) eps = %s weight_decay = %s : tensor<4x8xf32>
  %q1, %qm, %qv = sd.adamw %q, %q, %q, %q lr = %s corrections = (%s, %s) beta1 = (%s, %s) beta2 = (%s, %s) eps = %s : tensor<4x8xbf16>
  return %p1, %mu1, %nu1, %q1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>
}
