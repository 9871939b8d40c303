// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @kv_heads(%do: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>, %o: tensor<2x8x4x16xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @below {{kv heads (3) must divide query heads (4)}}
  %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v, %o, %lse {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>)
  return
}

// -----

func.func @lse_shape(%do: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %o: tensor<2x8x4x16xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @below {{expected lse of shape [2, 4, 8], got [2, 8, 4]}}
  %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v, %o, %lse {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
  return
}

// -----

func.func @k_grad_shape(%do: tensor<2x8x4x16xf32>, %q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>, %o: tensor<2x8x4x16xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @below {{expected k_grad of shape [2, 8, 2, 16], got [2, 8, 4, 16]}}
  %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v, %o, %lse {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>)
  return
}
