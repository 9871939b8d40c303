// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @swiglu_grad
func.func @swiglu_grad(%dy: tensor<2x8x128xf32>, %g: tensor<2x8x128xf32>, %u: tensor<2x8x128xf32>) -> (tensor<2x8x128xf32>, tensor<2x8x128xf32>) {
  // CHECK: graph.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x8x128xf32>
  %dg, %du = graph.swiglu_grad %dy, %g, %u : tensor<2x8x128xf32>
  return %dg, %du : tensor<2x8x128xf32>, tensor<2x8x128xf32>
}
