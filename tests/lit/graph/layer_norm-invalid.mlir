// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @bias(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<63xf32>) {
  // expected-error @below {{expected bias of shape [64], got [63]}}
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<63xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @result(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @below {{expected result of shape [2, 8, 64], got [16, 64]}}
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
  return
}
