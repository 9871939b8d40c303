// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @missing_scales(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>) {
  // expected-error @below {{tensorwise FP8 operands need scales_inv(a_scale_inv, b_scale_inv): the dequantization factors 1 / scale that cuBLASLt multiplies by}}
  %d = kernel.gemm %a, %b {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<16x128xbf16>
  return
}

// -----

// scales(...) are block scales: a tensorwise GEMM passes the inverses.
func.func @tensorwise_quantize_scales(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @below {{(scales(...) are block scales, with a_block and b_block)}}
  %d = kernel.gemm %a, %b scales(%s, %s) {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  return
}

// -----

func.func @block_scales_inv(%a: tensor<256x512xf8E4M3FN>, %b: tensor<384x512xf8E4M3FN>, %sa: tensor<256x4xf32>, %sb: tensor<3x4xf32>, %i: tensor<f32>) {
  // expected-error @below {{block-scaled operands take scales(a_scale, b_scale) per block, not scales_inv}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) scales_inv(%i, %i) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<f32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @e5m2_pair(%a: tensor<16x64xf8E5M2>, %b: tensor<128x64xf8E5M2>, %s: tensor<f32>) {
  // expected-error @below {{E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand must be E4M3}}
  %d = kernel.gemm %a, %b scales_inv(%s, %s) {transpose_b} : (tensor<16x64xf8E5M2>, tensor<128x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  return
}

// -----

func.func @mixed(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xbf16>, %s: tensor<f32>) {
  // expected-error @below {{a and b must both be FP8 or both be wider}}
  %d = kernel.gemm %a, %b scales_inv(%s, %s) {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xbf16>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  return
}

// -----

func.func @contraction(%a: tensor<16x64xbf16>, %b: tensor<32x32xbf16>) {
  // expected-error @below {{contraction dimensions differ: a gives K = 64, b gives K = 32}}
  %d = kernel.gemm %a, %b : (tensor<16x64xbf16>, tensor<32x32xbf16>) -> tensor<16x32xf32>
  return
}

// -----

func.func @copy_transpose(%a: tensor<16x64xbf16>) {
  // expected-error @below {{expected result of shape [64, 16], got [16, 64]}}
  %t = kernel.copy %a {transpose} : (tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return
}

// -----

func.func @block_scales_without_blocks(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<256x4xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{ranked scales need a_block and b_block}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_mixed_with_tensorwise(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<256x4xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<f32>) {
  // expected-error @below {{cuBLASLt does not mix tensorwise and block scales}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 1, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<f32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_not_k_major(%a: tensor<512x256xf8E4M3FN>, %sa: tensor<512x2xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{block-scaled operands must be K-major}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_a, transpose_b} : (tensor<512x256xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<512x2xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_shape(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<256x8xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{a_block must be [1, 128] (VEC128) or [128, 128] (BLK128x128)}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 1, 64>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x8xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_both_square(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<2x4xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{both operands in 128x128 blocks}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 128, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_dim(%a: tensor<200x512xf8E4M3FN>, %sa: tensor<200x4xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{block-scaled GEMM needs M a multiple of 128; got 200}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<200x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<200x4xf32>, tensor<3x4xf32>) -> tensor<200x384xbf16>
  return
}

// -----

func.func @block_scale_shape(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<256x2xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{a_scale}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x2xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @block_epilogue(%a: tensor<256x512xf8E4M3FN>, %sa: tensor<256x4xf32>, %b: tensor<384x512xf8E4M3FN>, %sb: tensor<3x4xf32>, %bias: tensor<384xbf16>) {
  // expected-error @below {{block-scaled GEMMs take no epilogue (got 'bias')}}
  %d = kernel.gemm %a, %b scales(%sa, %sb) bias(%bias) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, epilogue = "bias", transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<256x4xf32>, tensor<3x4xf32>, tensor<384xbf16>) -> tensor<256x384xbf16>
  return
}

// -----

func.func @overwrite_without_accumulator(%a: tensor<16x64xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @below {{first_microbatch_overwrites needs an accumulate operand}}
  %d = kernel.gemm %a, %b {first_microbatch_overwrites, role = "wgrad", transpose_a} : (tensor<16x64xbf16>, tensor<16x32xbf16>) -> tensor<64x32xf32>
  return
}

// -----

// Factors for one operand and quantize scales for the other.
func.func @block_factors_mixed(%a: tensor<256x512xf8E4M3FN>, %b: tensor<384x512xf8E4M3FN>, %fa: tensor<1024xf32>, %sb: tensor<3x4xf32>) {
  // expected-error @below {{a_scale and b_scale must both be quantize scales (2-D) or both dequantization factors (1-D)}}
  %d = kernel.gemm %a, %b scales(%fa, %sb) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<1024xf32>, tensor<3x4xf32>) -> tensor<256x384xbf16>
  return
}

// -----

// B's 3 x 4 blocks are 12 factors in cuBLASLt's layout.
func.func @block_factors_count(%a: tensor<256x512xf8E4M3FN>, %b: tensor<384x512xf8E4M3FN>, %fa: tensor<1024xf32>, %fb: tensor<16xf32>) {
  // expected-error @below {{b_scale}}
  %d = kernel.gemm %a, %b scales(%fa, %fb) {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, transpose_b} : (tensor<256x512xf8E4M3FN>, tensor<384x512xf8E4M3FN>, tensor<1024xf32>, tensor<16xf32>) -> tensor<256x384xbf16>
  return
}
