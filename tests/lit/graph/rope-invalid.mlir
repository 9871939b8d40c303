// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @odd_head(%q: tensor<2x8x4x15xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @below {{head dimension must be even for rotary embedding; got 15}}
  %a = graph.rope %q, %pos {theta = 10000.0 : f64} : (tensor<2x8x4x15xf32>, tensor<2x8xi32>) -> tensor<2x8x4x15xf32>
  return
}

// -----

func.func @llama3_without_factor(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @below {{scaling = "llama3" needs factor, low_freq_factor, high_freq_factor and original_max_position}}
  %a = graph.rope %q, %pos {theta = 10000.0 : f64, scaling = "llama3"} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @positions(%q: tensor<2x8x4x16xf32>, %pos: tensor<8xi32>) {
  // expected-error @below {{expected positions of shape [2, 8], got [8]}}
  %a = graph.rope %q, %pos {theta = 10000.0 : f64} : (tensor<2x8x4x16xf32>, tensor<8xi32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @scaling(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @below {{scaling must be "none" or "llama3"; got 'yarn'}}
  %a = graph.rope %q, %pos {theta = 10000.0 : f64, scaling = "yarn"} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return
}
