// RUN: %octet-opt %s | %octet-opt | FileCheck %s

// Recipes print with their non-default fields only.
// CHECK-LABEL: func.func @recipes
// CHECK-SAME: b = #fp8.recipe<kind = blockwise, format = e4m3, power_of_two_scales = true>
// CHECK-SAME: c = #fp8.recipe<kind = current>
// CHECK-SAME: d = #fp8.recipe<kind = delayed, amax_history_len = 16, amax_algorithm = most_recent, margin = 2>
func.func @recipes() attributes {
    d = #fp8.recipe<kind = delayed, format = hybrid, amax_history_len = 16, amax_algorithm = most_recent, margin = 2>,
    b = #fp8.recipe<kind = blockwise, format = e4m3, power_of_two_scales = true>,
    c = #fp8.recipe<kind = current>} {
  return
}

// CHECK-LABEL: func.func @delayed
func.func @delayed(%h: tensor<16xf32>, %x: tensor<16x64xbf16>, %s: tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<16x64xf8E4M3FN>) {
  // CHECK: %[[Q:.*]], %[[A:.*]] = fp8.quantize %{{.*}}, %{{.*}} {amax_reduce = ["data", "tensor"]}
  %q, %amax = fp8.quantize %x, %s {amax_reduce = ["data", "tensor"]} : (tensor<16x64xbf16>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
  // CHECK: fp8.scale_update %{{.*}}, %[[A]], %{{.*}} {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
  %h2, %s2, %s2_inv = fp8.scale_update %h, %amax, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
  return %h2, %s2, %q : tensor<16xf32>, tensor<f32>, tensor<16x64xf8E4M3FN>
}

// CHECK-LABEL: func.func @current
func.func @current(%g: tensor<16x64xf32>) -> tensor<16x64xf8E5M2> {
  // CHECK: fp8.amax %{{.*}} {amax_reduce = ["data"]} : (tensor<16x64xf32>) -> tensor<f32>
  %a = fp8.amax %g {amax_reduce = ["data"]} : (tensor<16x64xf32>) -> tensor<f32>
  // CHECK: fp8.compute_scale %{{.*}} {dtype = f8E5M2, margin = 1 : i64} : tensor<f32>
  %s, %s_inv = fp8.compute_scale %a {dtype = f8E5M2, margin = 1, eps = 1.0e-12 : f32} : tensor<f32>
  %q, %amax = fp8.quantize %g, %s : (tensor<16x64xf32>, tensor<f32>) -> (tensor<16x64xf8E5M2>, tensor<f32>)
  return %q : tensor<16x64xf8E5M2>
}
