// Round trip of the collectives (per-device programs, after partitioning)
// and of sd.reshard (global programs), in the custom and the generic syntax.
// One case per chunk; each names its function.

// all_gather over one axis of one dimension, and over two axes of one
// dimension (major to minor: the order is kept).
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2]>
func.func @all_gather(%x: tensor<2x8xf32>) -> tensor<4x32xf32> {
  %a = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %b = sd.all_gather %a @mesh [{}, {"tensor", "data"}] : (tensor<4x8xf32>) -> tensor<4x32xf32>
  return %b : tensor<4x32xf32>
}
