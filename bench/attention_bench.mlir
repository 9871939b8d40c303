// The attention bench's shapes: a Llama 3 8B layer (32 query heads, 8 kv
// heads, head dim 128, causal) at sequence 8192 and 4096, and 8192 tokens
// packed as 8 documents (cu_seqlens; the bench draws lengths around 1024),
// forward and backward.
func.func @attention(%q: tensor<1x8192x32x128xbf16>, %k: tensor<1x8192x8x128xbf16>, %v: tensor<1x8192x8x128xbf16>, %do: tensor<1x8192x32x128xbf16>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>) -> (tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>)
  return %dq, %dk, %dv : tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>
}

func.func @attention_4096(%q: tensor<1x4096x32x128xbf16>, %k: tensor<1x4096x8x128xbf16>, %v: tensor<1x4096x8x128xbf16>, %do: tensor<1x4096x32x128xbf16>) -> (tensor<1x4096x32x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x8x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.08838834764831845 : f64} : (tensor<1x4096x32x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x8x128xbf16>) -> (tensor<1x4096x32x128xbf16>, tensor<1x32x4096xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.08838834764831845 : f64} : (tensor<1x4096x32x128xbf16>, tensor<1x4096x32x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x32x128xbf16>, tensor<1x32x4096xf32>) -> (tensor<1x4096x32x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x8x128xbf16>)
  return %dq, %dk, %dv : tensor<1x4096x32x128xbf16>, tensor<1x4096x8x128xbf16>, tensor<1x4096x8x128xbf16>
}

func.func @attention_documents(%q: tensor<1x8192x32x128xbf16>, %k: tensor<1x8192x8x128xbf16>, %v: tensor<1x8192x8x128xbf16>, %do: tensor<1x8192x32x128xbf16>, %cu: tensor<9xi32>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v, %cu {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<9xi32>) -> (tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>, tensor<9xi32>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>)
  return %dq, %dk, %dv : tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>
}

// Llama 3.2 1B's heads (32 query, 8 kv, head dim 64) at sequence 8192.
func.func @attention_d64(%q: tensor<1x8192x32x64xbf16>, %k: tensor<1x8192x8x64xbf16>, %v: tensor<1x8192x8x64xbf16>, %do: tensor<1x8192x32x64xbf16>) -> (tensor<1x8192x32x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x8x64xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.125 : f64} : (tensor<1x8192x32x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x8x64xbf16>) -> (tensor<1x8192x32x64xbf16>, tensor<1x32x8192xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.125 : f64} : (tensor<1x8192x32x64xbf16>, tensor<1x8192x32x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x32x64xbf16>, tensor<1x32x8192xf32>) -> (tensor<1x8192x32x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x8x64xbf16>)
  return %dq, %dk, %dv : tensor<1x8192x32x64xbf16>, tensor<1x8192x8x64xbf16>, tensor<1x8192x8x64xbf16>
}
