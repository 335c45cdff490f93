// Backward from a sharding constraint through a transpose to an open
// argument, and forward from it to the end.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @backward_from_constraint(%x: tensor<16x8xf32>) -> tensor<8x16xf32> {
  %t = sd.transpose %x permutation = [1, 0] : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %c = sd.sharding_constraint %t sharding = <@mesh, [{"data"}, {"tensor"}]> : tensor<8x16xf32>
  %y = sd.neg %c : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
