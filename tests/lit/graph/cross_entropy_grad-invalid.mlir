// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @labels(%d: tensor<f32>, %logits: tensor<2x8x256xf32>, %labels: tensor<2x4xi32>, %mask: tensor<2x8xf32>) {
  // expected-error @below {{expected labels of shape [2, 8], got [2, 4]}}
  %dl = graph.cross_entropy_grad %d, %logits, %labels, %mask : (tensor<f32>, tensor<2x8x256xf32>, tensor<2x4xi32>, tensor<2x8xf32>) -> tensor<2x8x256xf32>
  return
}

// -----

func.func @result(%d: tensor<f32>, %logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>) {
  // expected-error @below {{expected result of shape [2, 8, 256], got [16, 256]}}
  %dl = graph.cross_entropy_grad %d, %logits, %labels, %mask : (tensor<f32>, tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<16x256xf32>
  return
}

// -----

func.func @scalar(%d: tensor<1xf32>, %logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>) {
  // expected-error @below {{must be 0D tensor of 32-bit float values}}
  %dl = graph.cross_entropy_grad %d, %logits, %labels, %mask : (tensor<1xf32>, tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x256xf32>
  return
}
