// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @dynamic() {
  // expected-error @below {{fill needs a static shape}}
  %z = graph.fill {value = 0.0 : f64} : tensor<?xf32>
  return
}

// -----

func.func @missing_value() {
  // expected-error @below {{requires attribute 'value'}}
  %z = graph.fill : tensor<4xf32>
  return
}
