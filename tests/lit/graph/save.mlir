// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @save
func.func @save(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: graph.save %{{.*}} : tensor<2x8x64xf32>
  %s = graph.save %x : tensor<2x8x64xf32>
  return %s : tensor<2x8x64xf32>
}
