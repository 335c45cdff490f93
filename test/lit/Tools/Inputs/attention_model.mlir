// One self-attention over latents [B, 4, 32, 16] with learned query and
// key projections: a loss small enough to read, used by
// sdopt-attention.mlir.
func.func @loss(%wq: tensor<16x16xf32> {sd.role = #sd.param<"wq", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[embed, heads]>},
                %wk: tensor<16x16xf32> {sd.role = #sd.param<"wk", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[embed, heads]>},
                %x: tensor<?x4x32x16xf32> {sd.role = #sd.input<latents>, sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, embed]>},
                %t: tensor<?x4x32x16xf32> {sd.role = #sd.input<noise>, sd.logical_axes = #sd.logical_axes<[batch, heads, activation_length, embed]>})
    -> tensor<f32> attributes {sd.default_batch = 2 : i64} {
  %q = sd.dot_general %x, %wq batch = [] x [] contract = [3] x [0] : (tensor<?x4x32x16xf32>, tensor<16x16xf32>) -> tensor<?x4x32x16xf32>
  %k = sd.dot_general %x, %wk batch = [] x [] contract = [3] x [0] : (tensor<?x4x32x16xf32>, tensor<16x16xf32>) -> tensor<?x4x32x16xf32>
  %o = sd.attention %q, %k, %x {sd.name = "attn_output"} : (tensor<?x4x32x16xf32>, tensor<?x4x32x16xf32>, tensor<?x4x32x16xf32>) -> tensor<?x4x32x16xf32>
  %l = sd.mse_loss %o, %t : tensor<?x4x32x16xf32>
  return %l : tensor<f32>
}
