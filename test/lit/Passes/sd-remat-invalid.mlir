// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-remat="remat=CUSTOM names-saved=no_such_value"
// RUN: not sdopt %s -sd-remat="remat=FULL names-saved=hidden_states" 2>&1 | FileCheck %s --check-prefix=NOTCUSTOM
// RUN: not sdopt %s -sd-remat="remat=CUSTOM names-saved=h names-offloaded=h" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not sdopt %s -sd-remat="remat=SOMETIMES" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// A CUSTOM name that no value of the gradient function carries.
// expected-error @below {{remat policy CUSTOM names 'no_such_value', but no value of @loss_grad is named so (sd.name)}}
func.func @loss_grad(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> (tensor<f32>, tensor<4xf32>) {
  %h = sd.tanh %w {sd.layer = 1 : i64, sd.name = "h", sd.vjp_group = 0 : i64} : tensor<4xf32>
  %l = sd.mse_loss %h, %w {sd.vjp_group = 1 : i64} : tensor<4xf32>
  %seed = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
  %d = sd.mul %h, %h {sd.backward, sd.vjp_group = 0 : i64} : tensor<4xf32>
  return %l, %d : tensor<f32>, tensor<4xf32>
}

// NOTCUSTOM: error: names_which_can_be_saved / names_which_can_be_offloaded only apply to remat policy CUSTOM, not FULL
// BOTH: error: 'h' is both saved and offloaded
// UNKNOWN: for the --remat option: Cannot find option named 'SOMETIMES'!
