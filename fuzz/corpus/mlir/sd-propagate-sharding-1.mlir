// Data parallelism: the batch of x passes through the dot; the replicated
// weight needs nothing.
sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @data_parallel_dot(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>},
                             %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}]>}) -> tensor<8x32xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
