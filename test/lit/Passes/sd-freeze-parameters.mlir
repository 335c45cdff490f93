// RUN: sdopt %s -sd-freeze-parameters="freeze=b*" | FileCheck %s
// RUN: sdopt %s -sd-freeze-parameters="trainable=w" | FileCheck %s
// RUN: sdopt %s -sd-freeze-parameters="freeze=b*" -sd-differentiate -sd-build-train-step="adam-weight-decay=0.5" | FileCheck %s --check-prefix=STEP

// y = x·w + b: freezing b (by `freeze`, or by training only `w`).
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                %b: tensor<3xf32> {sd.role = #sd.param<"bias", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %bb = sd.broadcast_in_dim %b dims = [1] : (tensor<3xf32>) -> tensor<8x3xf32>
  %z = sd.add %y, %bb : tensor<8x3xf32>
  %l = sd.reduce_mean %z dims = [0, 1] : (tensor<8x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @loss
// CHECK-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}
// CHECK-SAME: %{{.*}}: tensor<3xf32> {sd.frozen, sd.role = #sd.param<"bias", zeros>}

// The frozen parameter follows the trained one, gets no moments and is not
// returned: the step reads it and updates w alone.
// STEP-LABEL: func.func @train_step
// STEP-SAME: (%[[W:[a-z0-9]+]]: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}, %[[B:[a-z0-9]+]]: tensor<3xf32> {sd.frozen, sd.role = #sd.param<"bias", zeros>},
// STEP-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", mu>}, %{{.*}}: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", nu>},
// STEP-SAME: %{{.*}}: tensor<8x4xf32> {sd.role = #sd.input<latents>}, %{{.*}}: tensor<f32> {sd.role = #sd.input<step>})
// STEP-SAME: -> (tensor<f32>, tensor<4x3xf32> {sd.aliases = 0 : i64}, tensor<4x3xf32> {sd.aliases = 2 : i64}, tensor<4x3xf32> {sd.aliases = 3 : i64})
// STEP: sd.broadcast_in_dim %[[B]]
// STEP-NOT: sd.adamw %[[B]]
// STEP: sd.adamw %[[W]]
// STEP-NOT: sd.adamw
