// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @fill
func.func @fill() -> (tensor<64x64xf32>, tensor<i64>) {
  // CHECK: graph.fill {value = 0.000000e+00 : f64} : tensor<64x64xf32>
  %z = graph.fill {value = 0.0 : f64} : tensor<64x64xf32>
  // CHECK: graph.fill {value = 1.000000e+00 : f64} : tensor<i64>
  %one = graph.fill {value = 1.0 : f64} : tensor<i64>
  return %z, %one : tensor<64x64xf32>, tensor<i64>
}
