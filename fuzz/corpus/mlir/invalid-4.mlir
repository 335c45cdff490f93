func.func @reduce_dim_out_of_range(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = sd.reduce_sum %x dims = [2] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
