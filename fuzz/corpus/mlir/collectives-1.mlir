// all_slice of two dimensions at once, on bf16.
sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice(%x: tensor<4x8xbf16>) -> tensor<2x4xbf16> {
  %y = sd.all_slice %x @mesh [{"data"}, {"fsdp"}] {sd.name = "sliced"} : (tensor<4x8xbf16>) -> tensor<2x4xbf16>
  return %y : tensor<2x4xbf16>
}
