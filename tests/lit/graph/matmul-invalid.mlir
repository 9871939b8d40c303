// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @contraction(%a: tensor<16x32xf32>, %b: tensor<16x64xf32>) {
  // expected-error @below {{contraction dimensions differ: lhs gives K = 32, rhs gives K = 16}}
  %c = graph.matmul %a, %b : (tensor<16x32xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @role(%a: tensor<16x32xf32>, %b: tensor<32x64xf32>) {
  // expected-error @below {{role must be fprop, dgrad or wgrad; got 'backward'}}
  %c = graph.matmul %a, %b {role = "backward"} : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  return
}

// -----

func.func @rank(%a: tensor<2x16x32xf32>, %b: tensor<32x64xf32>) {
  // expected-error @below {{expected lhs of rank 2, got rank 3 [2, 16, 32]}}
  %c = graph.matmul %a, %b : (tensor<2x16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  return
}
