// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @missing_scales(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>) {
  // expected-error @below {{FP8 operands need scales(a_scale, b_scale)}}
  %d = kernel.gemm %a, %b {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<16x128xbf16>
  return
}

// -----

func.func @e5m2_pair(%a: tensor<16x64xf8E5M2>, %b: tensor<128x64xf8E5M2>, %s: tensor<f32>) {
  // expected-error @below {{E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand must be E4M3}}
  %d = kernel.gemm %a, %b scales(%s, %s) {transpose_b} : (tensor<16x64xf8E5M2>, tensor<128x64xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
  return
}

// -----

func.func @mixed(%a: tensor<16x64xf8E4M3FN>, %b: tensor<128x64xbf16>, %s: tensor<f32>) {
  // expected-error @below {{a and b must both be FP8 or both be wider}}
  %d = kernel.gemm %a, %b scales(%s, %s) {transpose_b} : (tensor<16x64xf8E4M3FN>, tensor<128x64xbf16>, tensor<f32>, tensor<f32>) -> tensor<16x128xbf16>
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

func.func @overwrite_without_accumulator(%a: tensor<16x64xbf16>, %b: tensor<16x32xbf16>) {
  // expected-error @below {{first_microbatch_overwrites needs an accumulate operand}}
  %d = kernel.gemm %a, %b {first_microbatch_overwrites, role = "wgrad", transpose_a} : (tensor<16x64xbf16>, tensor<16x32xbf16>) -> tensor<64x32xf32>
  return
}
