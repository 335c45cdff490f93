func.func @reduce_dim_twice(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = sd.reduce_max %x dims = [1, 1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
