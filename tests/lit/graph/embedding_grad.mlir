// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @embedding_grad
func.func @embedding_grad(%dy: tensor<2x8x64xf32>, %ids: tensor<2x8xi32>) -> tensor<256x64xf32> {
  // CHECK: graph.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<256x64xf32>
  %d = graph.embedding_grad %dy, %ids : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<256x64xf32>
  return %d : tensor<256x64xf32>
}

// BF16 gradients scatter-add into an F32 table gradient.
// CHECK-LABEL: func.func @embedding_grad_bf16
func.func @embedding_grad_bf16(%dy: tensor<2x8x64xbf16>, %ids: tensor<2x8xi32>) -> tensor<256x64xf32> {
  // CHECK: graph.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<256x64xf32>
  %d = graph.embedding_grad %dy, %ids : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> tensor<256x64xf32>
  return %d : tensor<256x64xf32>
}
