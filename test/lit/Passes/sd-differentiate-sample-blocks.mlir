// RUN: sdopt %s -sd-differentiate -mlir-print-debuginfo | FileCheck %s

// The planner's sample program marks its blocks' calls (sd.sample_block);
// sd-differentiate moves the mark into the location of each op it inlines
// from them, the ops of a call inside a marked block included, and the
// backward ops of a marked op (its VJP, the sums of its operands'
// cotangents) take that op's location. Unmarked calls inline unmarked.
// CHECK-LABEL: func.func @loss_grad
// CHECK-NEXT: sd.tanh {{.*}} loc(#[[B0:loc[0-9]+]])
// CHECK-NEXT: sd.tanh {{.*}} loc(#[[B1T:loc[0-9]+]])
// CHECK-NEXT: sd.mul {{.*}} loc(#[[B1M:loc[0-9]+]])
// CHECK-NEXT: sd.tanh {{.*}} loc(#[[PLAIN:loc[0-9]+]])
// CHECK:      sd.mul {{.*}} {sd.backward, sd.vjp_group = 2 : i64} {{.*}} loc(#[[B1M]])
// CHECK:      sd.add {{.*}} {sd.backward, sd.vjp_group = 1 : i64} {{.*}} loc(#[[B1T]])
// CHECK-DAG:  #[[PLAIN]] = loc("{{.*}}sd-differentiate-sample-blocks.mlir":{{[0-9]+}}:8)
// CHECK-DAG:  #[[B0]] = loc(fused<{sd.sample_block = array<i64: 0, 0>}>[#[[PLAIN]]])
// CHECK-DAG:  #[[B1T]] = loc(fused<{sd.sample_block = array<i64: 0, 1>}>[#[[PLAIN]]])
// CHECK-DAG:  #[[B1M]] = loc(fused<{sd.sample_block = array<i64: 0, 1>}>[#{{loc[0-9]+}}])

func.func @loss(%x: tensor<4xf32> {sd.role = #sd.param<"x", zeros>}) -> tensor<f32> {
  %a = call @block(%x) {sd.sample_block = array<i64: 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  %b = call @outer(%a) {sd.sample_block = array<i64: 0, 1>} : (tensor<4xf32>) -> tensor<4xf32>
  %c = call @block(%b) : (tensor<4xf32>) -> tensor<4xf32>
  %l = sd.reduce_sum %c dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

func.func @outer(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @block(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %z = sd.mul %y, %x : tensor<4xf32>
  return %z : tensor<4xf32>
}

func.func @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sd.tanh %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
