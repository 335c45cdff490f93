// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-differentiate="remat=SOMETIMES"
// RUN: not sdopt %s -sd-differentiate="remat=CUSTOM names-saved=no_such_value" 2>&1 | FileCheck %s --check-prefix=NAMES
// RUN: not sdopt %s -sd-differentiate="remat=FULL names-saved=hidden_states" 2>&1 | FileCheck %s --check-prefix=NOTCUSTOM

// expected-error @below {{unknown remat policy 'SOMETIMES'; expected one of NONE, FULL, MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM}}
module {
func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w : tensor<4xf32>
  return %l : tensor<f32>
}
}
// NAMES: remat policy CUSTOM names 'no_such_value', but no value of @loss is named so (sd.name)
// NOTCUSTOM: names_which_can_be_saved / names_which_can_be_offloaded only apply to remat policy CUSTOM, not FULL
