// Dimension shardings: closed, empty, several axes, open, open and empty,
// with priorities, and an explicitly replicated axis.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2, "context"=2]>
func.func @sharding_forms(
    %a: tensor<8x3x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}, {"fsdp", "tensor"}]>},
    %b: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", ?}, {?}]>},
    %c: tensor<8x8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}p0, {"fsdp", ?}p1, {?} p12]>},
    %d: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], replicated = ["context", "tensor"]>}) {
  return
}
