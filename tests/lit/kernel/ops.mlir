// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @fp8_fprop
func.func @fp8_fprop(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>, %sa: tensor<f32>, %sb: tensor<f32>) -> tensor<16x128xbf16> {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}}) {param = "layers.0.mlp.w_up", role = "fprop", transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  %d = kernel.gemm %a, %b scales(%sa, %sb) {transpose_b, role = "fprop", param = "layers.0.mlp.w_up"} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  return %d : tensor<16x128xbf16>
}

// CHECK-LABEL: func.func @bf16_and_copy
func.func @bf16_and_copy(%a: tensor<16x64xbf16>, %b: tensor<64x32xbf16>) -> (tensor<16x32xf32>, tensor<64x16xbf16>) {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} : (tensor<16x64xbf16>, tensor<64x32xbf16>) -> tensor<16x32xf32>
  %d = kernel.gemm %a, %b : (tensor<16x64xbf16>, tensor<64x32xbf16>) -> tensor<16x32xf32>
  // CHECK: kernel.copy %{{.*}} {transpose} : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
  %t = kernel.copy %a {transpose} : (tensor<16x64xbf16>) -> tensor<64x16xbf16>
  return %d, %t : tensor<16x32xf32>, tensor<64x16xbf16>
}
