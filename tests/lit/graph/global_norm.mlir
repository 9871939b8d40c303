// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @global_norm
func.func @global_norm(%a: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<f32> {
  // CHECK: graph.global_norm %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<f32>
  %n = graph.global_norm %a, %b {scale = 0.25 : f64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<f32>
  return %n : tensor<f32>
}
