// A batch dimension that only a broadcast creates takes the batch size.
func.func @broadcast_creates_batch(%x: tensor<?x16xf32>, %b: tensor<16xf32>) -> tensor<?x16xf32> {
  %bb = sd.broadcast_in_dim %b dims = [1] : (tensor<16xf32>) -> tensor<?x16xf32>
  %y = sd.add %x, %bb : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
