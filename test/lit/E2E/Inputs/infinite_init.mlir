// small_model.mlir with an initializer scale that parses as infinity.
func.func @loss(%w: tensor<16x32xf32> {sd.role = #sd.param<"proj.weight", uniform(1.0e999)>,
                                       sd.logical_axes = #sd.logical_axes<[embed, mlp]>},
                %x: tensor<?x16xf32> {sd.role = #sd.input<latents>,
                                      sd.logical_axes = #sd.logical_axes<[batch, embed]>},
                %t: tensor<?x32xf32> {sd.role = #sd.input<noise>,
                                      sd.logical_axes = #sd.logical_axes<[batch, mlp]>})
    -> tensor<f32> attributes {sd.default_batch = 8 : i64} {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] {sd.name = "ffn_activation"}
      : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
  %l = sd.mse_loss %y, %t : tensor<?x32xf32>
  return %l : tensor<f32>
}
