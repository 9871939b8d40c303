// RUN: %octet-opt %s -split-input-file -verify-diagnostics

func.func @bias_without_epilogue(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) {
  // expected-error @below {{a bias operand needs epilogue bias, gelu or gelu_aux}}
  %y = kernel.gemm %x, %w bias(%b) {transpose_b} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @bias_shape(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %b: tensor<64xf32>) {
  // expected-error @below {{bias}}
  %y = kernel.gemm %x, %w bias(%b) {transpose_b, epilogue = "bias"} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @unknown_epilogue(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @below {{epilogue must be bias, gelu, gelu_aux or bias_grad; got 'relu'}}
  %y = kernel.gemm %x, %w {transpose_b, epilogue = "relu"} : (tensor<16x64xf32>, tensor<128x64xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @gelu_aux_missing(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @below {{epilogue gelu_aux has one aux result (the pre-activation); got 0}}
  %y = kernel.gemm %x, %w {transpose_b, epilogue = "gelu_aux"} : (tensor<16x64xf32>, tensor<128x64xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @accumulate_shape(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %c: tensor<16x64xf32>) {
  // expected-error @below {{accumulate operand}}
  %y = kernel.gemm %x, %w accumulate(%c) {transpose_b} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<16x64xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @gqa(%q: tensor<1x8x3x16xbf16>, %k: tensor<1x8x2x16xbf16>) {
  // expected-error @below {{kv heads (2) must divide query heads (3)}}
  %o, %lse = kernel.attention_fwd %q, %k, %k {causal, scale = 0.25 : f64} : (tensor<1x8x3x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) -> (tensor<1x8x3x16xbf16>, tensor<1x3x8xf32>)
  return
}

// -----

func.func @lse_shape(%q: tensor<1x8x4x16xbf16>, %k: tensor<1x8x2x16xbf16>) {
  // expected-error @below {{lse}}
  %o, %lse = kernel.attention_fwd %q, %k, %k {causal, scale = 0.25 : f64} : (tensor<1x8x4x16xbf16>, tensor<1x8x2x16xbf16>, tensor<1x8x2x16xbf16>) -> (tensor<1x8x4x16xbf16>, tensor<1x8x4xf32>)
  return
}

// -----

func.func @collective_kind(%g: tensor<64xf32>) {
  // expected-error @below {{kind must be all_reduce, reduce_scatter or all_gather; got 'broadcast'}}
  %r = kernel.collective %g {kind = "broadcast", group = "data", group_size = 2 : i64} : (tensor<64xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @scatter_divides(%g: tensor<63xf32>) {
  // expected-error @below {{reduce_scatter needs dimension 0 (63) divisible by the group size 8}}
  %r = kernel.collective %g {kind = "reduce_scatter", group = "data", group_size = 8 : i64} : (tensor<63xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @gather_shape(%g: tensor<8xf32>) {
  // expected-error @below {{result}}
  %r = kernel.collective %g {kind = "all_gather", group = "data", group_size = 8 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}
