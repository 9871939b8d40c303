// Attention ops the GPU test (AttentionKernelTest.cpp) runs against the
// interpreter: causal and not, GQA (2 and 4 query heads per kv head), head
// dims 64 and 128, cu_seqlens documents packed within and across rows.

func.func @case0(%q: tensor<2x256x4x128xbf16>, %k: tensor<2x256x2x128xbf16>, %v: tensor<2x256x2x128xbf16>, %do: tensor<2x256x4x128xbf16>) -> (tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>, tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {causal, scale = 0.08838834764831843 : f64} : (tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>) -> (tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {causal, scale = 0.08838834764831843 : f64} : (tensor<2x256x4x128xbf16>, tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>) -> (tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>)
  return %o, %lse, %dq, %dk, %dv : tensor<2x256x4x128xbf16>, tensor<2x4x256xf32>, tensor<2x256x4x128xbf16>, tensor<2x256x2x128xbf16>, tensor<2x256x2x128xbf16>
}

func.func @case1(%q: tensor<1x384x2x64xbf16>, %k: tensor<1x384x1x64xbf16>, %v: tensor<1x384x1x64xbf16>, %do: tensor<1x384x2x64xbf16>) -> (tensor<1x384x2x64xbf16>, tensor<1x2x384xf32>, tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v {scale = 0.125 : f64} : (tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>) -> (tensor<1x384x2x64xbf16>, tensor<1x2x384xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse {scale = 0.125 : f64} : (tensor<1x384x2x64xbf16>, tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x2x64xbf16>, tensor<1x2x384xf32>) -> (tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>)
  return %o, %lse, %dq, %dk, %dv : tensor<1x384x2x64xbf16>, tensor<1x2x384xf32>, tensor<1x384x2x64xbf16>, tensor<1x384x1x64xbf16>, tensor<1x384x1x64xbf16>
}

func.func @case2(%q: tensor<2x256x4x64xbf16>, %k: tensor<2x256x1x64xbf16>, %v: tensor<2x256x1x64xbf16>, %do: tensor<2x256x4x64xbf16>, %cu: tensor<7xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>, tensor<2x256x4x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x1x64xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v, %cu {causal, scale = 0.125 : f64} : (tensor<2x256x4x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x1x64xbf16>, tensor<7xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {causal, scale = 0.125 : f64} : (tensor<2x256x4x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>, tensor<7xi32>) -> (tensor<2x256x4x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x1x64xbf16>)
  return %o, %lse, %dq, %dk, %dv : tensor<2x256x4x64xbf16>, tensor<2x4x256xf32>, tensor<2x256x4x64xbf16>, tensor<2x256x1x64xbf16>, tensor<2x256x1x64xbf16>
}

func.func @case3(%q: tensor<1x256x2x128xbf16>, %k: tensor<1x256x2x128xbf16>, %v: tensor<1x256x2x128xbf16>, %do: tensor<1x256x2x128xbf16>, %cu: tensor<5xi32>) -> (tensor<1x256x2x128xbf16>, tensor<1x2x256xf32>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>) {
  %o, %lse = kernel.attention_fwd %q, %k, %v, %cu {scale = 0.08838834764831843 : f64} : (tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<5xi32>) -> (tensor<1x256x2x128xbf16>, tensor<1x2x256xf32>)
  %dq, %dk, %dv = kernel.attention_bwd %do, %q, %k, %v, %o, %lse, %cu {scale = 0.08838834764831843 : f64} : (tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x2x256xf32>, tensor<5xi32>) -> (tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>)
  return %o, %lse, %dq, %dk, %dv : tensor<1x256x2x128xbf16>, tensor<1x2x256xf32>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>, tensor<1x256x2x128xbf16>
}
