// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @width(%dy: tensor<2x8x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @below {{expected grad of shape [2, 8, 32], got [2, 8, 64]}}
  %d = graph.embedding_grad %dy, %ids : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<256x32xf32>
  return
}

// -----

func.func @rank(%dy: tensor<2x8x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @below {{expected result of rank 2, got rank 3}}
  %d = graph.embedding_grad %dy, %ids : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<1x256x64xf32>
  return
}
