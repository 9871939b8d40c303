// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @in_features(%x: tensor<2x8x64xf32>, %w: tensor<32x48xf32>) {
  // expected-error @below {{weight is [out, in]: its dimension 1 (48) must equal the input's last dimension (64)}}
  %y = graph.linear %x, %w : (tensor<2x8x64xf32>, tensor<32x48xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @bias(%x: tensor<2x8x64xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) {
  // expected-error @below {{expected bias of shape [32], got [64]}}
  %y = graph.linear %x, %w, %b : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @result(%x: tensor<2x8x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @below {{expected result of shape [2, 8, 32], got [2, 8, 64]}}
  %y = graph.linear %x, %w : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  return
}
