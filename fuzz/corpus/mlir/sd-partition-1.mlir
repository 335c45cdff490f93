// FSDP: the parameter sharded over fsdp is gathered before its use.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @fsdp_gather(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>},
                       %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>})
    -> (tensor<8x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp", ?}, {?}]>}) {
  %r = sd.reshard %w sharding = <@mesh, [{}, {}]> {sd.sharding = #sd.sharding_per_value<[<@mesh, [{}, {}]>]>} : tensor<16x32xf32>
  %y = sd.dot_general %x, %r batch = [] x [] contract = [1] x [0] {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", "fsdp", ?}, {?}]>]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
