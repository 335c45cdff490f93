// The shape of issue's probe: 16 × 3037000500² elements, more than int64
// counts. The parameter's annotation names it.
func.func @loss(%w: tensor<16x3037000500x3037000500xf32> {sd.role = #sd.param<"huge.weight", zeros>},
                %x: tensor<?x16xf32> {sd.role = #sd.input<latents>,
                                      sd.logical_axes = #sd.logical_axes<[batch, embed]>})
    -> tensor<f32> attributes {sd.default_batch = 2 : i64} {
  %l = sd.mse_loss %x, %x : tensor<?x16xf32>
  return %l : tensor<f32>
}
