// RUN: %octet-opt %s --octet-attention-to-gpu -split-input-file -verify-diagnostics

func.func @f16(%q: tensor<1x128x2x64xf16>, %k: tensor<1x128x2x64xf16>, %v: tensor<1x128x2x64xf16>) -> tensor<1x128x2x64xf16> {
  // expected-error @below {{attention codegen supports bf16 only; q is 'f16' (cast it to bf16 before the attention)}}
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x128x2x64xf16>, tensor<1x128x2x64xf16>, tensor<1x128x2x64xf16>) -> (tensor<1x128x2x64xf16>, tensor<1x2x128xf32>)
  return %o : tensor<1x128x2x64xf16>
}

// -----

func.func @head_dim(%q: tensor<1x128x2x96xbf16>, %k: tensor<1x128x2x96xbf16>, %v: tensor<1x128x2x96xbf16>) -> tensor<1x128x2x96xbf16> {
  // expected-error @below {{attention codegen supports head dims 64 and 128; got 96}}
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x128x2x96xbf16>, tensor<1x128x2x96xbf16>, tensor<1x128x2x96xbf16>) -> (tensor<1x128x2x96xbf16>, tensor<1x2x128xf32>)
  return %o : tensor<1x128x2x96xbf16>
}

// -----

func.func @ragged(%q: tensor<1x200x2x64xbf16>, %k: tensor<1x200x2x64xbf16>, %v: tensor<1x200x2x64xbf16>) -> tensor<1x200x2x64xbf16> {
  // expected-error @below {{attention codegen needs the sequence to be a multiple of 128 (the query tile); got 200 (pad the batch rows, masking with cu_seqlens)}}
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x200x2x64xbf16>, tensor<1x200x2x64xbf16>, tensor<1x200x2x64xbf16>) -> (tensor<1x200x2x64xbf16>, tensor<1x2x200xf32>)
  return %o : tensor<1x200x2x64xbf16>
}
