// Megatron MLP: a column-split weight shards the hidden activation over
// tensor; the row-split weight contracts it, leaving a partial sum that is
// reduced (a reshard) before the residual add.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @megatron_mlp(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                        %w1: tensor<16x64xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>},
                        %w2: tensor<64x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {}]>}) -> tensor<8x16xf32> {
  %h = sd.dot_general %x, %w1 batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = sd.gelu %h : tensor<8x64xf32>
  %o = sd.dot_general %g, %w2 batch = [] x [] contract = [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %y = sd.add %o, %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
