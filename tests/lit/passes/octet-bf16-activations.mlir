// RUN: %octet-opt %s --split-input-file --octet-autodiff --octet-bf16-activations | FileCheck %s --implicit-check-not="2x3x{{[0-9x]+}}xf32>" --implicit-check-not="<6x{{[0-9]+}}xf32>"
// RUN: %octet-opt %s --split-input-file --octet-autodiff --octet-bf16-activations="activation-dtype=f32" | FileCheck %s --check-prefix=F32 --implicit-check-not=bf16
// RUN: not %octet-opt %s --split-input-file --octet-autodiff --octet-bf16-activations="activation-dtype=fp16" 2>&1 | FileCheck %s --check-prefix=BAD

// The rule, checked on every op: batch 2 x sequence 3 (6 tokens) makes
// every activation and activation gradient tensor<2x3x...> or
// tensor<6x...>, shapes no variable has; the implicit checks reject any
// such tensor in f32. What stays f32 is checked by name below.

// BAD: octet-bf16-activations: activation-dtype must be "bf16" or "f32"; got 'fp16'

// A one-layer Llama: GQA, RoPE, SwiGLU, LM head tied to the embedding.
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

// Variables keep their f32 type.
// CHECK: graph.variable @embed : tensor<10x8xf32>
// CHECK: graph.variable @grad.embed : tensor<10x8xf32>

// Evaluation computes as training does.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %{{.*}}: tensor<2x3xf32>{{.*}}-> tensor<f32>
// CHECK: graph.embedding %{{.*}}, %{{.*}} : (tensor<10x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xbf16>
// CHECK: return %{{.*}} : tensor<f32>

// CHECK-LABEL: func.func @train_microbatch(
// The gather reads the f32 table; norms read their f32 weight.
// CHECK: %[[EMBED:.*]] = graph.load @embed : tensor<10x8xf32>
// CHECK: graph.embedding %[[EMBED]], %{{.*}} : (tensor<10x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xbf16>
// CHECK: graph.rms_norm %{{.*}}, %{{.*}} {eps = {{.*}}} : (tensor<2x3x8xbf16>, tensor<8xf32>) -> tensor<2x3x8xbf16>
// A GEMM reads one bf16 copy of its weight, made before its first use.
// CHECK: %[[WQ:.*]] = graph.load @layers.0.attn.wq : tensor<8x8xf32>
// CHECK-NEXT: %[[WQB:.*]] = graph.cast %[[WQ]] : (tensor<8x8xf32>) -> tensor<8x8xbf16>
// CHECK-NEXT: graph.linear %{{.*}}, %[[WQB]] {param = "layers.0.attn.wq"} : (tensor<2x3x8xbf16>, tensor<8x8xbf16>) -> tensor<2x3x8xbf16>
// CHECK: graph.rope %{{.*}}, %{{.*}} {theta = {{.*}}} : (tensor<2x3x2x4xbf16>, tensor<2x3xi32>) -> tensor<2x3x2x4xbf16>
// Attention: bf16 in and out, the log-sum-exp in f32.
// CHECK: graph.attention %{{.*}} : (tensor<2x3x2x4xbf16>, tensor<2x3x1x4xbf16>, tensor<2x3x1x4xbf16>) -> (tensor<2x3x2x4xbf16>, tensor<2x2x3xf32>)
// CHECK: graph.swiglu %{{.*}}, %{{.*}} : tensor<2x3x12xbf16>
// CHECK: graph.add %{{.*}}, %{{.*}} : tensor<2x3x8xbf16>
// The tied LM head reads a bf16 copy of the table, which its dgrad reuses;
// bf16 logits, f32 loss.
// CHECK: %[[EMBEDB:.*]] = graph.cast %[[EMBED]] : (tensor<10x8xf32>) -> tensor<10x8xbf16>
// CHECK-NEXT: graph.linear %{{.*}}, %[[EMBEDB]] {param = "embed"} : (tensor<2x3x8xbf16>, tensor<10x8xbf16>) -> tensor<2x3x10xbf16>
// CHECK: graph.cross_entropy %{{.*}} : (tensor<2x3x10xbf16>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<f32>
// Backward: the loss seed is f32, d_logits bf16.
// CHECK: graph.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: graph.cross_entropy_grad %{{.*}} : (tensor<f32>, tensor<2x3x10xbf16>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<2x3x10xbf16>
// dgrad writes bf16, wgrad reads bf16 and writes f32.
// CHECK: graph.matmul %{{.*}}, %[[EMBEDB]] {param = "embed", role = "dgrad"} : (tensor<6x10xbf16>, tensor<10x8xbf16>) -> tensor<6x8xbf16>
// CHECK: graph.matmul %{{.*}}, %{{.*}} {param = "embed", role = "wgrad", transpose_a} : (tensor<6x10xbf16>, tensor<6x8xbf16>) -> tensor<10x8xf32>
// Norm gradients: dx bf16, the weight gradient (a column sum) f32.
// CHECK: graph.rms_norm_grad %{{.*}} : (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>)
// CHECK: graph.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3x12xbf16>
// CHECK: graph.attention_grad %{{.*}} : (tensor<2x3x2x4xbf16>, tensor<2x3x2x4xbf16>, tensor<2x3x1x4xbf16>, tensor<2x3x1x4xbf16>, tensor<2x3x2x4xbf16>, tensor<2x2x3xf32>) -> (tensor<2x3x2x4xbf16>, tensor<2x3x1x4xbf16>, tensor<2x3x1x4xbf16>)
// CHECK: graph.rope %{{.*}}, %{{.*}} {inverse, {{.*}}} : (tensor<2x3x2x4xbf16>, tensor<2x3xi32>) -> tensor<2x3x2x4xbf16>
// The embedding's gradient scatters bf16 rows into f32; a parameter's
// gradients sum, accumulate and store in f32.
// CHECK: %[[DTABLE:.*]] = graph.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x3x8xbf16>, tensor<2x3xi32>) -> tensor<10x8xf32>
// CHECK: %[[DEMBED:.*]] = graph.add %{{.*}}, %[[DTABLE]] : tensor<10x8xf32>
// CHECK: %[[ACC:.*]] = graph.load @grad.embed : tensor<10x8xf32>
// CHECK: %[[SUM:.*]] = graph.add %[[ACC]], %[[DEMBED]] : tensor<10x8xf32>
// CHECK: graph.store %[[SUM]], @grad.embed : tensor<10x8xf32>
// CHECK: return %{{.*}} : tensor<f32>

// The optimizer step is f32 throughout and unchanged.
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-NOT: bf16
// CHECK: graph.adamw_update {{.*}} -> (tensor<10x8xf32>, tensor<10x8xf32>, tensor<10x8xf32>)
// CHECK-NOT: bf16
// CHECK: return

// F32-LABEL: func.func @train_microbatch(
// F32: graph.embedding %{{.*}} -> tensor<2x3x8xf32>
// F32: graph.attention {{.*}} -> (tensor<2x3x2x4xf32>, tensor<2x2x3xf32>)

// -----

// GPT-2 style: learned positions, LayerNorm with bias, GELU, biased
// linears, an untied LM head.
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

// CHECK-LABEL: func.func @train_microbatch(
// CHECK: graph.add %{{.*}}, %{{.*}} : tensor<2x3x8xbf16>
// CHECK: graph.layer_norm %{{.*}} : (tensor<2x3x8xbf16>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xbf16>
// A biased GEMM reads a bf16 copy of its bias too (its epilogue adds in
// the output type).
// CHECK: %[[FCB:.*]] = graph.cast %{{.*}} : (tensor<12xf32>) -> tensor<12xbf16>
// CHECK: graph.linear %{{.*}}, %{{.*}}, %[[FCB]] {param = "fc"} : (tensor<2x3x8xbf16>, tensor<12x8xbf16>, tensor<12xbf16>) -> tensor<2x3x12xbf16>
// CHECK: graph.gelu %{{.*}} {approximate = "tanh"} : tensor<2x3x12xbf16>
// CHECK: graph.gelu_grad %{{.*}}, %{{.*}} {approximate = "tanh"} : tensor<2x3x12xbf16>
// CHECK: graph.matmul {{.*}} {param = "fc", role = "wgrad", transpose_a} : (tensor<6x12xbf16>, tensor<6x8xbf16>) -> tensor<12x8xf32>
// CHECK: graph.bias_grad %{{.*}} : (tensor<2x3x12xbf16>) -> tensor<12xf32>
// CHECK: graph.layer_norm_grad %{{.*}} : (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>, tensor<8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: graph.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x3x8xbf16>, tensor<2x3xi32>) -> tensor<5x8xf32>
// CHECK: graph.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x3x8xbf16>, tensor<2x3xi32>) -> tensor<10x8xf32>
// CHECK: graph.store %{{.*}}, @grad.fc_bias : tensor<12xf32>
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-NOT: bf16
// CHECK: return
