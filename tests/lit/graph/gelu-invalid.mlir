// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @approximate(%x: tensor<2x8xf32>) {
  // expected-error @below {{approximate must be "none" or "tanh"; got 'sigmoid'}}
  %y = graph.gelu %x {approximate = "sigmoid"} : tensor<2x8xf32>
  return
}

// -----

func.func @shape(%x: tensor<2x8xf32>) {
  // expected-error @below {{requires the same type for all operands and results}}
  %y = "graph.gelu"(%x) : (tensor<2x8xf32>) -> tensor<8x2xf32>
  return
}
