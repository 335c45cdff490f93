func.func @loss(%w: tensor<16x3037000500x3037000500xf32> {sd.role = #sd.param<"w", zeros>}, %x: tensor<?x16xf32> {sd.role = #sd.input<latents>}) -> tensor<f32> {
  %b = sd.broadcast_in_dim %x dims = [0, 3] : (tensor<?x16xf32>) -> tensor<?x3037000500x3037000500x16xf32>
  %l = sd.mse_loss %b, %b : tensor<?x3037000500x3037000500x16xf32>
  return %l : tensor<f32>
}
