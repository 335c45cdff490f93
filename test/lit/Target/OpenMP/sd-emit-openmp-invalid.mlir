// RUN: sdopt %s -verify-diagnostics -sd-emit-openmp > /dev/null
// RUN: not sdopt %s -sd-emit-openmp="func-name=missing" 2>&1 | FileCheck %s --check-prefix=MISSING

// The emitter writes only planned functions.
func.func @unplanned(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'sd.exp' op has no 'sd_omp.plan'; run sd-lower-to-openmp first}}
  %e = sd.exp %x : tensor<8xf32>
  return %e : tensor<8xf32>
}

// A function the module does not have.
// MISSING: error: no function 'missing' to emit as OpenMP
