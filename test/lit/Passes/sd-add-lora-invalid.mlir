// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-add-lora="rank=2 targets=proj"
// RUN: not sdopt %s -split-input-file -sd-add-lora="rank=0 targets=proj" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not sdopt %s -split-input-file -sd-add-lora="rank=2" 2>&1 | FileCheck %s --check-prefix=TARGETS
// RUN: not sdopt %s -split-input-file -sd-add-lora="rank=2 targets=proj,fc9" 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: not sdopt %s -split-input-file -sd-add-lora="rank=2 target-regex=(" 2>&1 | FileCheck %s --check-prefix=REGEX

// RANK: error: lora-rank must be positive, not 0
// TARGETS: error: sd-add-lora needs target modules (targets or target-regex)
// UNUSED: error: LoRA target module 'fc9' matches no parameter
// REGEX: error: target-regex '(' is not a regular expression

// A target used by another op than a product or a call.
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"proj.weight", zeros>}) -> tensor<f32> {
  // expected-error @below {{uses LoRA target proj.weight, which only products (sd.dot_general) and calls may use}}
  %l = sd.mse_loss %w, %w : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// A product that contracts the weight's output features.
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"proj.weight", zeros>},
                %x: tensor<8x4xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  // expected-error @below {{uses LoRA target proj.weight in a product that does not contract its last dimension (its input features) alone: it is not a Linear layer's weight}}
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  %l = sd.mse_loss %y, %y : tensor<8x3xf32>
  return %l : tensor<f32>
}

// -----

// A conv's weight stored [out, in, kh, kw] is not a Linear's.
// expected-error @below {{LoRA target "proj.weight" of type 'tensor<4x12xf32>' is not a Linear layer's weight [out, in]}}
func.func @loss(%w: tensor<4x12xf32> {sd.role = #sd.param<"proj.weight", zeros, stored[4, 3, 2, 2]>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w : tensor<4x12xf32>
  return %l : tensor<f32>
}

// -----

// Adapters once only.
// expected-error @below {{already has LoRA adapters (parameter proj.lora_A.weight)}}
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"proj.weight", zeros>},
                %a: tensor<2x3xf32> {sd.role = #sd.param<"proj.lora_A.weight", zeros>}) -> tensor<f32> {
  %l = sd.mse_loss %w, %w : tensor<4x3xf32>
  return %l : tensor<f32>
}

// -----

// A Linear (where the option errors above apply).
func.func @loss(%w: tensor<4x3xf32> {sd.role = #sd.param<"proj.weight", zeros>},
                %x: tensor<8x3xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [1] : (tensor<8x3xf32>, tensor<4x3xf32>) -> tensor<8x4xf32>
  %l = sd.mse_loss %y, %y : tensor<8x4xf32>
  return %l : tensor<f32>
}
