// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<2x8x64xf32>, %b: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: graph.swiglu %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
  %y = graph.swiglu %a, %b : tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}
