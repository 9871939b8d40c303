// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @lr_schedule
func.func @lr_schedule(%s: tensor<i64>) -> tensor<f32> {
  // CHECK: graph.lr_schedule %{{.*}} {lr = 3.000000e-04 : f64, min_lr_ratio = 1.000000e-01 : f64, total_steps = 200 : i64, warmup_steps = 10 : i64} : (tensor<i64>) -> tensor<f32>
  %lr = graph.lr_schedule %s {lr = 3.0e-4 : f64, warmup_steps = 10 : i64, total_steps = 200 : i64, min_lr_ratio = 0.1 : f64} : (tensor<i64>) -> tensor<f32>
  return %lr : tensor<f32>
}
