// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @gqa
func.func @gqa(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %cu: tensor<?xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  // CHECK: graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<?xi32>)
  %p, %lse2 = graph.attention %q, %k, %v, %cu {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<?xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return %o, %p : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}
