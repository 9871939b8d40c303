// RUN: %octet-opt %s -split-input-file -verify-diagnostics

graph.variable @w : tensor<8x4xf32> {kind = "weight", init = "zeros"}
func.func @wrong_type() {
  // expected-error @below {{type 'tensor<4x8xf32>' does not match variable 'w' of type 'tensor<8x4xf32>'}}
  %w = graph.load @w : tensor<4x8xf32>
  return
}

// -----

func.func @missing() {
  // expected-error @below {{'nowhere' is not a graph.variable}}
  %w = graph.load @nowhere : tensor<4xf32>
  return
}
