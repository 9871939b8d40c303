// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @clip_scale
func.func @clip_scale(%n: tensor<f32>) -> tensor<f32> {
  // CHECK: graph.clip_scale %{{.*}} {max_norm = 1.000000e+00 : f64, scale = 2.500000e-01 : f64} : tensor<f32>
  %m = graph.clip_scale %n {max_norm = 1.0 : f64, scale = 0.25 : f64} : tensor<f32>
  return %m : tensor<f32>
}
