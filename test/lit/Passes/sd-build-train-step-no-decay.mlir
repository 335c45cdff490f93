// RUN: sdopt %s -sd-build-train-step="adam-weight-decay=0.25 no-decay=*bias,*norm*" | FileCheck %s
// RUN: not sdopt %s -sd-build-train-step="no-decay=[" 2>&1 | FileCheck %s --check-prefix=GLOB

// GLOB: error: no-decay pattern '[' is not a glob pattern

// AdamW's weight-decay mask: the weight decays (wd·p joins its direction),
// the bias and the norm's scale, whose names match no-decay, do not.
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"proj.weight", zeros>},
                     %b: tensor<4xf32> {sd.role = #sd.param<"proj.bias", zeros>},
                     %n: tensor<4xf32> {sd.role = #sd.param<"norm.weight", ones>},
                     %x: tensor<4xf32> {sd.role = #sd.input<latents>}) -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %l = sd.mse_loss %w, %x {sd.vjp_group = 0 : i64} : tensor<4xf32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %g = sd.broadcast_in_dim %seed dims = [] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<f32>) -> tensor<4xf32>
  %zero = sd.constant {sd.backward} dense<0.000000e+00> : tensor<4xf32>
  return %l, %g, %zero, %zero : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:[a-z0-9]+]]: tensor<4xf32> {sd.role = #sd.param<"proj.weight", zeros>}, %[[B:[a-z0-9]+]]: tensor<4xf32> {sd.role = #sd.param<"proj.bias", zeros>}, %[[N:[a-z0-9]+]]: tensor<4xf32> {sd.role = #sd.param<"norm.weight", ones>}
// CHECK: %[[WD:.*]] = sd.constant {sd.backward} dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: sd.adamw %[[W]], {{.*}} eps = %{{[^ ]*}} weight_decay = %[[WD]] {sd.backward}
// CHECK: sd.adamw %[[B]], {{.*}} eps = %{{[^ ]*}} {sd.backward}
// CHECK: sd.adamw %[[N]], {{.*}} eps = %{{[^ ]*}} {sd.backward}
