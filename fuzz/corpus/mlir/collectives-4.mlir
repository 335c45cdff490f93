// all_to_all from sequence to head sharding (Ulysses), and back.
sd.mesh @mesh = <["data"=2, "context"=2]>
func.func @all_to_all(%x: tensor<2x6x64x64xf32>) -> tensor<2x6x64x64xf32> {
  %a = sd.all_to_all %x @mesh axes = ["context"] src_dim = 2 tgt_dim = 1 : (tensor<2x6x64x64xf32>) -> tensor<2x3x128x64xf32>
  %b = sd.all_to_all %a @mesh axes = ["context"] src_dim = 1 tgt_dim = 2 : (tensor<2x3x128x64xf32>) -> tensor<2x6x64x64xf32>
  return %b : tensor<2x6x64x64xf32>
}
