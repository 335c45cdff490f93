// What the report cannot cost is one error on the op or function at fault.
// RUN: sdopt %s -sd-print-report -split-input-file -verify-diagnostics -o /dev/null
// RUN: not sdopt %s --report=yaml 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not sdopt %s -split-input-file -sd-print-report="layout=sideways" 2>&1 | FileCheck %s --check-prefix=LAYOUT

// FORMAT: for the --report option: Cannot find option named 'yaml'!
// LAYOUT: for the --layout option: Cannot find option named 'sideways'!

// An op from another dialect states no cost.
func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.constant' op has no cost model (CostOpInterface)}}
  %f = func.constant @loss : (tensor<4xf32>) -> tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{function @loss cannot be costed: argument #0 has type 'tensor<?x4xf32>', not a static shape (run sd-specialize-batch first)}}
func.func @loss(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  return %x : tensor<?x4xf32>
}

// -----

// expected-error @+1 {{no @loss function and 2 public functions; name the function to report on}}
module {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{function @loss cannot be costed: it calls itself}}
func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @loss(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{function @external cannot be costed: it has no body}}
func.func private @external(tensor<4xf32>) -> tensor<4xf32>

func.func @loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = call @external(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
