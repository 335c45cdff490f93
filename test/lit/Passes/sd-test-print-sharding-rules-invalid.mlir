// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-test-print-sharding-rules

// Rules need every dimension's size: a program with a dynamic batch has none
// until sd-specialize-batch.

func.func @dynamic_batch(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'sd.exp' op has no sharding rule while operand #0 has type 'tensor<?x4xf32>'; shapes must be static and non-empty (run sd-specialize-batch first)}}
  %y = sd.exp %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @dynamic_reshape(%x: tensor<?x6xf32>) -> tensor<?x2x3xf32> {
  // expected-error @+1 {{'sd.reshape' op has no sharding rule while operand #0 has type 'tensor<?x6xf32>'}}
  %y = sd.reshape %x : (tensor<?x6xf32>) -> tensor<?x2x3xf32>
  return %y : tensor<?x2x3xf32>
}

// -----

// An empty tensor has no factors to shard.
func.func @empty(%x: tensor<0x4xf32>, %w: tensor<4x8xf32>) -> tensor<0x8xf32> {
  // expected-error @+1 {{'sd.dot_general' op has no sharding rule while operand #0 has type 'tensor<0x4xf32>'}}
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
      : (tensor<0x4xf32>, tensor<4x8xf32>) -> tensor<0x8xf32>
  return %y : tensor<0x8xf32>
}
