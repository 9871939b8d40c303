// RUN: %octet-opt %s | %octet-opt | FileCheck %s

graph.variable @w : tensor<8x4xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
// CHECK-LABEL: func.func @read
func.func @read() -> tensor<8x4xf32> {
  // CHECK: %[[W:.*]] = graph.load @w : tensor<8x4xf32>
  %w = graph.load @w : tensor<8x4xf32>
  // CHECK: return %[[W]]
  return %w : tensor<8x4xf32>
}
