// A linear model: the gradient of w contracts the batch of x with the
// cotangent of y; the input x gets none.
// GRAD-LABEL: func.func @loss_grad
// GRAD-SAME: (%[[W:[a-z0-9]+]]: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}, %[[X:[a-z0-9]+]]: tensor<8x4xf32> {sd.role = #sd.input<latents>}, %[[T:[a-z0-9]+]]: tensor<8x3xf32> {sd.role = #sd.input<noise>}) -> (tensor<f32>, tensor<4x3xf32>)
// GRAD: %[[Y:.*]] = sd.dot_general %[[X]], %[[W]]
// GRAD: %[[L:.*]] = sd.mse_loss %[[Y]], %[[T]]
// GRAD: %[[ONE:.*]] = sd.constant {sd.backward} dense<1.000000e+00> : tensor<f32>
// GRAD: %[[G:.*]] = sd.dot_general %[[DY:.*]], %[[X]] batch = [] x [] contract = [0] x [0] {sd.backward}
// GRAD-NEXT: %[[DW:.*]] = sd.transpose %[[G]] permutation = [1, 0] {sd.backward}
// GRAD-NEXT: return %[[L]], %[[DW]] : tensor<f32>, tensor<4x3xf32>

// The training step: parameters, their two moments, the inputs and the
// step count in; the loss, new parameters and new moments out.
// TRAIN-LABEL: func.func @train_step
// TRAIN-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>}
// TRAIN-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", mu>}
// TRAIN-SAME: %{{.*}}: tensor<4x3xf32> {sd.role = #sd.optimizer_state<"w", nu>}
// TRAIN-SAME: %{{.*}}: tensor<8x4xf32> {sd.role = #sd.input<latents>}
// TRAIN-SAME: %[[STEP:[a-z0-9]+]]: tensor<f32> {sd.role = #sd.input<step>}
// TRAIN-SAME: -> (tensor<f32>, tensor<4x3xf32> {sd.aliases = 0 : i64}, tensor<4x3xf32> {sd.aliases = 1 : i64}, tensor<4x3xf32> {sd.aliases = 2 : i64})
// TRAIN: sd.add %[[STEP]], %{{.*}} {sd.backward} : tensor<f32>
// TRAIN: sd.pow
// TRAIN: sd.sqrt
// TRAIN: sd.sub {{.*}} {sd.backward} : tensor<4x3xf32>
// TRAIN: return
// TRAIN-NOT: func.func @loss
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"w", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>},
                %t: tensor<8x3xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %l = sd.mse_loss %y, %t : tensor<8x3xf32>
  return %l : tensor<f32>
}
