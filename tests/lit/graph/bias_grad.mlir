// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @bias_grad
func.func @bias_grad(%dy: tensor<2x8x64xf32>) -> tensor<64xf32> {
  // CHECK: graph.bias_grad %{{.*}} : (tensor<2x8x64xf32>) -> tensor<64xf32>
  %db = graph.bias_grad %dy : (tensor<2x8x64xf32>) -> tensor<64xf32>
  return %db : tensor<64xf32>
}
