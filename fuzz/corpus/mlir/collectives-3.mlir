// reduce_scatter of a gradient over the FSDP axis.
sd.mesh @mesh = <["data"=2, "fsdp"=4]>
func.func @reduce_scatter(%g: tensor<384x1152xf32>) -> tensor<96x1152xf32> {
  %y = sd.reduce_scatter %g @mesh [{"fsdp"}, {}] : (tensor<384x1152xf32>) -> tensor<96x1152xf32>
  return %y : tensor<96x1152xf32>
}
