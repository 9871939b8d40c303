// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @approximate(%dy: tensor<2x8xf32>, %x: tensor<2x8xf32>) {
  // expected-error @below {{approximate must be "none" or "tanh"; got 'sigmoid'}}
  %dx = graph.gelu_grad %dy, %x {approximate = "sigmoid"} : tensor<2x8xf32>
  return
}
