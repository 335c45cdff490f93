// Propagating again changes nothing: the shardings and reshards of the first
// run are annotations of the second.

// Forward through elementwise ops: the argument's batch sharding reaches
// every result and the function result.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @forward_elementwise(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>}) -> tensor<8x16xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %y = sd.add %e, %e : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
