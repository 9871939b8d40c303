// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @kv_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>) {
  // expected-error @below {{kv heads (3) must divide query heads (4)}}
  %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @head_dim(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x32xf32>, %v: tensor<2x8x2x32xf32>) {
  // expected-error @below {{q [B, S, Hq, Dh] and k [B, S, Hkv, Dh] must agree on B, S and Dh}}
  %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x32xf32>, tensor<2x8x2x32xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @value_shape(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x4x16xf32>) {
  // expected-error @below {{expected v of shape [2, 8, 2, 16], got [2, 8, 4, 16]}}
  %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @lse_shape(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>) {
  // expected-error @below {{expected lse of shape [2, 4, 8], got [2, 8, 4]}}
  %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>)
  return
}
