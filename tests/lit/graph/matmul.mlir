// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @grads
func.func @grads(%dy: tensor<16x32xf32>, %w: tensor<32x64xf32>, %x: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<32x64xf32>) {
  // CHECK: graph.matmul %{{.*}}, %{{.*}} {param = "layers.0.attn.wq", role = "dgrad"} : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  %dx = graph.matmul %dy, %w {role = "dgrad", param = "layers.0.attn.wq"} : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} {role = "wgrad", transpose_a} : (tensor<16x32xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  %dw = graph.matmul %dy, %x {transpose_a, role = "wgrad"} : (tensor<16x32xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
  return %dx, %dw : tensor<16x64xf32>, tensor<32x64xf32>
}
