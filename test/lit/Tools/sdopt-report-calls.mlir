// Calls are costed through their callee, once per call: its FLOPs and
// collectives add up per call, and while it runs its own activations are
// alive on top of the caller's.
// RUN: sdopt %s --report | FileCheck %s

// @block on 4x8 f32 values (128 B each): the dot 2·4·8·8 = 512 FLOPs, silu
// 5·32 = 160, add 32 → 704 per call. Its liveness: %h (0..1), %a (1..2),
// %r (2..3, returned): peak 256 B, first at the silu.
// @loss: position 0, the first call: %b0 (128 B) + the callee's peak less
// its result (256 − 128) = 256 B; position 1, the second call: %b0 (its
// operand) + %b1 + 128 = 384 B; position 2: %b1 + the scalar = 132 B.
// Peak 384 B in the second call; FLOPs 2·704 + 32 (reduce_mean) = 1440.
// Memory: 2 parameters 8x8 (512 B), input 128 B; 512 + 128 + 384 = 1024 B.
// CHECK-LABEL: sd report: @loss, no mesh (1 device)
// CHECK-NEXT:  program: not sharded; every device runs the whole program
// CHECK-NEXT:  calls: @block x2 (each costed through its callee, once per call)
// CHECK:       parameters 512 B 2 tensors, 128 elements
// CHECK-NEXT:  inputs 128 B 1 tensor
// CHECK-NEXT:  activations (peak) 384 B at func.call @block > sd.silu
// CHECK-NEXT:  total 1.0 kB
// CHECK:       FLOPs 1.4 kFLOP
func.func private @block(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %h = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = sd.silu %h : tensor<4x8xf32>
  %r = sd.add %a, %x : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

func.func @loss(%w0: tensor<8x8xf32> {sd.role = #sd.param<"blocks.0.w", zeros>},
                %w1: tensor<8x8xf32> {sd.role = #sd.param<"blocks.1.w", zeros>},
                %x: tensor<4x8xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %b0 = call @block(%x, %w0) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b1 = call @block(%b0, %w1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = sd.reduce_mean %b1 dims = [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
