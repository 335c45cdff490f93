// RUN: sdopt %s -sd-min-snr-weighting="gamma=5" 2>/dev/null | FileCheck %s
// RUN: sdopt %s -sd-min-snr-weighting="gamma=5" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: sdopt %s -sd-min-snr-weighting="gamma=5" -sd-specialize-batch="batch=4" -sd-differentiate -sd-build-train-step | FileCheck %s --check-prefix=STEP
// RUN: sed 's/prediction<epsilon>/prediction<v_prediction>/' %s | sdopt -sd-min-snr-weighting="gamma=2" | FileCheck %s --check-prefix=V

// A batch-major epsilon loss: the mean squared error becomes each sample's
// error weighted by min(1, γ·tan²(πt/2)), averaged over the batch.
func.func @loss(%w: tensor<3xf32> {sd.role = #sd.param<"w", zeros>},
                %x: tensor<?x3xf32> {sd.role = #sd.input<latents>},
                %n: tensor<?x3xf32> {sd.role = #sd.input<noise>},
                %t: tensor<?xf32> {sd.role = #sd.input<timestep>}) -> tensor<f32>
    attributes {sd.prediction_type = #sd.prediction<epsilon>} {
  %wb = sd.broadcast_in_dim %w dims = [1] : (tensor<3xf32>) -> tensor<?x3xf32>
  %p = sd.mul %x, %wb : tensor<?x3xf32>
  %l = sd.mse_loss %p, %n : tensor<?x3xf32>
  return %l : tensor<f32>
}

// REMARK: remark: min-SNR loss weighting: each sample's mean squared error times min(SNR, γ)/SNR (epsilon), γ = 5
// CHECK-LABEL: func.func @loss
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x3xf32> {sd.role = #sd.input<latents>}, %[[N:[a-z0-9]+]]: tensor<?x3xf32> {sd.role = #sd.input<noise>}, %[[T:[a-z0-9]+]]: tensor<?xf32> {sd.role = #sd.input<timestep>}
// CHECK: %[[P:.*]] = sd.mul %[[X]]
// CHECK-NOT: sd.mse_loss
// CHECK: %[[HALF_PI:.*]] = sd.constant dense<1.57079637> : tensor<f32>
// CHECK: %[[HALF_PIS:.*]] = sd.broadcast_in_dim %[[HALF_PI]] dims = [] : (tensor<f32>) -> tensor<?xf32>
// CHECK: %[[ANGLE:.*]] = sd.mul %[[T]], %[[HALF_PIS]] : tensor<?xf32>
// CHECK: %[[SIN:.*]] = sd.sin %[[ANGLE]]
// CHECK: %[[COS:.*]] = sd.cos %[[ANGLE]]
// CHECK: %[[SIN2:.*]] = sd.mul %[[SIN]], %[[SIN]]
// CHECK: %[[COS2:.*]] = sd.mul %[[COS]], %[[COS]]
// CHECK: sd.constant dense<5.000000e+00> : tensor<f32>
// CHECK: %[[GSIN2:.*]] = sd.mul %{{.*}}, %[[SIN2]]
// CHECK: %[[RATIO:.*]] = sd.div %[[GSIN2]], %[[COS2]]
// CHECK: sd.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[W:.*]] = sd.min %{{.*}}, %[[RATIO]] : tensor<?xf32>
// CHECK: %[[D:.*]] = sd.sub %[[P]], %[[N]] : tensor<?x3xf32>
// CHECK: %[[SQ:.*]] = sd.mul %[[D]], %[[D]]
// CHECK: %[[PER:.*]] = sd.reduce_mean %[[SQ]] dims = [1] : (tensor<?x3xf32>) -> tensor<?xf32>
// CHECK: %[[WEIGHTED:.*]] = sd.mul %[[PER]], %[[W]]
// CHECK: %[[LOSS:.*]] = sd.reduce_mean %[[WEIGHTED]] dims = [0] : (tensor<?xf32>) -> tensor<f32>
// CHECK: return %[[LOSS]]

// v_prediction: min(SNR, γ)/(SNR + 1) = min(cos², γ·sin²).
// V-LABEL: func.func @loss
// V: %[[COS:[0-9]+]] = sd.cos
// V: %[[SIN2:[0-9]+]] = sd.mul
// V: %[[COS2:[0-9]+]] = sd.mul %[[COS]], %[[COS]]
// V: sd.constant dense<2.000000e+00> : tensor<f32>
// V: %[[GSIN2:[0-9]+]] = sd.mul %{{[0-9]+}}, %[[SIN2]]
// V-NOT: sd.div
// V: sd.min %[[COS2]], %[[GSIN2]] : tensor<?xf32>

// The weighted loss differentiates and builds a training step like the
// plain one.
// STEP-LABEL: func.func @train_step
// STEP: sd.sin
// STEP: sd.min
// STEP: sd.reduce_mean {{.*}} dims = [0] : (tensor<4xf32>) -> tensor<f32>
// STEP: return
