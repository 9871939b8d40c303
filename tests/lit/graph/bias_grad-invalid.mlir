// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @width(%dy: tensor<2x8x64xf32>) {
  // expected-error @below {{expected result of shape [64], got [8]}}
  %db = graph.bias_grad %dy : (tensor<2x8x64xf32>) -> tensor<8xf32>
  return
}
