// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @types(%dy: tensor<2x8xf32>, %g: tensor<2x8xf32>, %u: tensor<2x4xf32>) {
  // expected-error @below {{all of {grad, gate, up, gate_grad, up_grad} have same type}}
  %dg, %du = "graph.swiglu_grad"(%dy, %g, %u) : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}
