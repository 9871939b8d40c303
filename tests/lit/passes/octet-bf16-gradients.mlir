// RUN: %octet-opt %s --split-input-file --octet-autodiff --octet-bf16-activations --octet-bf16-gradients | FileCheck %s
// RUN: %octet-opt %s --split-input-file --octet-autodiff --octet-bf16-activations --octet-bf16-gradients="head-chunk-tokens=4" | FileCheck %s --check-prefix=CHUNKED

// The accumulators that a wgrad GEMM alone writes become BF16, with the
// GEMM, the loads and the zeros stored into them; the gradient norm and
// AdamW read them as they are (their kernels widen to f32).

// A one-layer Llama, LM head tied to the embedding: the embedding's
// accumulator takes the head's wgrad and the gather's scatter-add and
// stays f32, as do the norms' column sums.
graph.variable @embed : tensor<10x8xf32> {kind = "embedding", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn_norm : tensor<8xf32> {kind = "norm", init = "ones"}
graph.variable @layers.0.attn.wq : tensor<8x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wk : tensor<4x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wv : tensor<4x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wo : tensor<8x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp_norm : tensor<8xf32> {kind = "norm", init = "ones"}
graph.variable @layers.0.mlp.w_gate : tensor<12x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp.w_up : tensor<12x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp.w_down : tensor<8x12xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @final_norm : tensor<8xf32> {kind = "norm", init = "ones"}

func.func @forward(%tokens: tensor<2x3xi32>, %labels: tensor<2x3xi32>, %mask: tensor<2x3xf32>, %pos: tensor<2x3xi32>) -> tensor<f32> {
  %embed = graph.load @embed : tensor<10x8xf32>
  %h0 = graph.embedding %embed, %tokens : (tensor<10x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %n1w = graph.load @layers.0.attn_norm : tensor<8xf32>
  %n1 = graph.rms_norm %h0, %n1w {eps = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %wq = graph.load @layers.0.attn.wq : tensor<8x8xf32>
  %q = graph.linear %n1, %wq {param = "layers.0.attn.wq"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %wk = graph.load @layers.0.attn.wk : tensor<4x8xf32>
  %k = graph.linear %n1, %wk {param = "layers.0.attn.wk"} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %wv = graph.load @layers.0.attn.wv : tensor<4x8xf32>
  %v = graph.linear %n1, %wv {param = "layers.0.attn.wv"} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %q4 = graph.reshape %q : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
  %k4 = graph.reshape %k : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
  %v4 = graph.reshape %v : (tensor<2x3x4xf32>) -> tensor<2x3x1x4xf32>
  %qr = graph.rope %q4, %pos {theta = 10000.0 : f64} : (tensor<2x3x2x4xf32>, tensor<2x3xi32>) -> tensor<2x3x2x4xf32>
  %kr = graph.rope %k4, %pos {theta = 10000.0 : f64} : (tensor<2x3x1x4xf32>, tensor<2x3xi32>) -> tensor<2x3x1x4xf32>
  %o, %lse = graph.attention %qr, %kr, %v4 {causal, scale = 0.5 : f64} : (tensor<2x3x2x4xf32>, tensor<2x3x1x4xf32>, tensor<2x3x1x4xf32>) -> (tensor<2x3x2x4xf32>, tensor<2x2x3xf32>)
  %o3 = graph.reshape %o : (tensor<2x3x2x4xf32>) -> tensor<2x3x8xf32>
  %wo = graph.load @layers.0.attn.wo : tensor<8x8xf32>
  %a = graph.linear %o3, %wo {param = "layers.0.attn.wo"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %h1 = graph.add %h0, %a : tensor<2x3x8xf32>
  %n2w = graph.load @layers.0.mlp_norm : tensor<8xf32>
  %n2 = graph.rms_norm %h1, %n2w {eps = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %wg = graph.load @layers.0.mlp.w_gate : tensor<12x8xf32>
  %g = graph.linear %n2, %wg {param = "layers.0.mlp.w_gate"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
  %wu = graph.load @layers.0.mlp.w_up : tensor<12x8xf32>
  %u = graph.linear %n2, %wu {param = "layers.0.mlp.w_up"} : (tensor<2x3x8xf32>, tensor<12x8xf32>) -> tensor<2x3x12xf32>
  %s = graph.swiglu %g, %u : tensor<2x3x12xf32>
  %wd = graph.load @layers.0.mlp.w_down : tensor<8x12xf32>
  %m = graph.linear %s, %wd {param = "layers.0.mlp.w_down"} : (tensor<2x3x12xf32>, tensor<8x12xf32>) -> tensor<2x3x8xf32>
  %h2 = graph.add %h1, %m : tensor<2x3x8xf32>
  %fw = graph.load @final_norm : tensor<8xf32>
  %f = graph.rms_norm %h2, %fw {eps = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %logits = graph.linear %f, %embed {param = "embed"} : (tensor<2x3x8xf32>, tensor<10x8xf32>) -> tensor<2x3x10xf32>
  %loss = graph.cross_entropy %logits, %labels, %mask : (tensor<2x3x10xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK: graph.variable @grad.embed : tensor<10x8xf32>
// CHECK: graph.variable @grad.layers.0.attn_norm : tensor<8xf32>
// CHECK: graph.variable @grad.layers.0.attn.wq : tensor<8x8xbf16>
// CHECK: graph.variable @grad.layers.0.attn.wk : tensor<4x8xbf16>
// CHECK: graph.variable @grad.layers.0.attn.wv : tensor<4x8xbf16>
// CHECK: graph.variable @grad.layers.0.attn.wo : tensor<8x8xbf16>
// CHECK: graph.variable @grad.layers.0.mlp_norm : tensor<8xf32>
// CHECK: graph.variable @grad.layers.0.mlp.w_gate : tensor<12x8xbf16>
// CHECK: graph.variable @grad.layers.0.mlp.w_up : tensor<12x8xbf16>
// CHECK: graph.variable @grad.layers.0.mlp.w_down : tensor<8x12xbf16>
// CHECK: graph.variable @grad.final_norm : tensor<8xf32>
// CHECK-LABEL: func.func @train_microbatch(
// CHECK: graph.matmul {{.*}} {param = "embed", role = "wgrad", transpose_a} : (tensor<6x10xbf16>, tensor<6x8xbf16>) -> tensor<10x8xf32>
// CHECK: %[[DOWN:.*]] = graph.matmul {{.*}} {param = "layers.0.mlp.w_down", role = "wgrad", transpose_a} : (tensor<6x8xbf16>, tensor<6x12xbf16>) -> tensor<8x12xbf16>
// CHECK: %[[ACC:.*]] = graph.load @grad.layers.0.mlp.w_down : tensor<8x12xbf16>
// CHECK-NEXT: %[[SUM:.*]] = graph.add %[[ACC]], %[[DOWN]] : tensor<8x12xbf16>
// CHECK-NEXT: graph.store %[[SUM]], @grad.layers.0.mlp.w_down : tensor<8x12xbf16>
// CHECK-LABEL: func.func @optimizer_step(
// CHECK: %[[WQ:.*]] = graph.load @grad.layers.0.attn.wq : tensor<8x8xbf16>
// CHECK: graph.global_norm {{.*}} : (tensor<10x8xf32>, tensor<8xf32>, tensor<8x8xbf16>,
// CHECK: graph.adamw_update %{{.*}}, %[[WQ]], {{.*}} : (tensor<8x8xf32>, tensor<8x8xbf16>, tensor<8x8xf32>, tensor<8x8xf32>,
// CHECK: %[[ZERO:.*]] = graph.fill {value = 0.000000e+00 : f64} : tensor<8x8xbf16>
// CHECK-NEXT: graph.store %[[ZERO]], @grad.layers.0.attn.wq : tensor<8x8xbf16>

// -----

// GPT-2 style: biased linears, an untied LM head.
graph.variable @embed : tensor<10x8xf32> {kind = "embedding", init = "normal", init_std = 0.02 : f64}
graph.variable @pos_embed : tensor<5x8xf32> {kind = "embedding", init = "normal", init_std = 0.02 : f64}
graph.variable @ln : tensor<8xf32> {kind = "norm", init = "ones"}
graph.variable @ln_bias : tensor<8xf32> {kind = "bias", init = "zeros"}
graph.variable @fc : tensor<12x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @fc_bias : tensor<12xf32> {kind = "bias", init = "zeros"}
graph.variable @proj : tensor<8x12xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @lm_head : tensor<10x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}

func.func @forward(%tokens: tensor<2x3xi32>, %labels: tensor<2x3xi32>, %mask: tensor<2x3xf32>, %pos: tensor<2x3xi32>) -> tensor<f32> {
  %embed = graph.load @embed : tensor<10x8xf32>
  %e = graph.embedding %embed, %tokens : (tensor<10x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %pembed = graph.load @pos_embed : tensor<5x8xf32>
  %p = graph.embedding %pembed, %pos : (tensor<5x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %h0 = graph.add %e, %p : tensor<2x3x8xf32>
  %lw = graph.load @ln : tensor<8xf32>
  %lb = graph.load @ln_bias : tensor<8xf32>
  %n = graph.layer_norm %h0, %lw, %lb {eps = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %fc = graph.load @fc : tensor<12x8xf32>
  %fcb = graph.load @fc_bias : tensor<12xf32>
  %up = graph.linear %n, %fc, %fcb {param = "fc"} : (tensor<2x3x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x3x12xf32>
  %act = graph.gelu %up {approximate = "tanh"} : tensor<2x3x12xf32>
  %proj = graph.load @proj : tensor<8x12xf32>
  %down = graph.linear %act, %proj {param = "proj"} : (tensor<2x3x12xf32>, tensor<8x12xf32>) -> tensor<2x3x8xf32>
  %h1 = graph.add %h0, %down : tensor<2x3x8xf32>
  %head = graph.load @lm_head : tensor<10x8xf32>
  %logits = graph.linear %h1, %head {param = "lm_head"} : (tensor<2x3x8xf32>, tensor<10x8xf32>) -> tensor<2x3x10xf32>
  %loss = graph.cross_entropy %logits, %labels, %mask : (tensor<2x3x10xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK: graph.variable @grad.embed : tensor<10x8xf32>
// CHECK: graph.variable @grad.pos_embed : tensor<5x8xf32>
// CHECK: graph.variable @grad.ln : tensor<8xf32>
// CHECK: graph.variable @grad.ln_bias : tensor<8xf32>
// CHECK: graph.variable @grad.fc : tensor<12x8xbf16>
// CHECK: graph.variable @grad.fc_bias : tensor<12xf32>
// CHECK: graph.variable @grad.proj : tensor<8x12xbf16>
// CHECK: graph.variable @grad.lm_head : tensor<10x8xbf16>
// CHECK-LABEL: func.func @train_microbatch(
// CHECK: graph.matmul {{.*}} {param = "lm_head", role = "wgrad", transpose_a} : (tensor<6x10xbf16>, tensor<6x8xbf16>) -> tensor<10x8xbf16>

// A head of more tokens (6) than octet-chunk-lm-head's chunks (4): its
// wgrad GEMMs would accumulate chunk after chunk, so it stays f32.
// CHUNKED: graph.variable @grad.fc : tensor<12x8xbf16>
// CHUNKED: graph.variable @grad.proj : tensor<8x12xbf16>
// CHUNKED: graph.variable @grad.lm_head : tensor<10x8xf32>
// CHUNKED: func.func @train_microbatch(
// CHUNKED: graph.matmul {{.*}} {param = "lm_head", role = "wgrad", transpose_a} : (tensor<6x10xbf16>, tensor<6x8xbf16>) -> tensor<10x8xf32>
