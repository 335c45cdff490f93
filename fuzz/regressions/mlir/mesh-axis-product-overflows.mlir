sd.mesh @mesh = <["a"=4294967296, "b"=4294967296]>
func.func @f(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"a", "b"}, {}]>}) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}
