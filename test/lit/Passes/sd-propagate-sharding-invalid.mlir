// RUN: sdopt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect -sd-propagate-sharding

// Block functions must be inlined first.
sd.mesh @mesh = <["data"=2]>
func.func private @block(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  return %x : tensor<8x4xf32>
}
func.func @calls(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{sharding propagation needs a program without calls (a call that --inline leaves is to a recursive function); run --inline and sd-specialize-batch first}}
  %y = func.call @block(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// The batch must be specialized first.
sd.mesh @mesh = <["data"=2]>
// expected-error @+1 {{argument #0 has type 'tensor<?x4xf32>'; sharding propagation needs static tensor shapes (run --inline and sd-specialize-batch first)}}
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = sd.neg %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// No mesh to propagate over.
// expected-error @+1 {{no sd.mesh @mesh to propagate shardings over; pass --mesh or run sd-materialize-mesh}}
func.func @no_mesh(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %y = sd.neg %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Constraints written with logical names need the rules applied first.
sd.mesh @mesh = <["data"=2]>
func.func @logical_constraint(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.sharding_constraint' op has logical axes but no sharding; run sd-apply-logical-rules first}}
  %y = sd.sharding_constraint %x logical = <[batch, _]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// Shardings over another mesh than the one propagation works on.
sd.mesh @mesh = <["data"=2]>
sd.mesh @other = <["data"=2]>
// expected-error @+1 {{sharding refers to @other, but propagation works on mesh @mesh}}
func.func @other_mesh(%x: tensor<8x4xf32> {sd.sharding = #sd.sharding<@other, [{"data"}, {}]>}) -> tensor<8x4xf32> {
  %y = sd.neg %x : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// An op without a sharding rule: propagation does not guess.
sd.mesh @mesh = <["data"=2]>
func.func @no_rule(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'foo.bar' op has no sharding rule (ShardingRuleOpInterface); sharding propagation cannot pass through it}}
  %y = "foo.bar"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
