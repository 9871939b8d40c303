// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @weight(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @below {{expected weight of shape [64], got [32]}}
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<32xf32>) -> (tensor<2x8x64xf32>, tensor<32xf32>)
  return
}

// -----

func.func @grad_shape(%dy: tensor<2x4x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @below {{expected grad of shape [2, 8, 64], got [2, 4, 64]}}
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x4x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  return
}

// -----

func.func @eps(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @below {{eps must be positive}}
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w {eps = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  return
}
