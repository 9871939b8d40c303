// octet-precision.mlir's module at sizes where every layer GEMM fits
// cuBLASLt's block-scaled form (tokens 128, hidden 128 and 256); the LM
// head (vocabulary 8) stays BF16 by the default policy.
module {
  graph.variable @layers.0.mlp.w1 : tensor<256x128xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @layers.1.mlp.w1 : tensor<256x256xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @layers.2.mlp.w1 : tensor<256x256xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @lm_head : tensor<8x256xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}

  func.func @forward(%x: tensor<2x64x128xf32>) -> tensor<2x64x256xf32> {
    %w0 = graph.load @layers.0.mlp.w1 : tensor<256x128xf32>
    %h0 = graph.linear %x, %w0 {param = "layers.0.mlp.w1"} : (tensor<2x64x128xf32>, tensor<256x128xf32>) -> tensor<2x64x256xf32>
    return %h0 : tensor<2x64x256xf32>
  }

  func.func @train_microbatch(%x: tensor<2x64x128xf32>, %dlogits: tensor<2x64x8xf32>) -> (tensor<2x64x8xf32>, tensor<256x128xf32>, tensor<256x256xf32>, tensor<256x256xf32>, tensor<8x256xf32>) {
    %w0 = graph.load @layers.0.mlp.w1 : tensor<256x128xf32>
    %h0 = graph.linear %x, %w0 {param = "layers.0.mlp.w1"} : (tensor<2x64x128xf32>, tensor<256x128xf32>) -> tensor<2x64x256xf32>
    %h0s = graph.save %h0 : tensor<2x64x256xf32>
    %w1 = graph.load @layers.1.mlp.w1 : tensor<256x256xf32>
    %h1 = graph.linear %h0, %w1 {param = "layers.1.mlp.w1"} : (tensor<2x64x256xf32>, tensor<256x256xf32>) -> tensor<2x64x256xf32>
    %h1s = graph.save %h1 : tensor<2x64x256xf32>
    %w2 = graph.load @layers.2.mlp.w1 : tensor<256x256xf32>
    %h2 = graph.linear %h1, %w2 {param = "layers.2.mlp.w1"} : (tensor<2x64x256xf32>, tensor<256x256xf32>) -> tensor<2x64x256xf32>
    %h2s = graph.save %h2 : tensor<2x64x256xf32>
    %wh = graph.load @lm_head : tensor<8x256xf32>
    %logits = graph.linear %h2, %wh {param = "lm_head"} : (tensor<2x64x256xf32>, tensor<8x256xf32>) -> tensor<2x64x8xf32>
    %dl2 = graph.reshape %dlogits : (tensor<2x64x8xf32>) -> tensor<128x8xf32>
    %dh2 = graph.matmul %dl2, %wh {role = "dgrad", param = "lm_head"} : (tensor<128x8xf32>, tensor<8x256xf32>) -> tensor<128x256xf32>
    %h2r = graph.reshape %h2s : (tensor<2x64x256xf32>) -> tensor<128x256xf32>
    %dwh = graph.matmul %dl2, %h2r {transpose_a, role = "wgrad", param = "lm_head"} : (tensor<128x8xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
    %dh1 = graph.matmul %dh2, %w2 {role = "dgrad", param = "layers.2.mlp.w1"} : (tensor<128x256xf32>, tensor<256x256xf32>) -> tensor<128x256xf32>
    %h1r = graph.reshape %h1s : (tensor<2x64x256xf32>) -> tensor<128x256xf32>
    %dw2 = graph.matmul %dh2, %h1r {transpose_a, role = "wgrad", param = "layers.2.mlp.w1"} : (tensor<128x256xf32>, tensor<128x256xf32>) -> tensor<256x256xf32>
    %dh0 = graph.matmul %dh1, %w1 {role = "dgrad", param = "layers.1.mlp.w1"} : (tensor<128x256xf32>, tensor<256x256xf32>) -> tensor<128x256xf32>
    %h0r = graph.reshape %h0s : (tensor<2x64x256xf32>) -> tensor<128x256xf32>
    %dw1 = graph.matmul %dh1, %h0r {transpose_a, role = "wgrad", param = "layers.1.mlp.w1"} : (tensor<128x256xf32>, tensor<128x256xf32>) -> tensor<256x256xf32>
    %xr = graph.reshape %x : (tensor<2x64x128xf32>) -> tensor<128x128xf32>
    %dw0 = graph.matmul %dh0, %xr {transpose_a, role = "wgrad", param = "layers.0.mlp.w1"} : (tensor<128x256xf32>, tensor<128x128xf32>) -> tensor<256x128xf32>
    return %logits, %dw0, %dw1, %dw2, %dwh : tensor<2x64x8xf32>, tensor<256x128xf32>, tensor<256x256xf32>, tensor<256x256xf32>, tensor<8x256xf32>
  }
}

