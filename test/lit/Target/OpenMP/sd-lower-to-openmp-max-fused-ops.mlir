// RUN: sdopt %s -sd-lower-to-openmp="max-fused-ops=2" | FileCheck %s
// RUN: not sdopt %s -sd-lower-to-openmp="max-fused-ops=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// A kernel holds at most max-fused-ops ops: past two, the next producer
// of the chain starts a kernel of its own.
// CHECK-LABEL: func.func @capped_chain
// CHECK: sd.exp %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK-NEXT: sd.neg %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK-NEXT: sd.mul %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<1>}
// CHECK-NEXT: sd.tanh %{{.*}} {sd_omp.plan = #sd_omp.kernel<1, fused>}
func.func @capped_chain(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = sd.exp %x : tensor<8x16xf32>
  %n = sd.neg %e : tensor<8x16xf32>
  %m = sd.mul %n, %y : tensor<8x16xf32>
  %t = sd.tanh %m : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// A kernel cannot hold less than one op.
// ZERO: error: sd-lower-to-openmp: max-fused-ops must be at least 1, not 0
