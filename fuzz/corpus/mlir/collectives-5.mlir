// collective_permute: a ring shift forward along one axis, a swap of
// blocks across two axes (members are row-major over the listed axes, here
// fsdp major), and one without pairs.
sd.mesh @mesh = <["fsdp"=2, "context"=4]>
func.func @collective_permute(%kv: tensor<2x8x64x64xbf16>) -> tensor<2x8x64x64xbf16> {
  %a = sd.collective_permute %kv @mesh axes = ["context"] pairs = [[0, 1], [1, 2], [2, 3], [3, 0]] : tensor<2x8x64x64xbf16>
  %b = sd.collective_permute %a @mesh axes = ["fsdp", "context"] pairs = [[1, 4], [4, 1]] : tensor<2x8x64x64xbf16>
  %c = sd.collective_permute %b @mesh axes = ["context"] pairs = [] : tensor<2x8x64x64xbf16>
  return %c : tensor<2x8x64x64xbf16>
}
