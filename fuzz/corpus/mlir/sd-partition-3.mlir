// all_to_all: an axis moves between dimensions (Ulysses).
sd.mesh @mesh = <["data"=2, "context"=2]>
func.func @all_to_all(%x: tensor<8x16x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"context"}, {}]>})
    -> (tensor<8x16x4xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"context"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"data"}, {}, {"context"}]> : tensor<8x16x4xf32>
  return %r : tensor<8x16x4xf32>
}
