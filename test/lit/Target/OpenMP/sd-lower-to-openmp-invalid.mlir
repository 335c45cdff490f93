// RUN: sdopt %s -split-input-file -verify-diagnostics -sd-lower-to-openmp

// expected-error @+1 {{'func.func' op argument %arg0 has element type 'f16'; the OpenMP lowering supports f32 and bf16 tensors}}
func.func @f16_argument(%x: tensor<8x16xf16>) -> tensor<8x16xf16> {
  return %x : tensor<8x16xf16>
}

// -----

func.func private @block(%x: tensor<8xf32>) -> tensor<8xf32>

func.func @call(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'func.call' op cannot be lowered to OpenMP: inline first (the lowering needs call-free functions)}}
  %y = func.call @block(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument %arg0 has the dynamic type 'tensor<?x16xf32>'; the OpenMP lowering needs static shapes (run sd-specialize-batch first)}}
func.func @dynamic(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %e = sd.exp %x : tensor<?x16xf32>
  return %e : tensor<?x16xf32>
}

// -----

// A reshard belongs to global programs: sd-partition turns it into
// collectives, and it has no OpenMP lowering.
sd.mesh @mesh = <["data"=2]>
func.func @reshard(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op has no OpenMP lowering}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// The plan attribute is typed.
func.func @untyped_plan(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'sd_omp.plan' must be #sd_omp.kernel, #sd_omp.in_kernel, #sd_omp.kernel_output or #sd_omp.inline, not "k0"}}
  %e = sd.exp %x {sd_omp.plan = "k0"} : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

func.func @negative_kernel_id(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kernel id -1 is negative}}
  %e = sd.exp %x {sd_omp.plan = #sd_omp.kernel<-1, fused>} : tensor<8xf32>
  return %e : tensor<8xf32>
}
