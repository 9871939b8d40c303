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

// -----

func.func @batch_mask_smaller(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>, %batch: tensor<8xf32>) {
  // expected-error @below {{batch_mask 'tensor<8xf32>' must hold at least the chunk's 'tensor<2x8xf32>' tokens}}
  %l = graph.cross_entropy %logits, %labels, %mask over %batch : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @batch_mask_type(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>, %batch: tensor<16xbf16>) {
  // expected-error @below {{batch_mask has element type 'bf16' but loss_mask has 'f32'}}
  %l = graph.cross_entropy %logits, %labels, %mask over %batch : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>, tensor<16xbf16>) -> tensor<f32>
  return
}
