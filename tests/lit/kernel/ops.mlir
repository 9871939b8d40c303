// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @fp8_fprop
// CHECK-SAME: %[[IA:[^:]*]]: tensor<f32>, %[[IB:[^:]*]]: tensor<f32>
func.func @fp8_fprop(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>, %ia: tensor<f32>, %ib: tensor<f32>) -> tensor<16x128xbf16> {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} scales_inv(%[[IA]], %[[IB]]) {param = "layers.0.mlp.w_up", role = "fprop", transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  %d = kernel.gemm %a, %b scales_inv(%ia, %ib) {transpose_b, role = "fprop", param = "layers.0.mlp.w_up"} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
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

// Block-scaled FP8 (the blockwise recipe): one scale per 1x128 tile of x
// and per 128x128 block of w, in the fp8 dialect's layout.
// CHECK-LABEL: func.func @block_scaled
func.func @block_scaled(%x: tensor<256x512xf8E4M3FN>, %sx: tensor<256x4xf32>, %w: tensor<384x512xf8E4M3FN>, %sw: tensor<3x4xf32>, %c: tensor<256x384xf32>) -> tensor<256x384xf32> {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}}) accumulate(%{{.*}}) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, role = "fprop", transpose_b}
  %d = kernel.gemm %x, %w scales(%sx, %sw) accumulate(%c) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b, role = "fprop"} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>, tensor<256x384xf32>) -> tensor<256x384xf32>
  return %d : tensor<256x384xf32>
}

// The same GEMM on the factors cuBLASLt reads (fp8.block_factors): 1024
// for x's 256 x 4 tiles, 3 rows of 4 for w's blocks.
// CHECK-LABEL: func.func @block_factors
func.func @block_factors(%x: tensor<256x512xf8E4M3FN>, %fx: tensor<1024xf32>, %w: tensor<384x512xf8E4M3FN>, %fw: tensor<12xf32>) -> tensor<256x384xbf16> {
  // CHECK: kernel.gemm %{{.*}}, %{{.*}} scales(%{{.*}}, %{{.*}}) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, role = "fprop", transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<1024xf32>, tensor<12xf32>)
  %d = kernel.gemm %x, %w scales(%fx, %fw) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b, role = "fprop"} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<1024xf32>, tensor<12xf32>) -> tensor<256x384xbf16>
  return %d : tensor<256x384xbf16>
}
