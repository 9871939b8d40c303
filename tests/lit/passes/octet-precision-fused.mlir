// A bf16 pattern written against the spec's parameter names keeps a GEMM
// whose weight fuse-qkv built from that parameter (fused_from), and does not
// count as matching nothing.
// RUN: %octet-opt %s --octet-precision="bf16-patterns=layers.*.attn.wk" | FileCheck %s --implicit-check-not=fp8.matmul
// RUN: not %octet-opt %s --octet-precision="bf16-patterns=layers.*.attn.wx" 2>&1 | FileCheck %s --check-prefix=NOMATCH

module {
  graph.variable @layers.0.attn.wqkv : tensor<48x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64, fused_from = ["layers.0.attn.wq", "layers.0.attn.wk", "layers.0.attn.wv"]}
  graph.variable @layers.0.attn.wo : tensor<16x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  func.func @forward(%x: tensor<4x16xf32>) -> (tensor<4x48xf32>, tensor<4x16xf32>) {
    %w = graph.load @layers.0.attn.wqkv : tensor<48x16xf32>
    %qkv = graph.linear %x, %w {param = "layers.0.attn.wqkv"} : (tensor<4x16xf32>, tensor<48x16xf32>) -> tensor<4x48xf32>
    %wo = graph.load @layers.0.attn.wo : tensor<16x16xf32>
    %y = graph.linear %x, %wo {param = "layers.0.attn.wo"} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
    return %qkv, %y : tensor<4x48xf32>, tensor<4x16xf32>
  }
}

// CHECK: graph.linear {{.*}} {bf16_reason = "pattern 'layers.*.attn.wk'", param = "layers.0.attn.wqkv"}
// CHECK: fp8.matmul {{.*}} {inverse_scales, param = "layers.0.attn.wo", role = "fprop", transpose_b}

// NOMATCH: error: octet-precision: bf16 pattern 'layers.*.attn.wx' matches no parameter; the parameters are: layers.0.attn.wqkv, layers.0.attn.wo
