// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @mismatch(%a: tensor<2x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error @below {{requires the same type for all operands and results}}
  %y = "graph.swiglu"(%a, %b) : (tensor<2x8xf32>, tensor<8x2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @integer(%a: tensor<2x8xi32>, %b: tensor<2x8xi32>) {
  // expected-error @below {{operand #0 must be tensor of floating-point values}}
  %y = "graph.swiglu"(%a, %b) : (tensor<2x8xi32>, tensor<2x8xi32>) -> tensor<2x8xi32>
  return
}
