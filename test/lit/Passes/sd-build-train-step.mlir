// RUN: sdopt %s -verify-diagnostics -sd-build-train-step | FileCheck %s
// RUN: sdopt %s -verify-diagnostics -sd-build-train-step="grad-accum=2" | FileCheck %s --check-prefix=ACCUM
// RUN: sdopt %s -verify-diagnostics -sd-build-train-step="max-grad-norm=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: sdopt %s -verify-diagnostics -sd-build-train-step="lr-schedule=cosine lr-schedule-steps=10 warmup-steps=2" | FileCheck %s --check-prefix=COSINE
// RUN: sdopt %s -verify-diagnostics -sd-build-train-step="lr-schedule=linear lr-schedule-steps=10" | FileCheck %s --check-prefix=LINEAR
// RUN: sdopt %s -verify-diagnostics -sd-build-train-step="max-grad-value=0.5 max-grad-norm=1.0" | FileCheck %s --check-prefix=VALUE

// A gradient function as sd-differentiate makes it: y = x·w + b, the mean
// as the loss, and a parameter the loss does not use (its gradient a zero
// outside every VJP group). b's first forward user is in group 1, w's in
// group 0.
func.func @loss_grad(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                     %b: tensor<3xf32> {sd.role = #sd.param<"b", zeros>},
                     %unused: tensor<2xf32> {sd.role = #sd.param<"unused", zeros>},
                     %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.vjp_group = 0 : i64} : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %bb = sd.broadcast_in_dim %b dims = [1] {sd.vjp_group = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>
  %z = sd.add %y, %bb {sd.vjp_group = 2 : i64} : tensor<8x3xf32>
  %l = sd.reduce_mean %z dims = [0, 1] {sd.vjp_group = 3 : i64} : (tensor<8x3xf32>) -> tensor<f32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %dz = sd.broadcast_in_dim %seed dims = [] {sd.backward, sd.vjp_group = 3 : i64} : (tensor<f32>) -> tensor<8x3xf32>
  %db = sd.reduce_sum %dz dims = [0] {sd.backward, sd.vjp_group = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
  %g = sd.dot_general %dz, %x batch = [] x [] contract = [0] x [0] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<8x3xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  %dw = sd.transpose %g permutation = [1, 0] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %zero = sd.constant {sd.backward} dense<0.000000e+00> : tensor<2xf32>
  return %l, %dw, %db, %zero : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>
}

// Without microbatches or clipping: the step's scalars follow the seed,
// each parameter is updated as soon as its gradient is complete (b after
// group 1, before group 0's dot_general; w after group 0), the unused one
// at the end.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:[a-z0-9]+]]: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}, %[[B:[a-z0-9]+]]: tensor<3xf32> {sd.role = #sd.param<"b", zeros>}, %[[U:[a-z0-9]+]]: tensor<2xf32> {sd.role = #sd.param<"unused", zeros>},
// CHECK-SAME: %[[MUW:[a-z0-9]+]]: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", mu>}, %{{.*}}: tensor<3xf32> {sd.role = #sd.optimizer_state<"b", mu>}, %{{.*}}: tensor<2xf32> {sd.role = #sd.optimizer_state<"unused", mu>},
// CHECK-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", nu>}, %{{.*}}: tensor<3xf32> {sd.role = #sd.optimizer_state<"b", nu>}, %{{.*}}: tensor<2xf32> {sd.role = #sd.optimizer_state<"unused", nu>},
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4xf32> {sd.role = #sd.input<latents>}, %[[STEP:[a-z0-9]+]]: tensor<f32> {sd.role = #sd.input<step>})
// CHECK-SAME: -> (tensor<f32>, tensor<4x3xf32> {sd.aliases = 0 : i64}, tensor<3xf32> {sd.aliases = 1 : i64}, tensor<2xf32> {sd.aliases = 2 : i64}, tensor<4x3xf32> {sd.aliases = 3 : i64}
// CHECK: %[[L:.*]] = sd.reduce_mean
// CHECK-NEXT: %[[SEED:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[ONE:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: sd.add %[[STEP]], %[[ONE]] {sd.backward} : tensor<f32>
// CHECK: %[[DZ:.*]] = sd.broadcast_in_dim %[[SEED]] dims = [] {sd.backward}
// CHECK-NEXT: %[[DB:.*]] = sd.reduce_sum %[[DZ]] dims = [0] {sd.backward}
// CHECK: %[[B1:.*]] = sd.constant {sd.backward} dense<0.899999976> : tensor<f32>
// CHECK-NEXT: %[[OMB1:.*]] = sd.constant {sd.backward} dense<1.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[B2:.*]] = sd.constant {sd.backward} dense<9.990000e-01> : tensor<f32>
// CHECK-NEXT: %[[OMB2:.*]] = sd.constant {sd.backward} dense<1.000000e-03> : tensor<f32>
// CHECK-NEXT: %[[EPS:.*]] = sd.constant {sd.backward} dense<9.99999993E-9> : tensor<f32>
// CHECK-NEXT: %[[WD:.*]] = sd.constant {sd.backward} dense<0.00999999977> : tensor<f32>
// CHECK-NEXT: %[[NEWB:.*]], %{{.*}}, %{{.*}} = sd.adamw %[[B]], %[[DB]], %{{.*}}, %{{.*}} lr = %[[LR:[^ ]*]] corrections = (%[[C1:[^,]*]], %[[C2:[^)]*]]) beta1 = (%[[B1]], %[[OMB1]]) beta2 = (%[[B2]], %[[OMB2]]) eps = %[[EPS]] weight_decay = %[[WD]] {sd.backward} : tensor<3xf32>
// CHECK-NEXT: %[[G:.*]] = sd.dot_general %[[DZ]], %[[X]] {{.*}} {sd.backward}
// CHECK-NEXT: %[[DW:.*]] = sd.transpose %[[G]] permutation = [1, 0] {sd.backward}
// The later updates share the scalars.
// CHECK-NEXT: %[[NEWW:.*]], %[[MW:.*]], %{{.*}} = sd.adamw %[[W]], %[[DW]], %[[MUW]], %{{.*}} lr = %[[LR]] corrections = (%[[C1]], %[[C2]]) beta1 = (%[[B1]], %[[OMB1]]) beta2 = (%[[B2]], %[[OMB2]]) eps = %[[EPS]] weight_decay = %[[WD]] {sd.backward} : tensor<4x3xf32>
// CHECK-NEXT: %[[Z:.*]] = sd.constant {sd.backward} dense<0.000000e+00> : tensor<2xf32>
// CHECK-NEXT: %[[NEWU:.*]], %{{.*}}, %{{.*}} = sd.adamw %[[U]], %[[Z]], {{.*}} : tensor<2xf32>
// CHECK-NEXT: return %[[L]], %[[NEWW]], %[[NEWB]], %[[NEWU]], %[[MW]],
// CHECK-NOT: sd.vjp_group
// CHECK-NOT: func.func @loss_grad

// Two microbatches: the input holds both; each gets the body, seeded with
// 1/2; gradients and losses are summed, the loss averaged, and the
// parameters updated at the end.
// ACCUM-LABEL: func.func @train_step
// ACCUM-SAME: %[[X:[a-z0-9]+]]: tensor<16x4xf32> {sd.role = #sd.input<latents>}
// ACCUM: %[[X0:.*]] = sd.slice %{{.*}} start = [0, 0, 0] limit = [8, 1, 4]
// ACCUM: %[[L0:.*]] = sd.reduce_mean
// ACCUM-NEXT: sd.constant {sd.backward} dense<5.000000e-01> : tensor<f32>
// ACCUM: %[[DW0:.*]] = sd.transpose
// ACCUM-NEXT: sd.reshape %[[X]]
// ACCUM-NEXT: sd.slice %{{.*}} start = [0, 1, 0] limit = [8, 2, 4]
// ACCUM: %[[L1:.*]] = sd.reduce_mean
// ACCUM-NEXT: sd.constant {sd.backward} dense<5.000000e-01> : tensor<f32>
// ACCUM: %[[DW1:.*]] = sd.transpose
// ACCUM-NEXT: sd.add %[[DW0]], %[[DW1]] {sd.backward, sd.gradient_sum} : tensor<4x3xf32>
// ACCUM-NEXT: sd.add %{{.*}}, %{{.*}} {sd.backward, sd.gradient_sum} : tensor<3xf32>
// ACCUM-NEXT: %[[SUM:.*]] = sd.add %[[L0]], %[[L1]] : tensor<f32>
// ACCUM-NEXT: %[[HALF:.*]] = sd.constant dense<5.000000e-01> : tensor<f32>
// ACCUM-NEXT: %[[L:.*]] = sd.mul %[[SUM]], %[[HALF]] : tensor<f32>
// ACCUM: return %[[L]],

// Clipping: the global norm of all gradients scales each of them before
// the update.
// CLIP-LABEL: func.func @train_step
// CLIP: %[[DB:.*]] = sd.reduce_sum %{{.*}} dims = [0] {sd.backward}
// CLIP: %[[DW:.*]] = sd.transpose
// CLIP-NEXT: %[[Z:.*]] = sd.constant {sd.backward} dense<0.000000e+00> : tensor<2xf32>
// CLIP: %[[NORM:.*]] = sd.sqrt %{{.*}} {sd.backward} : tensor<f32>
// CLIP-NEXT: %[[LIMIT:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// CLIP-NEXT: %[[MAX:.*]] = sd.max %[[NORM]], %[[LIMIT]] {sd.backward}
// CLIP-NEXT: %[[F:.*]] = sd.div %[[LIMIT]], %[[MAX]] {sd.backward}
// CLIP-NEXT: %[[FW:.*]] = sd.broadcast_in_dim %[[F]]
// CLIP-NEXT: sd.mul %[[DW]], %[[FW]] {sd.backward} : tensor<4x3xf32>
// CLIP: sd.add %{{.*}}, %{{.*}} {sd.backward} : tensor<f32>
// CLIP: return

// After warm-up the rate decays with p = clamp((step − W) / (S − W), 0, 1):
// a half cosine, or linearly.
// COSINE-LABEL: func.func @train_step
// COSINE: sd.min
// COSINE: %[[W:.*]] = sd.constant {sd.backward} dense<2.000000e+00> : tensor<f32>
// COSINE-NEXT: %[[SINCE:.*]] = sd.sub %[[STEP:[^,]*]], %[[W]]
// COSINE-NEXT: %[[SPAN:.*]] = sd.constant {sd.backward} dense<8.000000e+00> : tensor<f32>
// COSINE-NEXT: %[[P0:.*]] = sd.div %[[SINCE]], %[[SPAN]]
// COSINE-NEXT: %[[ZERO:.*]] = sd.constant {sd.backward} dense<0.000000e+00> : tensor<f32>
// COSINE-NEXT: %[[P1:.*]] = sd.max %[[P0]], %[[ZERO]]
// COSINE-NEXT: %[[ONE:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// COSINE-NEXT: %[[P:.*]] = sd.min %[[P1]], %[[ONE]]
// COSINE: %[[PI:.*]] = sd.constant {sd.backward} dense<3.14159274> : tensor<f32>
// COSINE-NEXT: %[[ANGLE:.*]] = sd.mul %[[P]], %[[PI]]
// COSINE-NEXT: %[[COS:.*]] = sd.cos %[[ANGLE]]
// COSINE: return
// LINEAR-LABEL: func.func @train_step
// LINEAR: %[[SPAN:.*]] = sd.constant {sd.backward} dense<1.000000e+01> : tensor<f32>
// LINEAR-NEXT: %[[P0:.*]] = sd.div %{{.*}}, %[[SPAN]]
// LINEAR: %[[P:.*]] = sd.min
// LINEAR-NEXT: %[[D:.*]] = sd.sub %{{.*}}, %[[P]]
// LINEAR-NEXT: sd.mul %{{.*}}, %[[D]]
// LINEAR-NOT: sd.cos
// LINEAR: return

// Values are clipped before the global norm is taken.
// VALUE-LABEL: func.func @train_step
// VALUE: %[[LOW:.*]] = sd.constant {sd.backward} dense<-5.000000e-01> : tensor<4x3xf32>
// VALUE-NEXT: %[[UP:.*]] = sd.max %{{.*}}, %[[LOW]]
// VALUE-NEXT: %[[HIGH:.*]] = sd.constant {sd.backward} dense<5.000000e-01> : tensor<4x3xf32>
// VALUE-NEXT: %[[CLIPPED:.*]] = sd.min %[[UP]], %[[HIGH]]
// VALUE: sd.mul %[[CLIPPED]], %[[CLIPPED]]
// VALUE: %[[NORM:.*]] = sd.sqrt
// VALUE: return
