// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @empty() {
  // expected-error @below {{needs at least one tensor}}
  %n = graph.global_norm : () -> tensor<f32>
  return
}

// -----

func.func @scale(%a: tensor<4xf32>) {
  // expected-error @below {{scale must be positive}}
  %n = graph.global_norm %a {scale = 0.0 : f64} : (tensor<4xf32>) -> tensor<f32>
  return
}
