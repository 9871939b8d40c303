// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @float_step(%s: tensor<f32>) {
  // expected-error @below {{must be 0D tensor of 64-bit signless integer values}}
  %s1 = graph.increment %s : tensor<f32>
  return
}
