// all_reduce over one axis and over two; axes on a DCN mesh.
sd.mesh @mesh = <["data"=4(dcn=2), "fsdp"=2]>
func.func @all_reduce(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  %b = sd.all_reduce %a @mesh axes = ["fsdp", "data"] : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
