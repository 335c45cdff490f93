// A partial sum resolved onto a dimension: reduce_scatter.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter(%g: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["fsdp"]>})
    -> (tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) {
  %r = sd.reshard %g sharding = <@mesh, [{"fsdp"}, {}]> : tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}
