// Hand-propagated global programs (as sd-propagate-sharding leaves them)
// and their per-device forms: local types, the collectives of each reshard,
// and the ops that partition themselves. The global layouts stay on the
// function boundary as sd.local_sharding; ops lose sd.sharding.

// Data parallelism: the batch passes through the dot, the weight is
// replicated; no collective.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @data_parallel_dot(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                             %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>}) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
