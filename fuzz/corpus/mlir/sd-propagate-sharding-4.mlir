// Backward from a function result annotation to unannotated arguments.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @backward_from_result(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>)
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"tensor"}]>}) {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
