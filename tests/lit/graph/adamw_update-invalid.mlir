// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @moment_shape(%p: tensor<64x64xf32>, %g: tensor<64x64xf32>, %m: tensor<64xf32>, %v: tensor<64x64xf32>, %lr: tensor<f32>, %s: tensor<i64>, %k: tensor<f32>) {
  // expected-error @below {{expected exp_avg of shape [64, 64], got [64]}}
  %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, %lr, %s, %k {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
  return
}

// -----

func.func @beta(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>, %k: tensor<f32>) {
  // expected-error @below {{beta2 must lie in [0, 1); got 1}}
  %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, %lr, %s, %k {beta1 = 0.9 : f64, beta2 = 1.0 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @step_type(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<f32>, %k: tensor<f32>) {
  // expected-error @below {{must be 0D tensor of 64-bit signless integer values}}
  %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, %lr, %s, %k {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}
