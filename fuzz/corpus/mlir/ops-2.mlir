// Every model input kind, with a dynamic batch.
func.func @input_kinds(
    %x0: tensor<?x8x8x4xf32> {sd.role = #sd.input<latents>},
    %eps: tensor<?x8x8x4xf32> {sd.role = #sd.input<noise>},
    %t: tensor<?xf32> {sd.role = #sd.input<timestep>},
    %ctx: tensor<?x77x768xbf16> {sd.role = #sd.input<context>},
    %y: tensor<?x10xf32> {sd.role = #sd.input<labels>}) {
  return
}
