// RUN: sdopt %s -verify-diagnostics -sd-specialize-batch

// Without --batch and without sd.default_batch the batch is unknown.
// expected-error @+1 {{@loss has a dynamic batch dimension; pass --batch=N (or give the function sd.default_batch)}}
func.func @loss(%x: tensor<?x2xf32>) {
  return
}
