// Four axes at once: two move together, and tensor takes data's place,
// the devices at (data 0, tensor 1) and (data 1, tensor 0) swapping blocks
// (128 B each, as a gather of data then a slice of tensor would send, in
// one op instead of two).
sd.mesh @mesh = <["data"=2, "fsdp"=2, "context"=2, "tensor"=2]>
func.func @four_axes(%x: tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp", "context"}, {}], replicated = ["tensor"]>})
    -> (tensor<16x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"tensor"}, {"fsdp", "context"}]>}) {
  %r = sd.reshard %x sharding = <@mesh, [{"tensor"}, {"fsdp", "context"}]> : tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}
