// Logical axes: `_` and `"_"` leave a dimension unnamed; quoted identifiers
// print bare.
func.func @logical_axes(
    %x: tensor<?x16x384xf32> {sd.role = #sd.input<latents>,
                              sd.logical_axes = #sd.logical_axes<[batch, _, "embed"]>},
    %w: tensor<4x4xf32> {sd.role = #sd.param<"w", zeros>,
                         sd.logical_axes = #sd.logical_axes<["_", _]>},
    %s: tensor<f32> {sd.logical_axes = #sd.logical_axes<[]>}) {
  return
}
