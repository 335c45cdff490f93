// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-partition --mlir-very-unsafe-disable-verifier-on-parsing

// A partial maximum cannot be completed by an all_reduce (a sum).
sd.mesh @mesh = <["data"=2]>
func.func @reduce_max(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"data"}]>}) -> tensor<8xf32> {
  // expected-error @+1 {{'sd.reduce_max' op reduces dimensions sharded over 2 devices; a partial maximum cannot be completed by summing, so the reduced dimensions must be gathered first}}
  %m = sd.reduce_max %x dims = [1] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}], unreduced = ["data"]>]>} : (tensor<8x16xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// -----

// Shardings that propagation would have resolved with a reshard.
sd.mesh @mesh = <["data"=2]>
func.func @disagree(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
  // expected-error @+1 {{'sd.exp' op has shardings that its sharding rule #sd.sharding_rule<([i, j]) -> ([i, j]) {i=8, j=16}> does not allow: operand #0 and result #0 split factor i differently (run --inline, sd-specialize-batch and sd-propagate-sharding first)}}
  %y = sd.exp %x {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {"data"}]>]>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @partial_operand(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["data"]>}) -> tensor<8x16xf32> {
  // expected-error @+1 {{'sd.exp' op has shardings that its sharding rule #sd.sharding_rule<([i, j]) -> ([i, j]) {i=8, j=16}> does not allow: operand #0 is a partial sum}}
  %y = sd.exp %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @needs_replication(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"data"}]>}) -> tensor<8x16xf32> {
  // expected-error @+1 {{'sd.softmax' op has shardings that its sharding rule #sd.sharding_rule<([i, j]) -> ([i, j]) {i=8, j=16}, need_replication={j}> does not allow: factor j needs replication but is sharded}}
  %y = sd.softmax %x dim = 1 {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {"data"}]>]>} : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func private @block(%x: tensor<8x16xf32>) -> tensor<8x16xf32>
func.func @calls(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
  // expected-error @+1 {{sd-partition needs a program without calls; run --inline, sd-specialize-batch and sd-propagate-sharding first}}
  %y = call @block(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @dynamic(%x: tensor<?x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<?x16xf32> {
  // expected-error @+1 {{'sd.exp' op has type 'tensor<?x16xf32>'; sd-partition needs static tensor shapes (run --inline, sd-specialize-batch and sd-propagate-sharding first)}}
  %y = sd.exp %x : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

sd.mesh @a = <["data"=2]>
sd.mesh @b = <["data"=2]>
// expected-error @+1 {{sd-partition works on one mesh, but the function uses @a and @b}}
func.func @two_meshes(%x: tensor<8xf32> {sd.sharding = #sd.sharding<@a, [{"data"}]>},
                      %y: tensor<8xf32> {sd.sharding = #sd.sharding<@b, [{"data"}]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// A program that is partitioned already.
sd.mesh @mesh = <["data"=2]>
func.func @collective(%x: tensor<4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}]>}) -> tensor<8xf32> {
  // expected-error @+1 {{'sd.all_gather' op has no partitioning (PartitionOpInterface); sd-partition cannot make it per-device}}
  %y = sd.all_gather %x @mesh [{"data"}] : (tensor<4xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
