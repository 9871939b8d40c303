// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// CHECK-LABEL: func.func @round_trip
func.func @round_trip(%x: tensor<16x64xbf16>, %s: tensor<f32>) -> (tensor<16x64xbf16>, tensor<f32>, tensor<f32>) {
  // CHECK: fp8.quantize %{{.*}}, %{{.*}} : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
  %q, %amax = fp8.quantize %x, %s : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
  // CHECK: fp8.dequantize %{{.*}}, %{{.*}} : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xbf16>
  %y = fp8.dequantize %q, %s : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xbf16>
  // CHECK: fp8.amax %{{.*}} : (tensor<16x64xbf16>) -> tensor<f32>
  %m = fp8.amax %x : (tensor<16x64xbf16>) -> tensor<f32>
  return %y, %amax, %m : tensor<16x64xbf16>, tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%g: tensor<16x64xf32>, %s: tensor<f32>) -> tensor<16x64xf8E5M2> {
  // CHECK: fp8.quantize %{{.*}}, %{{.*}} : (tensor<16x64xf32>, tensor<f32>) -> (tensor<16x64xf8E5M2>, tensor<f32>)
  %q, %amax = fp8.quantize %g, %s : (tensor<16x64xf32>, tensor<f32>) -> (tensor<16x64xf8E5M2>, tensor<f32>)
  return %q : tensor<16x64xf8E5M2>
}
