// RUN: %octet-opt %s -split-input-file -verify-diagnostics

// expected-error @below {{amax_history_len must be at least 1, got 0}}
func.func @history_len() attributes {r = #fp8.recipe<kind = delayed, amax_history_len = 0>} {
  return
}

// -----

// expected-error @below {{margin must be non-negative, got -1}}
func.func @margin() attributes {r = #fp8.recipe<kind = current, margin = -1>} {
  return
}

// -----

// expected-error @below {{power_of_two_scales applies to the blockwise recipe only}}
func.func @pow2() attributes {r = #fp8.recipe<kind = delayed, power_of_two_scales = true>} {
  return
}

// -----

// expected-error @+2 {{expected ::octet::fp8::RecipeKind to be one of: delayed, current, blockwise}}
// expected-error @+1 {{failed to parse Fp8_RecipeAttr parameter 'kind'}}
func.func @kind() attributes {r = #fp8.recipe<kind = tensorwise>} {
  return
}

// -----

func.func @wrong_recipe(%h: tensor<16xf32>, %a: tensor<f32>, %s: tensor<f32>) {
  // expected-error @below {{scale_update belongs to the delayed recipe; got recipe kind 'current'}}
  %h2, %s2, %s2_inv = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = current>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @history_shape(%h: tensor<8xf32>, %a: tensor<f32>, %s: tensor<f32>) {
  // expected-error @below {{expected amax_history of shape [16], got [8]}}
  %h2, %s2, %s2_inv = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> (tensor<8xf32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @new_history(%h: tensor<16xf32>, %a: tensor<f32>, %s: tensor<f32>) {
  // expected-error @below {{new_history must have the history's type 'tensor<16xf32>', got 'tensor<15xf32>'}}
  %h2, %s2, %s2_inv = fp8.scale_update %h, %a, %s {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<15xf32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @dtype(%h: tensor<16xf32>, %a: tensor<f32>, %s: tensor<f32>) {
  // expected-error @below {{attribute 'dtype' failed to satisfy constraint}}
  %h2, %s2, %s2_inv = fp8.scale_update %h, %a, %s {dtype = bf16, recipe = #fp8.recipe<kind = delayed, amax_history_len = 16>} : (tensor<16xf32>, tensor<f32>, tensor<f32>) -> (tensor<16xf32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @eps(%a: tensor<f32>) {
  // expected-error @below {{eps must be positive}}
  %s, %s_inv = fp8.compute_scale %a {dtype = f8E4M3FN, eps = 0.0 : f32} : tensor<f32>
  return
}

// -----

func.func @group(%x: tensor<16x64xbf16>) {
  // expected-error @below {{amax_reduce groups are "data" and "tensor"; got 'pipeline'}}
  %a = fp8.amax %x {amax_reduce = ["pipeline"]} : (tensor<16x64xbf16>) -> tensor<f32>
  return
}
