// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @embed
func.func @embed(%table: tensor<256x64xf32>, %ids: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // CHECK: graph.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return %h : tensor<2x8x64xf32>
}
