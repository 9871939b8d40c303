// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @project
func.func @project(%x: tensor<2x8x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  // CHECK: graph.linear %{{.*}}, %{{.*}} {param = "layers.0.attn.wq"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  %y = graph.linear %x, %w {param = "layers.0.attn.wq"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  // CHECK: graph.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %z = graph.linear %x, %w, %b : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %y, %z : tensor<2x8x32xf32>, tensor<2x8x32xf32>
}
