// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @embed
func.func @embed(%table: tensor<256x64xf32>, %ids: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // CHECK: graph.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return %h : tensor<2x8x64xf32>
}

// The gather rounds as it copies: BF16 activations read the F32 table.
// CHECK-LABEL: func.func @embed_bf16
func.func @embed_bf16(%table: tensor<256x64xf32>, %ids: tensor<2x8xi32>) -> tensor<2x8x64xbf16> {
  // CHECK: graph.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xbf16>
  return %h : tensor<2x8x64xbf16>
}
