// RUN: not sdopt %s -split-input-file -sd-min-snr-weighting="gamma=0" 2>&1 | FileCheck %s --check-prefix=GAMMA
// RUN: not sdopt %s -split-input-file -sd-min-snr-weighting 2>&1 | FileCheck %s

// GAMMA: error: sd-min-snr-weighting: gamma must be positive, not 0

// CHECK: error: min-SNR weighting (snr_gamma) is for epsilon and v_prediction models; @loss predicts flow, whose loss is weighted by its timestep sampling (timestep_sampling)
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<flow>} {
  %l = sd.mse_loss %x, %x : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: @loss has no sd.prediction_type: min-SNR weighting needs the model's noise schedule
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32> {
  %l = sd.mse_loss %x, %x : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: @loss has no #sd.input<timestep> argument: min-SNR weighting needs each sample's t
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %l = sd.mse_loss %x, %x : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: @loss has more than one timestep input (#1 and #2): min-SNR weighting needs one
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4xf32> {sd.role = #sd.input<timestep>},
                %u: tensor<4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %l = sd.mse_loss %x, %x : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: @loss's timestep input #1 is 'tensor<4x1xf32>', not one value per sample
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4x1xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %l = sd.mse_loss %x, %x : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: @loss does not return an sd.mse_loss: min-SNR weighting weights its per-sample terms
func.func @loss(%x: tensor<4x3xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %l = sd.reduce_mean %x dims = [0, 1] : (tensor<4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: 'sd.mse_loss' op compares 'tensor<3x4xf32>', whose leading dimension is not the batch of the timestep input 'tensor<4xf32>': min-SNR weighting needs batch-major values
func.func @loss(%x: tensor<3x4xf32> {sd.role = #sd.input<latents>},
                %t: tensor<4xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %l = sd.mse_loss %x, %x : tensor<3x4xf32>
  return %l : tensor<f32>
}

// -----

// CHECK: error: sd-min-snr-weighting weights @loss, and the module has none
func.func @denoise(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  return %x : tensor<4x3xf32>
}
