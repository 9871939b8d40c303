// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @types(%dy: tensor<2x8xf32>, %x: tensor<2x4xf32>) {
  // expected-error @below {{requires the same type for all operands and results}}
  %dx = "graph.silu_grad"(%dy, %x) : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @integer(%dy: tensor<2x8xi32>, %x: tensor<2x8xi32>) {
  // expected-error @below {{must be tensor of floating-point values}}
  %dx = graph.silu_grad %dy, %x : tensor<2x8xi32>
  return
}
