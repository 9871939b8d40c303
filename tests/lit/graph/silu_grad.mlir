// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @silu_grad
func.func @silu_grad(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: graph.silu_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %dx = graph.silu_grad %dy, %x : tensor<2x8x64xf32>
  return %dx : tensor<2x8x64xf32>
}
