// RUN: not sdopt %s -sd-freeze-parameters="freeze=x*" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not sdopt %s -sd-freeze-parameters="trainable=[" 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: not sdopt %s -sd-freeze-parameters="freeze=*" 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: not sdopt %s -sd-freeze-parameters="freeze=w trainable=w" 2>&1 | FileCheck %s --check-prefix=ALL

// NONE: error: freeze pattern 'x*' matches no parameter
// GLOB: error: trainable pattern '[' is not a glob pattern: invalid glob pattern, unmatched '['
// ALL: error: every parameter of @loss is frozen: there is nothing to train

func.func @loss(%w: tensor<4xf32> {sd.role = #sd.param<"w", zeros>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w : tensor<4xf32>
  return %l : tensor<f32>
}
