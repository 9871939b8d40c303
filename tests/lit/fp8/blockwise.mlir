// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @blockwise_linear
func.func @blockwise_linear(%x: tensor<16x200xbf16>, %w: tensor<512x200xbf16>) -> (tensor<16x512xbf16>, tensor<200x16xf32>) {
  // Edge tiles are partial: 200 columns make 2 tiles of 128.
  // CHECK: fp8.block_quantize %{{.*}} {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<16x200xbf16>) -> (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>)
  %qx, %sx = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<16x200xbf16>) -> (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>)
  // CHECK: fp8.block_quantize %{{.*}} {block = array<i64: 128, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<512x200xbf16>) -> (tensor<512x200xf8E4M3FN>, tensor<4x2xf32>)
  %qw, %sw = fp8.block_quantize %w {block = array<i64: 128, 128>, dtype = f8E4M3FN, power_of_two} : (tensor<512x200xbf16>) -> (tensor<512x200xf8E4M3FN>, tensor<4x2xf32>)
  // CHECK: fp8.matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.0.mlp.w1", role = "fprop", transpose_b} : (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>, tensor<512x200xf8E4M3FN>, tensor<4x2xf32>) -> tensor<16x512xbf16>
  %y = fp8.matmul %qx, %sx, %qw, %sw {transpose_b, a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, role = "fprop", param = "layers.0.mlp.w1"} : (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>, tensor<512x200xf8E4M3FN>, tensor<4x2xf32>) -> tensor<16x512xbf16>
  // CHECK: fp8.transpose %{{.*}}, %{{.*}} {block = array<i64: 1, 128>} : (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>) -> (tensor<200x16xf8E4M3FN>, tensor<2x16xf32>)
  %t, %ts = fp8.transpose %qx, %sx {block = array<i64: 1, 128>} : (tensor<16x200xf8E4M3FN>, tensor<16x2xf32>) -> (tensor<200x16xf8E4M3FN>, tensor<2x16xf32>)
  // CHECK: fp8.block_dequantize %{{.*}}, %{{.*}} {block = array<i64: 128, 1>} : (tensor<200x16xf8E4M3FN>, tensor<2x16xf32>) -> tensor<200x16xf32>
  %d = fp8.block_dequantize %t, %ts {block = array<i64: 128, 1>} : (tensor<200x16xf8E4M3FN>, tensor<2x16xf32>) -> tensor<200x16xf32>
  return %y, %d : tensor<16x512xbf16>, tensor<200x16xf32>
}

// CHECK-LABEL: func.func @tensorwise_gemm
func.func @tensorwise_gemm(%dy: tensor<16x32xf8E5M2>, %sdy: tensor<f32>, %x: tensor<16x64xf8E4M3FN>, %sx: tensor<f32>, %b: tensor<32xbf16>, %xt: tensor<64x32xf8E4M3FN>) -> (tensor<32x64xf32>, tensor<64x16xf8E4M3FN>) {
  // CHECK: fp8.matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {param = "layers.0.attn.wo", role = "wgrad", transpose_a} : (tensor<16x32xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xf32>
  %dw = fp8.matmul %dy, %sdy, %x, %sx {transpose_a, role = "wgrad", param = "layers.0.attn.wo"} : (tensor<16x32xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<32x64xf32>
  // CHECK: fp8.matmul %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<32xbf16>) -> tensor<16x32xbf16>
  %w8:2 = fp8.transpose %xt, %sx : (tensor<64x32xf8E4M3FN>, tensor<f32>) -> (tensor<32x64xf8E4M3FN>, tensor<f32>)
  %y = fp8.matmul %x, %sx, %w8#0, %w8#1, %b {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>, tensor<f32>, tensor<32xbf16>) -> tensor<16x32xbf16>
  // CHECK: fp8.transpose %{{.*}}, %{{.*}} : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
  %t, %ts = fp8.transpose %x, %sx : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
  return %dw, %t : tensor<32x64xf32>, tensor<64x16xf8E4M3FN>
}

// A GEMM operand's dequantization factors in cuBLASLt's layout: [K/128, R]
// for 1x128 tiles, [R/128, ceil4(K/128)] for 128x128 blocks.
// CHECK-LABEL: func.func @block_factors
func.func @block_factors(%st: tensor<16x2xf32>, %sb: tensor<4x3xf32>) -> (tensor<32xf32>, tensor<16xf32>) {
  // CHECK: fp8.block_factors %{{.*}} {block = array<i64: 1, 128>} : (tensor<16x2xf32>) -> tensor<32xf32>
  %ft = fp8.block_factors %st {block = array<i64: 1, 128>} : (tensor<16x2xf32>) -> tensor<32xf32>
  // CHECK: fp8.block_factors %{{.*}} {block = array<i64: 128, 128>} : (tensor<4x3xf32>) -> tensor<16xf32>
  %fb = fp8.block_factors %sb {block = array<i64: 128, 128>} : (tensor<4x3xf32>) -> tensor<16xf32>
  return %ft, %fb : tensor<32xf32>, tensor<16xf32>
}
