// RUN: %octet-opt %s -split-input-file -verify-diagnostics

graph.variable @step : tensor<i64> {kind = "state", init = "zeros"}
func.func @wrong_type(%v: tensor<i32>) {
  // expected-error @below {{type 'tensor<i32>' does not match variable 'step' of type 'tensor<i64>'}}
  graph.store %v, @step : tensor<i32>
  return
}
