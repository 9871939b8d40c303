// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @heads
func.func @heads(%x: tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: graph.reshape %{{.*}} : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  %h = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
  return %h : tensor<2x8x4x16xf32>
}
