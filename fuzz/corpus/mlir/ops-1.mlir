// Every initializer kind of a parameter.
func.func @init_kinds(
    %a: tensor<4xf32> {sd.role = #sd.param<"zeros", zeros>},
    %b: tensor<4xf32> {sd.role = #sd.param<"ones", ones>},
    %c: tensor<4xf32> {sd.role = #sd.param<"constant", constant(0.5)>},
    %d: tensor<4xf32> {sd.role = #sd.param<"negative", constant(-1.0)>},
    %e: tensor<4xf32> {sd.role = #sd.param<"normal", normal(0.02)>},
    %f: tensor<4xbf16> {sd.role = #sd.param<"uniform", uniform(1.0e-1)>},
    %g: tensor<4x8xf32> {sd.role = #sd.param<"blocks.0.attn.q.weight", xavier_uniform>}) {
  return
}
