// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @narrow
func.func @narrow(%x: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  // CHECK: graph.cast %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  %b = graph.cast %x : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  return %b : tensor<2x8xbf16>
}
