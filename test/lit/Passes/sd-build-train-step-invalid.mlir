// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-build-train-step="grad-accum=2"
// RUN: not sdopt %s -split-input-file -sd-build-train-step="grad-accum=0" 2>&1 | FileCheck %s --check-prefix=ACCUM

// ACCUM: error: grad-accum must be at least 1, not 0
// RUN: not sdopt %s -split-input-file -sd-build-train-step="lr-schedule=linear warmup-steps=5 lr-schedule-steps=5" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: lr-schedule=linear decays over lr-schedule-steps, which must be more than the warm-up's 5, not 5
// RUN: not sdopt %s -split-input-file -sd-build-train-step="max-grad-value=-1" 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: error: max-grad-value must not be negative, not -1

// expected-error @below {{sd-build-train-step needs a @loss_grad function (run sd-differentiate first)}}
module {
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w : tensor<4xf32>
  return %l : tensor<f32>
}
}

// -----

// One gradient per parameter, of the parameter's type.
// expected-error @below {{'func.func' op must return the loss and one gradient per trained #sd.param argument, not 'tensor<f32>'}}
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w {sd.vjp_group = 0 : i64} : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// The backward program starts with the seed.
// expected-error @below {{'func.func' op has no seed: run sd-differentiate to make it}}
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> (tensor<f32>, tensor<4xf32>) {
  %l = sd.mse_loss %w, %w {sd.vjp_group = 0 : i64} : tensor<4xf32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Microbatches split every input's batch dimension.
// expected-error @below {{grad-accum splits the batch, but input #1 is a scalar}}
func.func @loss_grad(%w: tensor<f32> {sd.role = #sd.param<"w", zeros>},
                     %t: tensor<f32> {sd.role = #sd.input<timestep>}) -> (tensor<f32>, tensor<f32>) {
  %l = sd.mul %w, %t {sd.vjp_group = 0 : i64} : tensor<f32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %d = sd.mul %seed, %t {sd.backward, sd.vjp_group = 0 : i64} : tensor<f32>
  return %l, %d : tensor<f32>, tensor<f32>
}

// -----

// Each forward op says which VJP group is its own.
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> (tensor<f32>, tensor<4xf32>) {
  // expected-error @below {{'sd.mse_loss' op has no sd.vjp_group: run sd-differentiate to make the gradient function}}
  %l = sd.mse_loss %w, %w : tensor<4xf32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %d = sd.broadcast_in_dim %seed dims = [] {sd.backward, sd.vjp_group = 0 : i64} : (tensor<f32>) -> tensor<4xf32>
  return %l, %d : tensor<f32>, tensor<4xf32>
}
