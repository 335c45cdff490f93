func.func @select_pred_shape(%p: tensor<4x1xi1>, %a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = sd.select %p, %a, %a : tensor<4x1xi1>, tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
