// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @ratio(%s: tensor<i64>) {
  // expected-error @below {{min_lr_ratio must lie in [0, 1]; got 1.500000e+00}}
  %lr = graph.lr_schedule %s {lr = 3.0e-4 : f64, warmup_steps = 10 : i64, total_steps = 200 : i64, min_lr_ratio = 1.5 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @total(%s: tensor<i64>) {
  // expected-error @below {{total_steps must be at least 1; got 0}}
  %lr = graph.lr_schedule %s {lr = 3.0e-4 : f64, warmup_steps = 10 : i64, total_steps = 0 : i64, min_lr_ratio = 0.1 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @warmup(%s: tensor<i64>) {
  // expected-error @below {{warmup_steps must be non-negative; got -1}}
  %lr = graph.lr_schedule %s {lr = 3.0e-4 : f64, warmup_steps = -1 : i64, total_steps = 10 : i64, min_lr_ratio = 0.1 : f64} : (tensor<i64>) -> tensor<f32>
  return
}
