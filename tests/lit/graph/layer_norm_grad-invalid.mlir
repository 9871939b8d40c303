// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @bias_grad_shape(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @below {{expected bias_grad of shape [64], got [32]}}
  %dx, %dw, %db = graph.layer_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<32xf32>)
  return
}

// -----

func.func @input_grad_shape(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @below {{expected input_grad of shape [2, 8, 64], got [16, 64]}}
  %dx, %dw, %db = graph.layer_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>)
  return
}
