// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @gelu_grad
func.func @gelu_grad(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  // CHECK: graph.gelu_grad %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %a = graph.gelu_grad %dy, %x : tensor<2x8x64xf32>
  // CHECK: graph.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x8x64xf32>
  %b = graph.gelu_grad %dy, %x {approximate = "tanh"} : tensor<2x8x64xf32>
  return %a, %b : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}
