// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @rms_norm_grad
func.func @rms_norm_grad(%dy: tensor<2x8x64xf32>, %x: tensor<2x8x64xf32>, %w: tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>) {
  // CHECK: graph.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  return %dx, %dw : tensor<2x8x64xf32>, tensor<64xf32>
}
