// RUN: sdopt %s -sd-add-lora="rank=2 alpha=4 targets=qkv,blocks.0.proj" | FileCheck %s
// RUN: sdopt %s -sd-add-lora="rank=2 target-regex=blocks\.1\..*" | FileCheck %s --check-prefix=REGEX
// RUN: sdopt %s -sd-add-lora="rank=2 targets=proj" -sd-differentiate -sd-build-train-step | FileCheck %s --check-prefix=STEP
// RUN: sdopt %s -sd-add-lora="rank=2 target-regex=blocks\.\d\.qkv" | FileCheck %s --check-prefix=DIGIT

// A block function called twice; its weights: a projection [out, in] and a
// fused one [2, out, in] (stored [6, 4], as DiT's qkv).
func.func private @block(%x: tensor<?x4xf32>, %w: tensor<3x4xf32>, %v: tensor<2x3x4xf32>) -> tensor<?x2x3xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [1] : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
  %z = sd.dot_general %x, %v batch = [] x [] contract = [1] x [2] : (tensor<?x4xf32>, tensor<2x3x4xf32>) -> tensor<?x2x3xf32>
  %r = sd.reshape %y : (tensor<?x3xf32>) -> tensor<?x1x3xf32>
  %rb = sd.broadcast_in_dim %r dims = [0, 1, 2] : (tensor<?x1x3xf32>) -> tensor<?x2x3xf32>
  %s = sd.add %z, %rb : tensor<?x2x3xf32>
  return %s : tensor<?x2x3xf32>
}
func.func @loss(%w0: tensor<3x4xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.proj.weight", zeros>},
                %v0: tensor<2x3x4xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.qkv.weight", zeros, stored[6, 4]>},
                %w1: tensor<3x4xf32> {sd.role = #sd.param<"blocks.1.proj.weight", zeros>},
                %v1: tensor<2x3x4xf32> {sd.role = #sd.param<"blocks.1.qkv.weight", zeros, stored[6, 4]>},
                %x: tensor<?x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %a = func.call @block(%x, %w0, %v0) : (tensor<?x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> tensor<?x2x3xf32>
  %c = func.call @block(%x, %w1, %v1) : (tensor<?x4xf32>, tensor<3x4xf32>, tensor<2x3x4xf32>) -> tensor<?x2x3xf32>
  %s = sd.add %a, %c : tensor<?x2x3xf32>
  %l = sd.mse_loss %s, %s : tensor<?x2x3xf32>
  return %l : tensor<f32>
}

// Block 0 targets both weights, block 1 its qkv alone: one clone of the
// callee for each, the adapters last; the products gain x·(s·A)ᵀ·Bᵀ with
// s = alpha / r = 2. The original callee, no longer called, is gone.
// CHECK-LABEL: func.func private @block_lora(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<?x4xf32>, %[[W:[a-z0-9]+]]: tensor<3x4xf32>, %[[V:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[WA:[a-z0-9]+]]: tensor<2x4xf32>, %[[WB:[a-z0-9]+]]: tensor<3x2xf32>, %[[VA:[a-z0-9]+]]: tensor<2x4xf32>, %[[VB:[a-z0-9]+]]: tensor<2x3x2xf32>)
// CHECK: %[[S:.*]] = sd.constant dense<2.000000e+00> : tensor<2x4xf32>
// CHECK-NEXT: %[[SA:.*]] = sd.mul %[[WA]], %[[S]]
// CHECK-NEXT: %[[H:.*]] = sd.dot_general %[[X]], %[[SA]] batch = [] x [] contract = [1] x [1] : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x2xf32>
// CHECK-NEXT: %[[D:.*]] = sd.dot_general %[[H]], %[[WB]] batch = [] x [] contract = [1] x [1] : (tensor<?x2xf32>, tensor<3x2xf32>) -> tensor<?x3xf32>
// CHECK-NEXT: %[[Y:.*]] = sd.dot_general %[[X]], %[[W]]
// CHECK-NEXT: %[[Y2:.*]] = sd.add %[[Y]], %[[D]]
// CHECK: sd.dot_general %{{.*}}, %[[VB]] batch = [] x [] contract = [1] x [2] : (tensor<?x2xf32>, tensor<2x3x2xf32>) -> tensor<?x2x3xf32>
// CHECK: sd.reshape %[[Y2]]
// CHECK-LABEL: func.func private @block_lora_0(
// CHECK-SAME: tensor<?x4xf32>, %{{.*}}: tensor<3x4xf32>, %{{.*}}: tensor<2x3x4xf32>, %{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<2x3x2xf32>)
// CHECK-NOT: func.func private @block(
// The adapters follow their weight, which is frozen like every other
// parameter; A is uniform in ±1/sqrt(in), B zero, each along its weight's
// logical axes (the rank `_`).
// CHECK-LABEL: func.func @loss(
// CHECK-SAME: {sd.frozen, sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"blocks.0.proj.weight", zeros>}
// CHECK-SAME: tensor<2x4xf32> {sd.logical_axes = #sd.logical_axes<[_, embed]>, sd.role = #sd.param<"blocks.0.proj.lora_A.weight", uniform(0.5)>}
// CHECK-SAME: tensor<3x2xf32> {sd.logical_axes = #sd.logical_axes<[mlp, _]>, sd.role = #sd.param<"blocks.0.proj.lora_B.weight", zeros>}
// CHECK-SAME: {sd.frozen, sd.logical_axes = #sd.logical_axes<[_, heads, embed]>, sd.role = #sd.param<"blocks.0.qkv.weight", zeros, stored[6, 4]>}
// CHECK-SAME: tensor<2x3x2xf32> {sd.logical_axes = #sd.logical_axes<[_, heads, _]>, sd.role = #sd.param<"blocks.0.qkv.lora_B.weight", zeros, stored[6, 2]>}
// CHECK-SAME: {sd.frozen, sd.role = #sd.param<"blocks.1.proj.weight", zeros>}
// CHECK: call @block_lora(
// CHECK: call @block_lora_0(

// REGEX-LABEL: func.func @loss(
// REGEX-NOT: blocks.0.proj.lora_A
// REGEX-SAME: "blocks.1.proj.lora_A.weight"
// REGEX-SAME: "blocks.1.qkv.lora_A.weight"

// Python's \d (PEFT's regular expressions are Python's) is a digit.
// DIGIT-LABEL: func.func @loss(
// DIGIT-NOT: proj.lora_A
// DIGIT-SAME: "blocks.0.qkv.lora_A.weight"
// DIGIT-NOT: proj.lora_A
// DIGIT-SAME: "blocks.1.qkv.lora_A.weight"

// The step trains the adapters alone: moments for four tensors.
// STEP-LABEL: func.func @train_step(
// STEP-COUNT-4: sd.role = #sd.optimizer_state<"blocks.{{[01]}}.proj.lora_{{[AB]}}.weight", mu>
// STEP-NOT: #sd.optimizer_state<"blocks.0.proj.weight"
