// A parameter sharded on its contracting dimension (FSDP without a sharded
// batch): the open activation follows, the dot's result is a partial sum
// over fsdp, and the function result gets it reduced.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @fsdp_contracting(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {?}]>},
                            %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
