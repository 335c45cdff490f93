// One case per constraint of the sd attributes and of the dialect's
// discardable attributes, and the parse errors of their custom syntax.
// Op constraints are in invalid.mlir.

//===----------------------------------------------------------------------===//
// #sd.mesh_axis, #sd.mesh
//===----------------------------------------------------------------------===//

sd.mesh @mesh = <["2d"=2]>
