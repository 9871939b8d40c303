// RUN: %octet-opt %s --octet-lower-to-kernel --split-input-file --verify-diagnostics

// cuBLASLt multiplies a tensorwise FP8 product by each operand's inverse
// scale: an fp8.matmul that passes quantize scales has no kernel form.
func.func @quantize_scales(%a: tensor<16x64xf8E4M3FN>, %sa: tensor<f32>, %b: tensor<32x64xf8E4M3FN>, %sb: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @below {{has tensorwise quantize scales, but its kernel form multiplies by their inverses}}
  %y = fp8.matmul %a, %sa, %b, %sb {transpose_b, role = "fprop"} : (tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<32x64xf8E4M3FN>, tensor<f32>) -> tensor<16x32xbf16>
  return %y : tensor<16x32xbf16>
}
