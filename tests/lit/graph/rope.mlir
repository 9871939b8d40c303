// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @rotate
func.func @rotate(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  // CHECK: graph.rope %{{.*}}, %{{.*}} {theta = 5.000000e+05 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  %a = graph.rope %q, %pos {theta = 500000.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  // CHECK: graph.rope %{{.*}}, %{{.*}} {factor = 3.200000e+01 : f64, high_freq_factor = 4.000000e+00 : f64, inverse, low_freq_factor = 1.000000e+00 : f64, original_max_position = 8192 : i64, scaling = "llama3", theta = 5.000000e+05 : f64}
  %b = graph.rope %q, %pos {theta = 500000.0 : f64, scaling = "llama3", factor = 32.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64, inverse} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return %a, %b : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}
