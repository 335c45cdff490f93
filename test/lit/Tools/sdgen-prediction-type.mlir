// --prediction-type chooses the regression target of @loss, overriding the
// preset's (flow for the DiT presets, epsilon for dit-digits), and @loss
// names it in sd.prediction_type. Epsilon and v share the cosine schedule
// x_t = cos(πt/2)·x0 + sin(πt/2)·noise.

// v_prediction: the target is v = cos(πt/2)·noise − sin(πt/2)·x0, from
// the same cos and sin as x_t.
// RUN: sdgen --preset=dit-tiny --prediction-type=v_prediction 2>/dev/null | FileCheck %s --check-prefix=V
// V-LABEL: func.func @loss
// V-SAME: %[[X0:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// V-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// V-SAME: %[[T:[a-z0-9]+]]: tensor<?xf32> {sd.logical_axes = #sd.logical_axes<[batch]>, sd.role = #sd.input<timestep>}
// V-SAME: attributes {sd.default_batch = 8 : i64, sd.prediction_type = #sd.prediction<v_prediction>}
// V: %[[HALF_PI:.*]] = sd.constant dense<1.57079637> : tensor<f32>
// V: %[[HALF_PIS:.*]] = sd.broadcast_in_dim %[[HALF_PI]] dims = [] : (tensor<f32>) -> tensor<?xf32>
// V: %[[ANGLE:.*]] = sd.mul %[[T]], %[[HALF_PIS]] : tensor<?xf32>
// V: %[[COS:.*]] = sd.cos %[[ANGLE]] : tensor<?xf32>
// V: %[[COS_B:.*]] = sd.broadcast_in_dim %[[COS]] dims = [0] : (tensor<?xf32>) -> tensor<?x32x32x4xf32>
// V: %[[SIGNAL:.*]] = sd.mul %[[COS_B]], %[[X0]] : tensor<?x32x32x4xf32>
// V: %[[SIN:.*]] = sd.sin %[[ANGLE]] : tensor<?xf32>
// V: %[[SIN_B:.*]] = sd.broadcast_in_dim %[[SIN]] dims = [0] : (tensor<?xf32>) -> tensor<?x32x32x4xf32>
// V: %[[NOISED:.*]] = sd.mul %[[SIN_B]], %[[NOISE]] : tensor<?x32x32x4xf32>
// V: %[[XT:.*]] = sd.add %[[SIGNAL]], %[[NOISED]] : tensor<?x32x32x4xf32>
// V: %[[VN:.*]] = sd.mul %[[COS_B]], %[[NOISE]] : tensor<?x32x32x4xf32>
// V: %[[VX:.*]] = sd.mul %[[SIN_B]], %[[X0]] : tensor<?x32x32x4xf32>
// V: %[[TARGET:.*]] = sd.sub %[[VN]], %[[VX]] : tensor<?x32x32x4xf32>
// The network reads x_t; the loss compares its prediction with v.
// V: sd.reshape %[[XT]] : (tensor<?x32x32x4xf32>) -> tensor<?x16x2x16x2x4xf32>
// V: sd.mse_loss %{{.*}}, %[[TARGET]] : tensor<?x32x32x4xf32>

// epsilon: the same x_t, the target is the noise itself.
// RUN: sdgen --preset=dit-tiny --prediction-type=epsilon 2>/dev/null | FileCheck %s --check-prefix=EPS
// EPS-LABEL: func.func @loss
// EPS-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x32x32x4xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// EPS-SAME: sd.prediction_type = #sd.prediction<epsilon>
// EPS: sd.cos
// EPS: sd.sin
// EPS-NOT: sd.sub
// EPS: sd.mse_loss %{{.*}}, %[[NOISE]] : tensor<?x32x32x4xf32>

// flow overrides dit-digits' epsilon: x_t = x0 + t·(noise − x0), target
// noise − x0.
// RUN: sdgen --preset=dit-digits --prediction-type=flow 2>/dev/null | FileCheck %s --check-prefix=FLOW
// FLOW-LABEL: func.func @loss
// FLOW-SAME: %[[X0:[a-z0-9]+]]: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<latents>}
// FLOW-SAME: %[[NOISE:[a-z0-9]+]]: tensor<?x8x8x1xf32> {sd.logical_axes = #sd.logical_axes<[batch, _, _, _]>, sd.role = #sd.input<noise>}
// FLOW-SAME: sd.prediction_type = #sd.prediction<flow>
// FLOW-NOT: sd.cos
// FLOW: %[[TARGET:.*]] = sd.sub %[[NOISE]], %[[X0]] : tensor<?x8x8x1xf32>
// FLOW: sd.mse_loss %{{.*}}, %[[TARGET]] : tensor<?x8x8x1xf32>
// @denoise does not depend on the prediction type: it returns the network.
// FLOW-LABEL: func.func @denoise
// FLOW-NOT: sd.mse_loss
// FLOW: return %{{.*}} : tensor<?x8x8x1xf32>

// --loss is the older spelling of --prediction-type.
// RUN: sdgen --preset=dit-tiny --prediction-type=v_prediction 2>/dev/null | sed 's/--prediction-type=/--loss=/' > %t.v
// RUN: sdgen --preset=dit-tiny --loss=v_prediction 2>/dev/null | diff - %t.v
