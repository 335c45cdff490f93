// Partial sums (unreduced axes, alone and after replicated ones) and the
// per-result shardings that propagation records on ops.
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
func.func @unreduced_and_per_value(
    %a: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}], unreduced = ["fsdp"]>},
    %b: tensor<8x8xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], replicated = ["data"], unreduced = ["fsdp", "tensor"]>}) {
  %y = sd.neg %a {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {?}], unreduced = ["fsdp"]>]>,
                  sd.provenance = ["data on dim 0 from input noise"]} : tensor<8x8xf32>
  return
}
