// RUN: sdopt %s -sd-build-train-step="hyperparameter-inputs learning-rate=0.5 lr-schedule=linear lr-schedule-steps=10 warmup-steps=2" | FileCheck %s
// RUN: sdopt %s -sd-build-train-step="hyperparameter-inputs learning-rate=0.25 lr-schedule=linear lr-schedule-steps=20 warmup-steps=3" | FileCheck %s

// With hyperparameter-inputs the optimizer's values are the step's last
// argument, one element each (sd/Passes/Passes.h's Hyperparameter), and no
// constant holds them: two settings give the same program.
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>},
                     %x: tensor<4xf32> {sd.role = #sd.input<latents>}) -> (tensor<f32>, tensor<4xf32>) {
  %l = sd.mse_loss %w, %x {sd.vjp_group = 0 : i64} : tensor<4xf32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %g = sd.broadcast_in_dim %seed dims = [] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<f32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {sd.role = #sd.input<step>}, %[[H:[a-z0-9]+]]: tensor<15xf32> {sd.role = #sd.input<hyperparameters>})
// CHECK: %[[LR1:.*]] = sd.slice %[[H]] start = [0] limit = [1] strides = [1] : (tensor<15xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[LR:.*]] = sd.reshape %[[LR1]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT: sd.slice %[[H]] start = [1] limit = [2]
// The learning rate after warm-up: lr·min(1, t/W)·(1 − p).
// CHECK: %[[RAMP:.*]] = sd.div %{{.*}}, %{{.*}} {sd.backward} : tensor<f32>
// CHECK: sd.mul %[[LR]], %{{.*}} {sd.backward} : tensor<f32>
// CHECK-NOT: dense<5.000000e-01>
// CHECK-NOT: dense<2.500000e-01>
// CHECK-NOT: dense<2.000000e+00>
// CHECK-NOT: dense<3.000000e+00>
// CHECK-NOT: dense<9.000000e-01>
// CHECK: return
