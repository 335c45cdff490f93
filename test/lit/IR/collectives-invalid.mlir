// RUN: sdopt %s -split-input-file -verify-diagnostics

// One case per constraint of the collectives and of sd.reshard (see each
// op's "Constraints" list). Checks that need the mesh's axes run in
// verifySymbolUses, after the op's own verifier.

//===----------------------------------------------------------------------===//
// sd.all_gather
//===----------------------------------------------------------------------===//

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_dynamic(%x: tensor<?x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x8xf32>'}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<?x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_element_type(%x: tensor<2x8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'sd.all_gather' op failed to verify that all of {operand, result} have same element type}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_rank(%x: tensor<2x8xf32>) -> tensor<4x8x1xf32> {
  // expected-error @+1 {{'sd.all_gather' op failed to verify that all of {operand, result} have same rank}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8x1xf32>
  return %y : tensor<4x8x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_axes_count(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op lists axes for 1 dimensions but the operand has rank 2}}
  %y = sd.all_gather %x @mesh [{"fsdp"}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_no_axis(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op lists no mesh axis}}
  %y = sd.all_gather %x @mesh [{}, {}] : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op lists mesh axis "fsdp" twice}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {"fsdp"}] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @all_gather_mesh_missing(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_unknown_axis(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op names mesh axis "tensor", which mesh @mesh does not have}}
  %y = sd.all_gather %x @mesh [{"tensor"}, {}] : (tensor<2x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_result_size(%x: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'sd.all_gather' op result dimension 0 has size 8, expected 4 (operand size 2 gathered over mesh axis "fsdp" of size 2)}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_gather_untouched_dim(%x: tensor<2x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+1 {{'sd.all_gather' op result dimension 1 has size 9, expected the operand's 8 (no mesh axes)}}
  %y = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<2x8xf32>) -> tensor<4x9xf32>
  return %y : tensor<4x9xf32>
}

//===----------------------------------------------------------------------===//
// sd.all_slice
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_dynamic(%x: tensor<?x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x8xf32>'}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {}] : (tensor<?x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_element_type(%x: tensor<4x8xf32>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{'sd.all_slice' op failed to verify that all of {operand, result} have same element type}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_rank(%x: tensor<4x8xf32>) -> tensor<2x8x1xf32> {
  // expected-error @+1 {{'sd.all_slice' op failed to verify that all of {operand, result} have same rank}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8x1xf32>
  return %y : tensor<2x8x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_axes_count(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op lists axes for 1 dimensions but the operand has rank 2}}
  %y = sd.all_slice %x @mesh [{"fsdp"}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_no_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op lists no mesh axis}}
  %y = sd.all_slice %x @mesh [{}, {}] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op lists mesh axis "fsdp" twice}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {"fsdp"}] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @all_slice_mesh_missing(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_unknown_axis(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.all_slice' op names mesh axis "tensor", which mesh @mesh does not have}}
  %y = sd.all_slice %x @mesh [{"tensor"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_not_divisible(%x: tensor<4x6xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'sd.all_slice' op operand dimension 1 of size 6 is not divisible by mesh axes "data", "fsdp" of total size 4}}
  %y = sd.all_slice %x @mesh [{}, {"data", "fsdp"}] : (tensor<4x6xf32>) -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_result_size(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sd.all_slice' op result dimension 1 has size 4, expected 2 (operand size 8 split over mesh axes "data", "fsdp" of total size 4)}}
  %y = sd.all_slice %x @mesh [{}, {"data", "fsdp"}] : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_slice_untouched_dim(%x: tensor<4x8xf32>) -> tensor<2x9xf32> {
  // expected-error @+1 {{'sd.all_slice' op result dimension 1 has size 9, expected the operand's 8 (no mesh axes)}}
  %y = sd.all_slice %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x9xf32>
  return %y : tensor<2x9xf32>
}

//===----------------------------------------------------------------------===//
// sd.reduce_scatter
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_dynamic(%x: tensor<?x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x8xf32>'}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {}] : (tensor<?x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_element_type(%x: tensor<4x8xf32>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{'sd.reduce_scatter' op failed to verify that all of {operand, result} have same element type}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_rank(%x: tensor<4x8xf32>) -> tensor<2x8x1xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op failed to verify that all of {operand, result} have same rank}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8x1xf32>
  return %y : tensor<2x8x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_axes_count(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op lists axes for 1 dimensions but the operand has rank 2}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_no_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op lists no mesh axis}}
  %y = sd.reduce_scatter %x @mesh [{}, {}] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op lists mesh axis "fsdp" twice}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {"fsdp"}] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @reduce_scatter_mesh_missing(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_unknown_axis(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op names mesh axis "tensor", which mesh @mesh does not have}}
  %y = sd.reduce_scatter %x @mesh [{"tensor"}, {}] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_not_divisible(%x: tensor<4x6xf32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op operand dimension 1 of size 6 is not divisible by mesh axes "data", "fsdp" of total size 4}}
  %y = sd.reduce_scatter %x @mesh [{}, {"data", "fsdp"}] : (tensor<4x6xf32>) -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_result_size(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op result dimension 1 has size 4, expected 2 (operand size 8 split over mesh axes "data", "fsdp" of total size 4)}}
  %y = sd.reduce_scatter %x @mesh [{}, {"data", "fsdp"}] : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @reduce_scatter_untouched_dim(%x: tensor<4x8xf32>) -> tensor<2x9xf32> {
  // expected-error @+1 {{'sd.reduce_scatter' op result dimension 1 has size 9, expected the operand's 8 (no mesh axes)}}
  %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<2x9xf32>
  return %y : tensor<2x9xf32>
}

//===----------------------------------------------------------------------===//
// sd.all_reduce
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_reduce_type(%x: tensor<4x8xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'sd.all_reduce' op requires the same type for all operands and results}}
  %y = "sd.all_reduce"(%x) <{mesh = @mesh, reduction_axes = ["data"]}> : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_reduce_dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x8xf32>'}}
  %y = sd.all_reduce %x @mesh axes = ["data"] : tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_reduce_no_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op lists no mesh axis}}
  %y = sd.all_reduce %x @mesh axes = [] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_reduce_axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op lists mesh axis "data" twice}}
  %y = sd.all_reduce %x @mesh axes = ["data", "fsdp", "data"] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @all_reduce_mesh_missing(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func private @mesh()
func.func @all_reduce_mesh_not_mesh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.all_reduce %x @mesh axes = ["data"] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @all_reduce_unknown_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_reduce' op names mesh axis "context", which mesh @mesh does not have}}
  %y = sd.all_reduce %x @mesh axes = ["data", "context"] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// sd.all_to_all
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_element_type(%x: tensor<4x8xf32>) -> tensor<8x4xbf16> {
  // expected-error @+1 {{'sd.all_to_all' op failed to verify that all of {operand, result} have same element type}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<8x4xbf16>
  return %y : tensor<8x4xbf16>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_rank(%x: tensor<4x8xf32>) -> tensor<8x4x1xf32> {
  // expected-error @+1 {{'sd.all_to_all' op failed to verify that all of {operand, result} have same rank}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<8x4x1xf32>
  return %y : tensor<8x4x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_dynamic(%x: tensor<4x?xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.all_to_all' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<4x?xf32>'}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x?xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_dim_range(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.all_to_all' op src_dim 0 and tgt_dim 2 must be in range for rank 2}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 2 : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_same_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_to_all' op src_dim and tgt_dim are both 1; they must differ}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 1 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_no_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.all_to_all' op lists no mesh axis}}
  %y = sd.all_to_all %x @mesh axes = [] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_axis_twice(%x: tensor<4x8xf32>) -> tensor<16x2xf32> {
  // expected-error @+1 {{'sd.all_to_all' op lists mesh axis "tensor" twice}}
  %y = sd.all_to_all %x @mesh axes = ["tensor", "tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<16x2xf32>
  return %y : tensor<16x2xf32>
}

// -----

func.func @all_to_all_mesh_missing(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.all_to_all' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_unknown_axis(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.all_to_all' op names mesh axis "context", which mesh @mesh does not have}}
  %y = sd.all_to_all %x @mesh axes = ["context"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_not_divisible(%x: tensor<4x6xf32>) -> tensor<16x1xf32> {
  // expected-error @+1 {{'sd.all_to_all' op tgt_dim 1 of size 6 is not divisible by mesh axes "data", "tensor" of total size 4}}
  %y = sd.all_to_all %x @mesh axes = ["data", "tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x6xf32>) -> tensor<16x1xf32>
  return %y : tensor<16x1xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=2]>
func.func @all_to_all_result_type(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sd.all_to_all' op result type 'tensor<4x4xf32>' differs from the expected 'tensor<8x4xf32>' (src_dim 0 times 2, tgt_dim 1 divided by 2)}}
  %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 0 tgt_dim = 1 : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @all_to_all_subgroup_divides(%x: tensor<4x6xf32>) -> tensor<12x2xf32> {
  // expected-error @+1 {{'sd.all_to_all' op subgroup_size 3 does not divide the mesh axis "context" of size 4}}
  %y = sd.all_to_all %x @mesh axes = ["context"] src_dim = 0 tgt_dim = 1 subgroup_size = 3 : (tensor<4x6xf32>) -> tensor<12x2xf32>
  return %y : tensor<12x2xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @all_to_all_subgroup_shape(%x: tensor<4x8xf32>) -> tensor<16x2xf32> {
  // expected-error @+1 {{'sd.all_to_all' op result type 'tensor<16x2xf32>' differs from the expected 'tensor<8x4xf32>' (src_dim 0 times 2, tgt_dim 1 divided by 2)}}
  %y = sd.all_to_all %x @mesh axes = ["context"] src_dim = 0 tgt_dim = 1 subgroup_size = 2 : (tensor<4x8xf32>) -> tensor<16x2xf32>
  return %y : tensor<16x2xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @all_to_all_subgroup_tgt(%x: tensor<4x3xf32>) -> tensor<8x1xf32> {
  // expected-error @+1 {{'sd.all_to_all' op tgt_dim 1 of size 3 is not divisible by the subgroups of 2 members of mesh axis "context" of size 4}}
  %y = sd.all_to_all %x @mesh axes = ["context"] src_dim = 0 tgt_dim = 1 subgroup_size = 2 : (tensor<4x3xf32>) -> tensor<8x1xf32>
  return %y : tensor<8x1xf32>
}

//===----------------------------------------------------------------------===//
// sd.collective_permute_start, sd.collective_permute_done
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["context"=2]>
func.func @permute_start_without_done(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute_start' op must have one user, an sd.collective_permute_done}}
  %p = sd.collective_permute_start %x @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<4x8xf32>
  return %p : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=2]>
func.func @permute_done_other_source(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = sd.collective_permute_start %x @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<4x8xf32>
  // expected-error @+1 {{'sd.collective_permute_done' op names a source that is not the operand of its sd.collective_permute_start}}
  %d = sd.collective_permute_done %p, %z : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

func.func @permute_done_without_start(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute_done' op completes a value that no sd.collective_permute_start defines}}
  %d = sd.collective_permute_done %x, %x : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=2]>
func.func @permute_start_member_range(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute_start' op pair [0, 2] names member 2, outside the groups of}}
  %p = sd.collective_permute_start %x @mesh axes = ["context"] pairs = [[0, 2]] : tensor<4x8xf32>
  %d = sd.collective_permute_done %p, %x : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=2]>
func.func @permute_start_two_sources(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute_start' op lists member 0 as the source of two pairs}}
  %p = sd.collective_permute_start %x @mesh axes = ["context"] pairs = [[0, 1], [0, 0]] : tensor<4x8xf32>
  %d = sd.collective_permute_done %p, %x : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// sd.collective_permute
//===----------------------------------------------------------------------===//

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_type(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'sd.collective_permute' op requires the same type for all operands and results}}
  %y = "sd.collective_permute"(%x) <{mesh = @mesh, axes = ["context"], pairs = array<i64: 0, 1>}> : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_dynamic(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @+1 {{'sd.collective_permute' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type values, but got 'tensor<?x8xbf16>'}}
  %y = sd.collective_permute %x @mesh axes = ["context"] pairs = [[0, 1]] : tensor<?x8xbf16>
  return %y : tensor<?x8xbf16>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_no_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op lists no mesh axis}}
  %y = sd.collective_permute %x @mesh axes = [] pairs = [] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "context"=4]>
func.func @collective_permute_axis_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op lists mesh axis "context" twice}}
  %y = sd.collective_permute %x @mesh axes = ["context", "data", "context"] pairs = [[0, 1]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_odd_pairs(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op has 3 integers in pairs; expected an even number}}
  %y = "sd.collective_permute"(%x) <{mesh = @mesh, axes = ["context"], pairs = array<i64: 0, 1, 2>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_source_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op lists member 0 as the source of two pairs}}
  %y = sd.collective_permute %x @mesh axes = ["context"] pairs = [[0, 1], [0, 2]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_target_twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op lists member 3 as the target of two pairs}}
  %y = sd.collective_permute %x @mesh axes = ["context"] pairs = [[1, 3], [2, 3]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @collective_permute_mesh_missing(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op refers to @mesh, which is not an sd.mesh}}
  %y = sd.collective_permute %x @mesh axes = ["context"] pairs = [[0, 1]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["context"=4]>
func.func @collective_permute_unknown_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op names mesh axis "ring", which mesh @mesh does not have}}
  %y = sd.collective_permute %x @mesh axes = ["ring"] pairs = [[1, 0]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "fsdp"=2]>
func.func @collective_permute_member_out_of_range(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sd.collective_permute' op pair [3, 4] names member 4, outside the groups of mesh axes "data", "fsdp" of total size 4}}
  %y = sd.collective_permute %x @mesh axes = ["data", "fsdp"] pairs = [[0, 3], [3, 4]] : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// sd.reshard
//===----------------------------------------------------------------------===//

// -----

func.func @reshard_mesh_missing(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding refers to @mesh, which is not an sd.mesh}}
  %y = sd.reshard %x sharding = <@mesh, [{}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_rank(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding of the resharded value has 1 dimensions but the tensor has rank 2}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_unknown_axis(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding of the resharded value names mesh axis "fsdp", which mesh @mesh does not have}}
  %y = sd.reshard %x sharding = <@mesh, [{"fsdp"}, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_axis_twice(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding of the resharded value uses mesh axis "data" twice}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}, {}], replicated = ["data"]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_open(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding dimension 1 is open; a reshard needs closed dimensions}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}, {?}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_priority(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'sd.reshard' op sharding dimension 0 has priority p1; a reshard's sharding has no priorities}}
  %y = sd.reshard %x sharding = <@mesh, [{"data"}p1, {}]> : tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

sd.mesh @mesh = <["data"=2, "tensor"=3]>
func.func @reshard_type(%x: tensor<8x4xf32>) -> tensor<8x4xbf16> {
  // expected-error @+1 {{'sd.reshard' op requires the same type for all operands and results}}
  %y = "sd.reshard"(%x) <{sharding = #sd.sharding<@mesh, [{"data"}, {}]>}> : (tensor<8x4xf32>) -> tensor<8x4xbf16>
  return %y : tensor<8x4xbf16>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @axis_index_none() -> tensor<f32> {
  // expected-error @+1 {{'sd.axis_index' op lists no mesh axis}}
  %i = sd.axis_index @mesh axes = [] : tensor<f32>
  return %i : tensor<f32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @axis_index_twice() -> tensor<f32> {
  // expected-error @+1 {{'sd.axis_index' op lists mesh axis "data" twice}}
  %i = sd.axis_index @mesh axes = ["data", "data"] : tensor<f32>
  return %i : tensor<f32>
}

// -----

func.func @axis_index_no_mesh() -> tensor<f32> {
  // expected-error @+1 {{'sd.axis_index' op refers to @mesh, which is not an sd.mesh}}
  %i = sd.axis_index @mesh axes = ["data"] : tensor<f32>
  return %i : tensor<f32>
}

// -----

sd.mesh @mesh = <["data"=2]>
func.func @axis_index_unknown_axis() -> tensor<f32> {
  // expected-error @+1 {{'sd.axis_index' op names mesh axis "tensor", which mesh @mesh does not have}}
  %i = sd.axis_index @mesh axes = ["tensor"] : tensor<f32>
  return %i : tensor<f32>
}
