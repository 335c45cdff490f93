// One case per constraint of the sd ops. Ops whose result type is inferred
// report the broken constraint, then MLIR's "failed to infer returned types".
// Attribute constraints are in attrs-invalid.mlir.

//===----------------------------------------------------------------------===//
// sd.mesh
//===----------------------------------------------------------------------===//

sd.mesh @mesh = <["data"=2, "data"=2]>
