// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>) -> tensor<f32> {
  // CHECK: graph.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<f32>
  %l = graph.cross_entropy %logits, %labels, %mask : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// A chunk of a batch's tokens, divided by the batch's count.
// CHECK-LABEL: func.func @chunk
func.func @chunk(%logits: tensor<1x4x256xbf16>, %labels: tensor<1x4xi32>, %mask: tensor<1x4xf32>, %batch: tensor<2x8xf32>) -> tensor<f32> {
  // CHECK: graph.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} over %{{.*}} : (tensor<1x4x256xbf16>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x8xf32>) -> tensor<f32>
  %l = graph.cross_entropy %logits, %labels, %mask over %batch : (tensor<1x4x256xbf16>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
