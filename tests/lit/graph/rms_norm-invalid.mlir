// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @weight(%x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @below {{expected weight of shape [64], got [32]}}
  %y = graph.rms_norm %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @eps(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @below {{eps must be positive}}
  %y = graph.rms_norm %x, %w {eps = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}
