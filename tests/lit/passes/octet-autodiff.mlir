// RUN: %octet-opt %s --octet-autodiff="lr=1.0e-3 warmup-steps=5 total-steps=100 min-lr-ratio=0.1 grad-clip=1.0 microbatches=4" | FileCheck %s
// RUN: %octet-opt %s --octet-autodiff="recompute=false" | FileCheck %s --check-prefix=SAVE
// RUN: %octet-opt %s --octet-autodiff="recompute-rope=true" | FileCheck %s --check-prefix=ROPE
// RUN: %octet-opt %s --octet-autodiff="microbatches=2 data-parallel=4" | FileCheck %s --check-prefix=SEED
// RUN: not %octet-opt %s --octet-autodiff="data-parallel=0" 2>&1 | FileCheck %s --check-prefix=BADDP

// A one-layer Llama with GQA, RoPE, SwiGLU and a tied LM head.
graph.variable @embed : tensor<32x16xf32> {kind = "embedding", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn_norm : tensor<16xf32> {kind = "norm", init = "ones"}
graph.variable @layers.0.attn.wq : tensor<16x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wk : tensor<8x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wv : tensor<8x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.attn.wo : tensor<16x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp_norm : tensor<16xf32> {kind = "norm", init = "ones"}
graph.variable @layers.0.mlp.w_gate : tensor<24x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp.w_up : tensor<24x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @layers.0.mlp.w_down : tensor<16x24xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
graph.variable @final_norm : tensor<16xf32> {kind = "norm", init = "ones"}

func.func @forward(%tokens: tensor<2x4xi32>, %labels: tensor<2x4xi32>, %mask: tensor<2x4xf32>, %pos: tensor<2x4xi32>) -> tensor<f32> {
  %embed = graph.load @embed : tensor<32x16xf32>
  %h0 = graph.embedding %embed, %tokens : (tensor<32x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %n1w = graph.load @layers.0.attn_norm : tensor<16xf32>
  %n1 = graph.rms_norm %h0, %n1w {eps = 1.0e-5 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wq = graph.load @layers.0.attn.wq : tensor<16x16xf32>
  %q = graph.linear %n1, %wq {param = "layers.0.attn.wq"} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %wk = graph.load @layers.0.attn.wk : tensor<8x16xf32>
  %k = graph.linear %n1, %wk {param = "layers.0.attn.wk"} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %wv = graph.load @layers.0.attn.wv : tensor<8x16xf32>
  %v = graph.linear %n1, %wv {param = "layers.0.attn.wv"} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %q4 = graph.reshape %q : (tensor<2x4x16xf32>) -> tensor<2x4x4x4xf32>
  %k4 = graph.reshape %k : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %v4 = graph.reshape %v : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %qr = graph.rope %q4, %pos {theta = 10000.0 : f64} : (tensor<2x4x4x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4x4xf32>
  %kr = graph.rope %k4, %pos {theta = 10000.0 : f64} : (tensor<2x4x2x4xf32>, tensor<2x4xi32>) -> tensor<2x4x2x4xf32>
  %o, %lse = graph.attention %qr, %kr, %v4 {causal, scale = 0.5 : f64} : (tensor<2x4x4x4xf32>, tensor<2x4x2x4xf32>, tensor<2x4x2x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4xf32>)
  %o3 = graph.reshape %o : (tensor<2x4x4x4xf32>) -> tensor<2x4x16xf32>
  %wo = graph.load @layers.0.attn.wo : tensor<16x16xf32>
  %a = graph.linear %o3, %wo {param = "layers.0.attn.wo"} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %h1 = graph.add %h0, %a : tensor<2x4x16xf32>
  %n2w = graph.load @layers.0.mlp_norm : tensor<16xf32>
  %n2 = graph.rms_norm %h1, %n2w {eps = 1.0e-5 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %wg = graph.load @layers.0.mlp.w_gate : tensor<24x16xf32>
  %g = graph.linear %n2, %wg {param = "layers.0.mlp.w_gate"} : (tensor<2x4x16xf32>, tensor<24x16xf32>) -> tensor<2x4x24xf32>
  %wu = graph.load @layers.0.mlp.w_up : tensor<24x16xf32>
  %u = graph.linear %n2, %wu {param = "layers.0.mlp.w_up"} : (tensor<2x4x16xf32>, tensor<24x16xf32>) -> tensor<2x4x24xf32>
  %s = graph.swiglu %g, %u : tensor<2x4x24xf32>
  %wd = graph.load @layers.0.mlp.w_down : tensor<16x24xf32>
  %m = graph.linear %s, %wd {param = "layers.0.mlp.w_down"} : (tensor<2x4x24xf32>, tensor<16x24xf32>) -> tensor<2x4x16xf32>
  %h2 = graph.add %h1, %m : tensor<2x4x16xf32>
  %fw = graph.load @final_norm : tensor<16xf32>
  %f = graph.rms_norm %h2, %fw {eps = 1.0e-5 : f64} : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %logits = graph.linear %f, %embed {param = "embed"} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  %loss = graph.cross_entropy %logits, %labels, %mask : (tensor<2x4x32xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// State: one accumulator and two moments per parameter, and the step.
// CHECK-DAG: graph.variable @grad.embed : tensor<32x16xf32> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @adam_m.layers.0.attn.wq : tensor<16x16xf32> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @adam_v.final_norm : tensor<16xf32> {init = "zeros", kind = "state"}
// CHECK-DAG: graph.variable @optimizer.step : tensor<i64> {init = "zeros", kind = "state"}

// The forward stays for evaluation.
// CHECK-LABEL: func.func @forward(

// CHECK-LABEL: func.func @train_microbatch(
// Saved for backward: the residual stream, the attention output and its
// log-sum-exp, the projections that feed RoPE and SwiGLU, and the logits.
// CHECK: %[[H0:.*]] = graph.save %{{.*}} : tensor<2x4x16xf32>
// The rotated q and k, not the projections before RoPE: the rotation's
// backward reads no forward value, so it is not run again.
// CHECK: %[[QR:.*]] = graph.rope %{{.*}} {theta = 1.000000e+04 : f64}
// CHECK-NEXT: graph.save %[[QR]] : tensor<2x4x4x4xf32>
// CHECK: %[[KR:.*]] = graph.rope %{{.*}} {theta = 1.000000e+04 : f64}
// CHECK-NEXT: graph.save %[[KR]] : tensor<2x4x2x4xf32>
// CHECK: graph.save %{{.*}} : tensor<2x4x4xf32>
// CHECK: graph.save %{{.*}} : tensor<2x4x4x4xf32>
// CHECK: graph.save %{{.*}} : tensor<2x4x32xf32>
// The backward's seed averages the 4 microbatches: the accumulators hold
// the gradient of the global batch's mean loss.
// CHECK: graph.fill {value = 2.500000e-01 : f64} : tensor<f32>
// CHECK: graph.cross_entropy_grad
// CHECK: graph.matmul {{.*}} {param = "embed", role = "dgrad"}
// The final norm's output is recomputed from the saved residual.
// CHECK: graph.rms_norm {{.*}} {eps = 1.000000e-05 : f64, recomputed}
// Tied head: wgrad of the LM head is the embed's gradient too.
// CHECK: graph.matmul {{.*}} {param = "embed", role = "wgrad", transpose_a}
// CHECK: graph.rms_norm_grad
// CHECK: graph.swiglu_grad
// CHECK: graph.attention_grad {{.*}} {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: graph.rope {{.*}}recomputed
// CHECK: graph.rope {{.*}} {inverse, theta = 1.000000e+04 : f64}
// CHECK: graph.embedding_grad
// Gradient accumulation into the state variables.
// CHECK: %[[ACC:.*]] = graph.load @grad.embed : tensor<32x16xf32>
// CHECK: %[[SUM:.*]] = graph.add %[[ACC]], %{{.*}} : tensor<32x16xf32>
// CHECK: graph.store %[[SUM]], @grad.embed : tensor<32x16xf32>
// CHECK: return %{{.*}} : tensor<f32>

// CHECK-LABEL: func.func @optimizer_step() -> (tensor<f32> {graph.name = "grad_norm"}, tensor<f32> {graph.name = "lr"})
// CHECK: %[[S0:.*]] = graph.load @optimizer.step : tensor<i64>
// CHECK: %[[S:.*]] = graph.increment %[[S0]] : tensor<i64>
// CHECK: graph.store %[[S]], @optimizer.step
// CHECK: %[[LR:.*]] = graph.lr_schedule %[[S]] {lr = 1.000000e-03 : f64, min_lr_ratio = 1.000000e-01 : f64, total_steps = 100 : i64, warmup_steps = 5 : i64}
// The seed averaged already: no scale on the norm or the multiplier.
// CHECK: %[[NORM:.*]] = graph.global_norm %{{[^{]*}} -> tensor<f32>
// CHECK: %[[MULT:.*]] = graph.clip_scale %[[NORM]] {max_norm = 1.000000e+00 : f64} : tensor<f32>
// No weight decay on embeddings (by default) or norms; decay on matrices.
// CHECK: graph.adamw_update {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64} {{.*}}tensor<32x16xf32>
// CHECK: graph.store %{{.*}}, @embed
// CHECK: graph.store %{{.*}}, @adam_m.embed
// CHECK: graph.store %{{.*}}, @adam_v.embed
// CHECK: %[[Z:.*]] = graph.fill {value = 0.000000e+00 : f64} : tensor<32x16xf32>
// CHECK: graph.store %[[Z]], @grad.embed
// CHECK: graph.adamw_update {{.*}} weight_decay = 0.000000e+00 : f64} {{.*}}tensor<16xf32>
// CHECK: graph.adamw_update {{.*}} weight_decay = 1.000000e-01 : f64} {{.*}}tensor<16x16xf32>
// CHECK: return %[[NORM]], %[[LR]] : tensor<f32>, tensor<f32>

// With recompute-rope (pipeline stages) the rotation is run again in the
// backward from the saved projections, and its outputs are not saved.
// ROPE-LABEL: func.func @train_microbatch(
// ROPE: %[[QR:.*]] = graph.rope %{{.*}} {theta = 1.000000e+04 : f64}
// ROPE-NOT: graph.save %[[QR]]
// ROPE: graph.rope {{.*}} {recomputed, theta = 1.000000e+04 : f64} : (tensor<2x4x2x4xf32>
// ROPE: graph.rope {{.*}} {recomputed, theta = 1.000000e+04 : f64} : (tensor<2x4x4x4xf32>
// ROPE: graph.attention_grad

// With recompute=false the norm outputs are saved instead of recomputed.
// SAVE-LABEL: func.func @train_microbatch(
// SAVE: graph.rms_norm
// SAVE-NEXT: graph.save
// SAVE-NOT: recomputed

// Two microbatches on each of four data-parallel ranks: every microbatch's
// gradients are an eighth of its mean loss's, as they would be on one rank
// with eight microbatches of the same size.
// SEED-LABEL: func.func @train_microbatch(
// SEED: graph.fill {value = 1.250000e-01 : f64} : tensor<f32>
// SEED-LABEL: func.func @optimizer_step()
// SEED: graph.global_norm %{{[^{]*}} -> tensor<f32>

// BADDP: microbatches and data-parallel must be at least 1; got 1 and 0
