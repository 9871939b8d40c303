// RUN: %octet-opt %s -split-input-file --octet-autodiff -verify-diagnostics
graph.variable @w : tensor<4x4xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
// expected-error @below {{parameter 'unused' gets no gradient: the loss returned by @forward does not depend on it}}
graph.variable @unused : tensor<4xf32> {kind = "norm", init = "ones"}
func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<f32> {
  %w = graph.load @w : tensor<4x4xf32>
  %y = graph.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = graph.cross_entropy %y, %labels, %mask : (tensor<2x4xf32>, tensor<2xi32>, tensor<2xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

graph.variable @w : tensor<4x4xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
// expected-error @below {{@forward must return exactly one value, the scalar loss (tensor<f32>)}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = graph.load @w : tensor<4x4xf32>
  %y = graph.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}


// -----

graph.variable @w : tensor<4x4xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
func.func @forward(%x: tensor<2x4xf32>, %labels: tensor<1xi32>, %mask: tensor<1xf32>) -> tensor<f32> {
  %w = graph.load @w : tensor<4x4xf32>
  %y = graph.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-error @below {{lies on the path from the parameters to the loss, but autodiff has no rule for it}}
  %z = graph.bias_grad %y : (tensor<2x4xf32>) -> tensor<4xf32>
  %zz = graph.reshape %z : (tensor<4xf32>) -> tensor<1x4xf32>
  %loss = graph.cross_entropy %zz, %labels, %mask : (tensor<1x4xf32>, tensor<1xi32>, tensor<1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
