// The batch reaches every op through type inference.
func.func @elementwise(%x: tensor<?x16xf32>) -> tensor<?x16xf32> attributes {sd.default_batch = 8 : i64} {
  %e = sd.exp %x : tensor<?x16xf32>
  %r = sd.reduce_sum %e dims = [1] : (tensor<?x16xf32>) -> tensor<?xf32>
  %b = sd.broadcast_in_dim %r dims = [0] : (tensor<?xf32>) -> tensor<?x16xf32>
  %y = sd.div %e, %b : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
