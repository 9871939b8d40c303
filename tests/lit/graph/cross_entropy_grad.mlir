// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @cross_entropy_grad
func.func @cross_entropy_grad(%d: tensor<f32>, %logits: tensor<2x8x256xf32>, %labels: tensor<2x8xi32>, %mask: tensor<2x8xf32>) -> tensor<2x8x256xf32> {
  // CHECK: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x256xf32>
  %dl = graph.cross_entropy_grad %d, %logits, %labels, %mask : (tensor<f32>, tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x256xf32>
  return %dl : tensor<2x8x256xf32>
}

// CHECK-LABEL: func.func @chunk
func.func @chunk(%d: tensor<f32>, %logits: tensor<1x4x256xbf16>, %labels: tensor<1x4xi32>, %mask: tensor<1x4xf32>, %batch: tensor<2x8xf32>) -> tensor<1x4x256xbf16> {
  // CHECK: graph.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} over %{{.*}} : (tensor<f32>, tensor<1x4x256xbf16>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x8xf32>) -> tensor<1x4x256xbf16>
  %dl = graph.cross_entropy_grad %d, %logits, %labels, %mask over %batch : (tensor<f32>, tensor<1x4x256xbf16>, tensor<1x4xi32>, tensor<1x4xf32>, tensor<2x8xf32>) -> tensor<1x4x256xbf16>
  return %dl : tensor<1x4x256xbf16>
}
