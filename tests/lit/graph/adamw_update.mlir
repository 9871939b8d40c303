// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @adamw_update
func.func @adamw_update(%p: tensor<64x64xf32>, %g: tensor<64x64xf32>, %m: tensor<64x64xf32>, %v: tensor<64x64xf32>, %lr: tensor<f32>, %s: tensor<i64>, %k: tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  // CHECK: graph.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
  %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, %lr, %s, %k {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
  return %p1, %m1, %v1 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}
