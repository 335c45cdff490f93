func.func @loss(%x: tensor<?x576460752303423488xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> attributes {sd.default_batch = 8 : i64} {
  %y = sd.tanh %x : tensor<?x576460752303423488xf32>
  %l = sd.mse_loss %y, %x : tensor<?x576460752303423488xf32>
  return %l : tensor<f32>
}
