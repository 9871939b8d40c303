// The attention bench's shape: a Llama 3 8B layer at sequence 8192 (32 query
// heads, 8 kv heads, head dim 128, causal), forward and backward.
func.func @attention(%q: tensor<1x8192x32x128xbf16>, %k: tensor<1x8192x8x128xbf16>, %v: tensor<1x8192x8x128xbf16>, %do: tensor<1x8192x32x128xbf16>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>) -> (tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.08838834764831845 : f64} : (tensor<1x8192x32x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x32x128xbf16>, tensor<1x32x8192xf32>) -> (tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>)
  return %dq, %dk, %dv : tensor<1x8192x32x128xbf16>, tensor<1x8192x8x128xbf16>, tensor<1x8192x8x128xbf16>
}
