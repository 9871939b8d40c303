// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @negative(%n: tensor<f32>) {
  // expected-error @below {{max_norm must be non-negative (0 disables clipping)}}
  %m = graph.clip_scale %n {max_norm = -1.0 : f64} : tensor<f32>
  return
}
