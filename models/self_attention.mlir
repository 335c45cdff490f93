// A self-attention block over a sequence that the logical axis rules may
// shard (activation_length): latents [B, S, 32] projected to q, k, v of
// [B, 4 heads, S, 8], attention, an output projection and the diffusion
// loss. Small enough for every mesh of the context-parallel tests
// (sdrun-context-parallel.test): S = 64 divides by 4 and, per head group,
// 4 heads divide by the context degree.
func.func @loss(%wq: tensor<32x4x8xf32> {sd.role = #sd.param<"attn.to_q.weight", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[embed, heads, kv]>},
                %wk: tensor<32x4x8xf32> {sd.role = #sd.param<"attn.to_k.weight", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[embed, heads, kv]>},
                %wv: tensor<32x4x8xf32> {sd.role = #sd.param<"attn.to_v.weight", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[embed, heads, kv]>},
                %wo: tensor<4x8x32xf32> {sd.role = #sd.param<"attn.to_out.weight", xavier_uniform>, sd.logical_axes = #sd.logical_axes<[heads, kv, embed]>},
                %x: tensor<?x64x32xf32> {sd.role = #sd.input<latents>, sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>},
                %t: tensor<?x64x32xf32> {sd.role = #sd.input<noise>, sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>})
    -> tensor<f32> attributes {sd.default_batch = 4 : i64} {
  %q0 = sd.dot_general %x, %wq batch = [] x [] contract = [2] x [0] {sd.name = "query_proj"} : (tensor<?x64x32xf32>, tensor<32x4x8xf32>) -> tensor<?x64x4x8xf32>
  %k0 = sd.dot_general %x, %wk batch = [] x [] contract = [2] x [0] {sd.name = "key_proj"} : (tensor<?x64x32xf32>, tensor<32x4x8xf32>) -> tensor<?x64x4x8xf32>
  %v0 = sd.dot_general %x, %wv batch = [] x [] contract = [2] x [0] {sd.name = "value_proj"} : (tensor<?x64x32xf32>, tensor<32x4x8xf32>) -> tensor<?x64x4x8xf32>
  %q1 = sd.transpose %q0 permutation = [0, 2, 1, 3] : (tensor<?x64x4x8xf32>) -> tensor<?x4x64x8xf32>
  %k1 = sd.transpose %k0 permutation = [0, 2, 1, 3] : (tensor<?x64x4x8xf32>) -> tensor<?x4x64x8xf32>
  %v1 = sd.transpose %v0 permutation = [0, 2, 1, 3] : (tensor<?x64x4x8xf32>) -> tensor<?x4x64x8xf32>
  %q = sd.sharding_constraint %q1 logical = <[activation_batch, activation_heads, activation_length, activation_kv]> : tensor<?x4x64x8xf32>
  %k = sd.sharding_constraint %k1 logical = <[activation_batch, activation_heads, activation_kv_length, activation_kv]> : tensor<?x4x64x8xf32>
  %v = sd.sharding_constraint %v1 logical = <[activation_batch, activation_heads, activation_kv_length, activation_kv]> : tensor<?x4x64x8xf32>
  %o = sd.attention %q, %k, %v {sd.name = "attn_output"} : (tensor<?x4x64x8xf32>, tensor<?x4x64x8xf32>, tensor<?x4x64x8xf32>) -> tensor<?x4x64x8xf32>
  %y = sd.dot_general %o, %wo batch = [] x [] contract = [1, 3] x [0, 1] : (tensor<?x4x64x8xf32>, tensor<4x8x32xf32>) -> tensor<?x64x32xf32>
  %l = sd.mse_loss %y, %t : tensor<?x64x32xf32>
  return %l : tensor<f32>
}
