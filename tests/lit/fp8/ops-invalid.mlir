// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @shape(%x: tensor<16x64xbf16>, %s: tensor<f32>) {
  // expected-error @below {{expected result of shape [16, 64], got [64, 16]}}
  %q, %amax = fp8.quantize %x, %s : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
  return
}

// -----

func.func @not_fp8(%x: tensor<16x64xbf16>, %s: tensor<f32>) {
  // expected-error @below {{result #0 must be tensor of f8E4M3FN type or f8E5M2 type values}}
  %q, %amax = fp8.quantize %x, %s : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf16>, tensor<f32>)
  return
}

// -----

func.func @scale_rank(%q: tensor<16x64xf8E4M3FN>, %s: tensor<16xf32>) {
  // expected-error @below {{operand #1 must be 0D tensor of 32-bit float values}}
  %y = fp8.dequantize %q, %s : (tensor<16x64xf8E4M3FN>, tensor<16xf32>) -> tensor<16x64xbf16>
  return
}

// -----

func.func @dequantize_shape(%q: tensor<16x64xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error @below {{expected result of shape [16, 64], got [16, 32]}}
  %y = fp8.dequantize %q, %s : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<16x32xbf16>
  return
}
