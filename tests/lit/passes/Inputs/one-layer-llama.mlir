// A one-layer Llama (GQA, RoPE, SwiGLU, tied LM head): the input of the
// fusion pass tests, which take it through autodiff and precision first.
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
