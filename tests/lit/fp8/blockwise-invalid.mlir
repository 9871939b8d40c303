// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @scale_shape(%x: tensor<16x256xbf16>) {
  // expected-error @below {{expected scales of shape [16, 2], got [16, 1]}}
  %q, %s = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E4M3FN>, tensor<16x1xf32>)
  return
}

// -----

func.func @block_rank(%x: tensor<16x256xbf16>) {
  // expected-error @below {{block must have 2 entries, got 1}}
  %q, %s = fp8.block_quantize %x {block = array<i64: 128>, dtype = f8E4M3FN} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>)
  return
}

// -----

func.func @dtype_mismatch(%x: tensor<16x256xbf16>) {
  // expected-error @below {{result element type 'f8E5M2' differs from dtype 'f8E4M3FN'}}
  %q, %s = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<16x256xbf16>) -> (tensor<16x256xf8E5M2>, tensor<16x2xf32>)
  return
}

// -----

func.func @input_rank(%x: tensor<2x8x256xbf16>) {
  // expected-error @below {{expected input of rank 2, got rank 3 [2, 8, 256]}}
  %q, %s = fp8.block_quantize %x {block = array<i64: 1, 128>, dtype = f8E4M3FN} : (tensor<2x8x256xbf16>) -> (tensor<2x8x256xf8E4M3FN>, tensor<2x2xf32>)
  return
}

// -----

func.func @zero_block(%q: tensor<16x256xf8E4M3FN>, %s: tensor<16x2xf32>) {
  // expected-error @below {{block sizes must be positive}}
  %x = fp8.block_dequantize %q, %s {block = array<i64: 0, 128>} : (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>) -> tensor<16x256xbf16>
  return
}

// -----

func.func @e5m2_both(%a: tensor<16x32xf8E5M2>, %s: tensor<f32>, %b: tensor<32x8xf8E5M2>) {
  // expected-error @below {{E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand must be E4M3}}
  %y = fp8.matmul %a, %s, %b, %s : (tensor<16x32xf8E5M2>, tensor<f32>, tensor<32x8xf8E5M2>, tensor<f32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @contraction(%a: tensor<16x32xf8E4M3FN>, %s: tensor<f32>, %b: tensor<16x8xf8E4M3FN>) {
  // expected-error @below {{contraction dimensions differ: a gives K = 32, b gives K = 16}}
  %y = fp8.matmul %a, %s, %b, %s : (tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<16x8xf8E4M3FN>, tensor<f32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @tensorwise_scale(%a: tensor<16x32xf8E4M3FN>, %s: tensor<16x1xf32>, %b: tensor<32x8xf8E4M3FN>, %t: tensor<f32>) {
  // expected-error @below {{expected a scale of rank 0, got rank 2 [16, 1]}}
  %y = fp8.matmul %a, %s, %b, %t : (tensor<16x32xf8E4M3FN>, tensor<16x1xf32>, tensor<32x8xf8E4M3FN>, tensor<f32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @bias(%a: tensor<16x32xf8E4M3FN>, %s: tensor<f32>, %b: tensor<32x8xf8E4M3FN>, %bias: tensor<16xbf16>) {
  // expected-error @below {{expected bias of shape [8], got [16]}}
  %y = fp8.matmul %a, %s, %b, %s, %bias : (tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<32x8xf8E4M3FN>, tensor<f32>, tensor<16xbf16>) -> tensor<16x8xf32>
  return
}

// -----

func.func @role(%a: tensor<16x32xf8E4M3FN>, %s: tensor<f32>, %b: tensor<32x8xf8E4M3FN>) {
  // expected-error @below {{role must be fprop, dgrad or wgrad; got 'forward'}}
  %y = fp8.matmul %a, %s, %b, %s {role = "forward"} : (tensor<16x32xf8E4M3FN>, tensor<f32>, tensor<32x8xf8E4M3FN>, tensor<f32>) -> tensor<16x8xf32>
  return
}

// -----

func.func @transpose_scales(%q: tensor<16x256xf8E4M3FN>, %s: tensor<16x2xf32>) {
  // expected-error @below {{expected result scale of shape [2, 16], got [16, 2]}}
  %t, %ts = fp8.transpose %q, %s {block = array<i64: 1, 128>} : (tensor<16x256xf8E4M3FN>, tensor<16x2xf32>) -> (tensor<256x16xf8E4M3FN>, tensor<16x2xf32>)
  return
}

// -----

func.func @transpose_type(%q: tensor<16x256xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @below {{expected result element type 'f8E4M3FN' (that of input), got 'f8E5M2'}}
  %t, %ts = fp8.transpose %q, %s : (tensor<16x256xf8E4M3FN>, tensor<f32>) -> (tensor<256x16xf8E5M2>, tensor<f32>)
  return
}

// -----

func.func @factors_block(%s: tensor<16x2xf32>) {
  // expected-error @below {{block must be [1, 128] (VEC128) or [128, 128] (BLK128x128), the layouts cuBLASLt reads on sm_90}}
  %f = fp8.block_factors %s {block = array<i64: 128, 1>} : (tensor<16x2xf32>) -> tensor<32xf32>
  return
}

// -----

func.func @factors_count(%s: tensor<2x3xf32>) {
  // 128x128 blocks: rows of 3 factors padded to 4.
  // expected-error @below {{factors}}
  %f = fp8.block_factors %s {block = array<i64: 128, 128>} : (tensor<2x3xf32>) -> tensor<6xf32>
  return
}
