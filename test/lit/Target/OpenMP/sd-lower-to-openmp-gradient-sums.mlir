// RUN: sdopt %s -sd-lower-to-openmp | FileCheck %s

// The sums of a parameter's gradient across microbatches (sd.gradient_sum,
// from sd-build-train-step with grad-accum), and the first microbatch's
// gradient they start from, are each a kernel at their own place. Fused
// into their single user, the next sum, the chain would run as one kernel
// at the end of the step and keep every microbatch's gradient alive until
// then. A later microbatch's gradient still fuses into its sum, and the
// plain adds below fuse as before.
// CHECK-LABEL: func.func @three_microbatches
// CHECK: %[[G1:.*]] = sd.exp %arg0 {sd_omp.plan = #sd_omp.kernel<0, fused>}
// CHECK: %[[G2:.*]] = sd.exp %arg1 {sd_omp.plan = #sd_omp.in_kernel<1>}
// CHECK: %[[S2:.*]] = sd.add %[[G1]], %[[G2]] {sd.gradient_sum, sd_omp.plan = #sd_omp.kernel<1, fused>}
// CHECK: %[[G3:.*]] = sd.exp %arg2 {sd_omp.plan = #sd_omp.in_kernel<2>}
// CHECK: sd.add %[[S2]], %[[G3]] {sd.gradient_sum, sd_omp.plan = #sd_omp.kernel<2, fused>}
func.func @three_microbatches(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %g1 = sd.exp %a : tensor<64xf32>
  %g2 = sd.exp %b : tensor<64xf32>
  %s2 = sd.add %g1, %g2 {sd.gradient_sum} : tensor<64xf32>
  %g3 = sd.exp %c : tensor<64xf32>
  %s3 = sd.add %s2, %g3 {sd.gradient_sum} : tensor<64xf32>
  return %s3 : tensor<64xf32>
}

// CHECK-LABEL: func.func @plain_chain
// CHECK: sd.add %{{.*}}, %{{.*}} {sd_omp.plan = #sd_omp.in_kernel<0>}
// CHECK: sd.add %{{.*}}, %{{.*}} {sd_omp.plan = #sd_omp.kernel<0, fused>}
func.func @plain_chain(%a: tensor<64xf32>, %b: tensor<64xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %s2 = sd.add %a, %b : tensor<64xf32>
  %s3 = sd.add %s2, %c : tensor<64xf32>
  return %s3 : tensor<64xf32>
}
