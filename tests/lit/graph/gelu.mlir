// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @act
func.func @act(%x: tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  // CHECK: graph.gelu %{{.*}} : tensor<2x8x64xf32>
  %y = graph.gelu %x : tensor<2x8x64xf32>
  // CHECK: graph.gelu %{{.*}} {approximate = "tanh"} : tensor<2x8x64xf32>
  %z = graph.gelu %x {approximate = "tanh"} : tensor<2x8x64xf32>
  return %y, %z : tensor<2x8x64xf32>, tensor<2x8x64xf32>
}
