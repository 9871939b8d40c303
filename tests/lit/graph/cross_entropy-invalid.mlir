// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @labels(%logits: tensor<2x8x256xf32>, %labels: tensor<2x7xi32>, %mask: tensor<2x8xf32>) {
  // expected-error @below {{expected labels of shape [2, 8], got [2, 7]}}
  %l = graph.cross_entropy %logits, %labels, %mask : (tensor<2x8x256xf32>, tensor<2x7xi32>, tensor<2x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @mask(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<16xf32>) {
  // expected-error @below {{expected loss_mask of shape [2, 8], got [16]}}
  %l = graph.cross_entropy %logits, %labels, %mask : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @loss_type(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>) {
  // expected-error @below {{result #0 must be 0D tensor of 32-bit float values}}
  %l = graph.cross_entropy %logits, %labels, %mask : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}
