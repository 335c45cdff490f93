// Block functions are specialized once through their calls.
func.func private @block(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
func.func @loss(%w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %x: tensor<?x8xf32>) -> tensor<f32> {
  %h0 = call @block(%x, %w0) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %h1 = call @block(%h0, %w1) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %l = sd.mse_loss %h1, %x : tensor<?x8xf32>
  return %l : tensor<f32>
}
