// all_slice: a replicated value resharded onto an axis keeps its block.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @slice(%x: tensor<8x16xf32>) -> (tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{}, {"tensor"}]> : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
