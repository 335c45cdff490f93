// Reshape infers its one dynamic dimension from the element count; convert
// keeps its element type.
func.func @reshape_convert(%x: tensor<?x6xf32>) -> tensor<?xbf16> {
  %r = sd.reshape %x : (tensor<?x6xf32>) -> tensor<?x2x3xf32>
  %f = sd.reshape %r : (tensor<?x2x3xf32>) -> tensor<?xf32>
  %c = sd.convert %f : tensor<?xf32> -> tensor<?xbf16>
  return %c : tensor<?xbf16>
}
