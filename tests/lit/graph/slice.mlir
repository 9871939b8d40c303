// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @split_and_join
func.func @split_and_join(%qkv: tensor<2x8x512xf32>) -> tensor<2x8x512xf32> {
  // CHECK: graph.slice %{{.*}} {dim = 2 : i64, offset = 0 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x256xf32>
  %q = graph.slice %qkv {dim = 2 : i64, offset = 0 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x256xf32>
  %k = graph.slice %qkv {dim = 2 : i64, offset = 256 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x128xf32>
  %v = graph.slice %qkv {dim = 2 : i64, offset = 384 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x128xf32>
  // CHECK: graph.concat %{{.*}}, %{{.*}}, %{{.*}} {dim = 2 : i64} : (tensor<2x8x256xf32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x512xf32>
  %j = graph.concat %q, %k, %v {dim = 2 : i64} : (tensor<2x8x256xf32>, tensor<2x8x128xf32>, tensor<2x8x128xf32>) -> tensor<2x8x512xf32>
  return %j : tensor<2x8x512xf32>
}
