// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @act
func.func @act(%x: tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16> {
  // CHECK: graph.silu %{{.*}} : tensor<2x8x64xbf16>
  %y = graph.silu %x : tensor<2x8x64xbf16>
  return %y : tensor<2x8x64xbf16>
}
