// Which GEMMs become FP8: every GEMM of the module is checked, in order, and
// --implicit-check-not rejects any other, so each prefix states exactly where
// FP8 goes for one policy.
// RUN: %octet-opt %s --octet-precision="amax-history-len=4" | FileCheck %s --check-prefix=DEFAULT --implicit-check-not=graph.linear --implicit-check-not=graph.matmul --implicit-check-not=fp8.matmul
// RUN: %octet-opt %s --octet-precision="first-layers-bf16=1 last-layers-bf16=1" | FileCheck %s --check-prefix=FIRSTLAST --implicit-check-not=graph.linear --implicit-check-not=graph.matmul --implicit-check-not=fp8.matmul
// RUN: not %octet-opt %s --octet-precision="bf16-patterns=layers.1.*,*.w9" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: %octet-opt %s --octet-precision="bf16-patterns=layers.[01].* keep-head-bf16=false" | FileCheck %s --check-prefix=PATTERN --implicit-check-not=graph.linear --implicit-check-not=graph.matmul --implicit-check-not=fp8.matmul
// RUN: %octet-opt %s --octet-precision="recipe=current format=e4m3 margin=1" | FileCheck %s --check-prefix=CURRENT
// RUN: %octet-opt %S/Inputs/blockwise-layers.mlir --octet-precision="recipe=blockwise power-of-two-scales=true" | FileCheck %s --check-prefix=BLOCK
// RUN: %octet-opt %s --octet-precision="recipe=blockwise" | FileCheck %s --check-prefix=BLOCKSMALL --implicit-check-not=fp8.matmul
// RUN: %octet-opt %S/Inputs/blockwise-layers.mlir --octet-precision="recipe=blockwise first-layers-bf16=1" | FileCheck %s --check-prefix=BLOCKFIRST --implicit-check-not=graph.linear --implicit-check-not=graph.matmul --implicit-check-not=fp8.matmul
// RUN: not %octet-opt %s --octet-precision="recipe=fp4" 2>&1 | FileCheck %s --check-prefix=BADRECIPE

// The shape of the autodiff pass's output: forward linears, graph.save of
// what the backward reads, flattened dgrad/wgrad matmuls sharing dy.
module {
  graph.variable @layers.0.mlp.w1 : tensor<32x16xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @layers.1.mlp.w1 : tensor<32x32xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @layers.2.mlp.w1 : tensor<32x32xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
  graph.variable @lm_head : tensor<8x32xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}

  func.func @forward(%x: tensor<2x4x16xf32>) -> tensor<2x4x32xf32> {
    %w0 = graph.load @layers.0.mlp.w1 : tensor<32x16xf32>
    %h0 = graph.linear %x, %w0 {param = "layers.0.mlp.w1"} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
    return %h0 : tensor<2x4x32xf32>
  }

  func.func @train_microbatch(%x: tensor<2x4x16xf32>, %dlogits: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32x32xf32>, tensor<8x32xf32>) {
    %w0 = graph.load @layers.0.mlp.w1 : tensor<32x16xf32>
    %h0 = graph.linear %x, %w0 {param = "layers.0.mlp.w1"} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
    %h0s = graph.save %h0 : tensor<2x4x32xf32>
    %w1 = graph.load @layers.1.mlp.w1 : tensor<32x32xf32>
    %h1 = graph.linear %h0, %w1 {param = "layers.1.mlp.w1"} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
    %h1s = graph.save %h1 : tensor<2x4x32xf32>
    %w2 = graph.load @layers.2.mlp.w1 : tensor<32x32xf32>
    %h2 = graph.linear %h1, %w2 {param = "layers.2.mlp.w1"} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
    %h2s = graph.save %h2 : tensor<2x4x32xf32>
    %wh = graph.load @lm_head : tensor<8x32xf32>
    %logits = graph.linear %h2, %wh {param = "lm_head"} : (tensor<2x4x32xf32>, tensor<8x32xf32>) -> tensor<2x4x8xf32>
    %dl2 = graph.reshape %dlogits : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
    %dh2 = graph.matmul %dl2, %wh {role = "dgrad", param = "lm_head"} : (tensor<8x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %h2r = graph.reshape %h2s : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
    %dwh = graph.matmul %dl2, %h2r {transpose_a, role = "wgrad", param = "lm_head"} : (tensor<8x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %dh1 = graph.matmul %dh2, %w2 {role = "dgrad", param = "layers.2.mlp.w1"} : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %h1r = graph.reshape %h1s : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
    %dw2 = graph.matmul %dh2, %h1r {transpose_a, role = "wgrad", param = "layers.2.mlp.w1"} : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<32x32xf32>
    %dh0 = graph.matmul %dh1, %w1 {role = "dgrad", param = "layers.1.mlp.w1"} : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %h0r = graph.reshape %h0s : (tensor<2x4x32xf32>) -> tensor<8x32xf32>
    %dw1 = graph.matmul %dh1, %h0r {transpose_a, role = "wgrad", param = "layers.1.mlp.w1"} : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<32x32xf32>
    %xr = graph.reshape %x : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
    %dw0 = graph.matmul %dh0, %xr {transpose_a, role = "wgrad", param = "layers.0.mlp.w1"} : (tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<32x16xf32>
    return %logits, %dw0, %dw1, %dw2, %dwh : tensor<2x4x8xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32x32xf32>, tensor<8x32xf32>
  }
}

// Default policy, delayed scaling: every layer GEMM in FP8, the LM head not.
// DEFAULT: module attributes {fp8.recipe = #fp8.recipe<kind = delayed, amax_history_len = 4>}
// DEFAULT-DAG: graph.variable @fp8.layers.0.mlp.w1.x.amax_history : tensor<4xf32> {init = "zeros", kind = "state"}
// DEFAULT-DAG: graph.variable @fp8.layers.0.mlp.w1.x.scale : tensor<f32> {init = "ones", kind = "state"}
// DEFAULT-DAG: graph.variable @fp8.layers.0.mlp.w1.x.scale_inv : tensor<f32> {init = "ones", kind = "state"}
// DEFAULT-DAG: graph.variable @fp8.layers.0.mlp.w1.w.scale_inv
// DEFAULT-DAG: graph.variable @fp8.layers.0.mlp.w1.w.scale
// DEFAULT-DAG: graph.variable @fp8.layers.2.mlp.w1.dy.scale
// DEFAULT-NOT: graph.variable @fp8.lm_head
// The eval function reads scales and updates nothing.
// DEFAULT-LABEL: func.func @forward
// DEFAULT-NOT: fp8.scale_update
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.0.mlp.w1", role = "fprop", transpose_b} : (tensor<8x16xf8E4M3FN>, tensor<f32>, tensor<32x16xf8E4M3FN>, tensor<f32>) -> tensor<8x32xf32>
// DEFAULT-LABEL: func.func @train_microbatch
// Activations reduce their amax over data and tensor groups, weights over
// tensor only; the scale used is the one in state, next step's is stored,
// and so is its inverse, which the GEMMs read.
// DEFAULT: %[[XH:.*]] = graph.load @fp8.layers.0.mlp.w1.x.amax_history
// DEFAULT: %[[XS:.*]] = graph.load @fp8.layers.0.mlp.w1.x.scale
// DEFAULT: %[[XI:.*]] = graph.load @fp8.layers.0.mlp.w1.x.scale_inv
// DEFAULT: %[[QX:.*]], %[[AX:.*]] = fp8.quantize %{{.*}}, %[[XS]] {amax_reduce = ["data", "tensor"], tensor = "layers.0.mlp.w1.x"} : (tensor<8x16xf32>, tensor<f32>) -> (tensor<8x16xf8E4M3FN>, tensor<f32>)
// The FP8 input and its inverse scale are what stay alive for wgrad.
// DEFAULT: %[[QXS:.*]] = graph.save %[[QX]] : tensor<8x16xf8E4M3FN>
// DEFAULT: %[[XSS:.*]] = graph.save %[[XI]] : tensor<f32>
// DEFAULT: %[[NH:.*]], %[[NS:.*]], %[[NI:.*]] = fp8.scale_update %[[XH]], %[[AX]], %[[XS]] {dtype = f8E4M3FN, recipe = #fp8.recipe<kind = delayed, amax_history_len = 4>}
// DEFAULT: graph.store %[[NH]], @fp8.layers.0.mlp.w1.x.amax_history
// DEFAULT: graph.store %[[NS]], @fp8.layers.0.mlp.w1.x.scale
// DEFAULT: graph.store %[[NI]], @fp8.layers.0.mlp.w1.x.scale_inv
// DEFAULT: fp8.quantize {{.*}} {amax_reduce = ["tensor"], tensor = "layers.0.mlp.w1.w"}
// DEFAULT: fp8.matmul %[[QX]], %[[XI]], %{{.*}}, %{{.*}} {inverse_scales, param = "layers.0.mlp.w1", role = "fprop", transpose_b}
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "fprop", transpose_b}
// The wide activations saved for wgrad are gone: only lm_head's remains.
// DEFAULT-NOT: graph.save {{.*}} : tensor<2x4x32xf32>
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "fprop", transpose_b}
// DEFAULT: graph.save {{.*}} : tensor<2x4x32xf32>
// DEFAULT: graph.linear {{.*}} {bf16_reason = "outside the layers", param = "lm_head"} : (tensor<2x4x32xf32>, tensor<8x32xf32>)
// DEFAULT: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "dgrad"}
// Gradients are E5M2 under the hybrid format.
// DEFAULT: fp8.quantize {{.*}} {amax_reduce = ["data", "tensor"], tensor = "layers.2.mlp.w1.dy"} : (tensor<8x32xf32>, tensor<f32>) -> (tensor<8x32xf8E5M2>, tensor<f32>)
// DEFAULT: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "wgrad", transpose_a}
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "dgrad"} : (tensor<8x32xf8E5M2>, tensor<f32>, tensor<32x32xf8E4M3FN>, tensor<f32>) -> tensor<8x32xf32>
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "wgrad", transpose_a} : (tensor<8x32xf8E5M2>, tensor<f32>, tensor<8x32xf8E4M3FN>, tensor<f32>) -> tensor<32x32xf32>
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "dgrad"}
// DEFAULT: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "wgrad", transpose_a}
// wgrad of layer 0 reads the forward's saved FP8 input and its scale.
// DEFAULT: fp8.matmul %{{.*}}, %{{.*}}, %[[QXS]], %[[XSS]] {inverse_scales, param = "layers.0.mlp.w1", role = "wgrad", transpose_a}

// FIRSTLAST-LABEL: func.func @forward
// FIRSTLAST: graph.linear {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1"}
// FIRSTLAST-LABEL: func.func @train_microbatch
// FIRSTLAST: graph.linear {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1"}
// FIRSTLAST: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "fprop", transpose_b}
// FIRSTLAST: graph.linear {{.*}} {bf16_reason = "last 1 layers", param = "layers.2.mlp.w1"}
// FIRSTLAST: graph.linear {{.*}} {bf16_reason = "outside the layers", param = "lm_head"}
// FIRSTLAST: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "dgrad"}
// FIRSTLAST: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "wgrad", transpose_a}
// FIRSTLAST: graph.matmul {{.*}} {bf16_reason = "last 1 layers", param = "layers.2.mlp.w1", role = "dgrad"}
// FIRSTLAST: graph.matmul {{.*}} {bf16_reason = "last 1 layers", param = "layers.2.mlp.w1", role = "wgrad", transpose_a}
// FIRSTLAST: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "dgrad"}
// FIRSTLAST: fp8.matmul {{.*}} {inverse_scales, param = "layers.1.mlp.w1", role = "wgrad", transpose_a}
// FIRSTLAST: graph.matmul {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1", role = "wgrad", transpose_a}

// NOMATCH: error: octet-precision: bf16 pattern '*.w9' matches no parameter; the parameters are: layers.0.mlp.w1, layers.1.mlp.w1, layers.2.mlp.w1, lm_head

// PATTERN-LABEL: func.func @forward
// PATTERN: graph.linear {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.0.mlp.w1"}
// PATTERN-LABEL: func.func @train_microbatch
// PATTERN: graph.linear {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.0.mlp.w1"}
// PATTERN: graph.linear {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.1.mlp.w1"}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "fprop", transpose_b}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "lm_head", role = "fprop", transpose_b}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "lm_head", role = "dgrad"}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "lm_head", role = "wgrad", transpose_a}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "dgrad"}
// PATTERN: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "wgrad", transpose_a}
// PATTERN: graph.matmul {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.1.mlp.w1", role = "dgrad"}
// PATTERN: graph.matmul {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.1.mlp.w1", role = "wgrad", transpose_a}
// PATTERN: graph.matmul {{.*}} {bf16_reason = "pattern 'layers.[01].*'", param = "layers.0.mlp.w1", role = "wgrad", transpose_a}

// Current scaling: this step's amax, no state; e4m3 format quantizes
// gradients to E4M3 too.
// CURRENT-NOT: graph.variable @fp8
// CURRENT-LABEL: func.func @train_microbatch
// CURRENT: %[[A:.*]] = fp8.amax %{{.*}} {amax_reduce = ["tensor"]} : (tensor<8x16xf32>) -> tensor<f32>
// CURRENT: %[[S:.*]], %[[SI:.*]] = fp8.compute_scale %[[A]] {dtype = f8E4M3FN, margin = 1 : i64} : tensor<f32>
// CURRENT: %[[Q:.*]], %{{.*}} = fp8.quantize %{{.*}}, %[[S]] {tensor = "layers.0.mlp.w1.x"}
// CURRENT: fp8.matmul %[[Q]], %[[SI]], %{{.*}}, %{{.*}} {inverse_scales, param = "layers.0.mlp.w1", role = "fprop", transpose_b}
// CURRENT-NOT: fp8.scale_update
// CURRENT: fp8.quantize {{.*}} {tensor = "layers.2.mlp.w1.dy"} : (tensor<8x32xf32>, tensor<f32>) -> (tensor<8x32xf8E4M3FN>, tensor<f32>)
// CURRENT: fp8.matmul {{.*}} {inverse_scales, param = "layers.2.mlp.w1", role = "dgrad"} : (tensor<8x32xf8E4M3FN>, tensor<f32>, tensor<32x32xf8E4M3FN>, tensor<f32>)

// Blockwise: 1x128 tiles along K for fprop and dgrad operands, 128x1 (along
// tokens) for wgrad's, 128x128 weight blocks. The forward quantizes each
// fprop input twice, its 128x1 tiles for wgrad kept through a save, so the
// backward quantizes no activation and no wide layer activation stays saved
// for it (the LM head's input stays saved: that wgrad is BF16).
// BLOCK-NOT: graph.variable @fp8
// BLOCK-LABEL: func.func @train_microbatch
// BLOCK: %[[XT:.*]], %[[XTS:.*]] = fp8.block_quantize %[[X:[a-z0-9_]+]] {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w1.x.t"} : (tensor<128x128xf32>) -> (tensor<128x128xf8E4M3FN>, tensor<1x128xf32>)
// BLOCK: %[[XTSAVED:.*]] = graph.save %[[XT]] : tensor<128x128xf8E4M3FN>
// BLOCK: %[[XTSSAVED:.*]] = graph.save %[[XTS]] : tensor<1x128xf32>
// BLOCK: fp8.block_quantize %[[X]] {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w1.x"} : (tensor<128x128xf32>) -> (tensor<128x128xf8E4M3FN>, tensor<128x1xf32>)
// BLOCK: fp8.block_quantize %{{.*}} {block = array<i64: 128, 128>, dtype = f8E4M3FN, power_of_two, tensor = "layers.0.mlp.w1.w"} : (tensor<256x128xf32>) -> (tensor<256x128xf8E4M3FN>, tensor<2x1xf32>)
// BLOCK: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.0.mlp.w1", role = "fprop", transpose_b}
// BLOCK: fp8.block_quantize %{{.*}} {block = array<i64: 128, 1>, dtype = f8E4M3FN, power_of_two, tensor = "layers.2.mlp.w1.x.t"}
// BLOCK: fp8.block_quantize %{{.*}} {block = array<i64: 1, 128>, dtype = f8E4M3FN, power_of_two, tensor = "layers.2.mlp.w1.x"}
// BLOCK: graph.save {{.*}} : tensor<2x64x256xf32>
// BLOCK-NOT: graph.save
// BLOCK: fp8.block_quantize %{{.*}} {block = array<i64: 128, 1>, dtype = f8E5M2, power_of_two, tensor = "layers.2.mlp.w1.dy.t"} : (tensor<128x256xf32>) -> (tensor<128x256xf8E5M2>, tensor<1x256xf32>)
// BLOCK: fp8.block_quantize %{{.*}} {block = array<i64: 1, 128>, dtype = f8E5M2, power_of_two, tensor = "layers.2.mlp.w1.dy"} : (tensor<128x256xf32>) -> (tensor<128x256xf8E5M2>, tensor<128x2xf32>)
// BLOCK: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.2.mlp.w1", role = "dgrad"}
// BLOCK-NOT: fp8.block_quantize {{.*}} f8E4M3FN
// BLOCK: fp8.matmul %{{.*}}, %{{.*}}, %[[XTSAVED]], %[[XTSSAVED]] {a_block = array<i64: 128, 1>, b_block = array<i64: 128, 1>, param = "layers.0.mlp.w1", role = "wgrad", transpose_a}

// A GEMM with a dimension that is not a multiple of 128 keeps BF16 under
// blockwise and says why (no fp8.matmul at all in the small module).
// BLOCKSMALL-LABEL: func.func @train_microbatch
// BLOCKSMALL: graph.linear {{.*}} {bf16_reason = "blockwise needs M = 8 a multiple of 128", param = "layers.0.mlp.w1"}
// BLOCKSMALL: graph.matmul {{.*}} {bf16_reason = "blockwise needs M = 8 a multiple of 128", param = "layers.2.mlp.w1", role = "dgrad"}
// BLOCKSMALL: graph.matmul {{.*}} {bf16_reason = "blockwise needs M = 32 a multiple of 128", param = "layers.2.mlp.w1", role = "wgrad", transpose_a}

// The per-layer policy applies to blockwise as to the other recipes.
// BLOCKFIRST-LABEL: func.func @forward
// BLOCKFIRST: graph.linear {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1"}
// BLOCKFIRST-LABEL: func.func @train_microbatch
// BLOCKFIRST: graph.linear {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1"}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.1.mlp.w1", role = "fprop", transpose_b}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.2.mlp.w1", role = "fprop", transpose_b}
// BLOCKFIRST: graph.linear {{.*}} {bf16_reason = "outside the layers", param = "lm_head"}
// BLOCKFIRST: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "dgrad"}
// BLOCKFIRST: graph.matmul {{.*}} {bf16_reason = "outside the layers", param = "lm_head", role = "wgrad", transpose_a}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.2.mlp.w1", role = "dgrad"}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 128, 1>, b_block = array<i64: 128, 1>, param = "layers.2.mlp.w1", role = "wgrad", transpose_a}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 1, 128>, b_block = array<i64: 128, 128>, param = "layers.1.mlp.w1", role = "dgrad"}
// BLOCKFIRST: fp8.matmul {{.*}} {a_block = array<i64: 128, 1>, b_block = array<i64: 128, 1>, param = "layers.1.mlp.w1", role = "wgrad", transpose_a}
// BLOCKFIRST: graph.matmul {{.*}} {bf16_reason = "first 1 layers", param = "layers.0.mlp.w1", role = "wgrad", transpose_a}

// BADRECIPE: error: octet-precision: recipe must be delayed, current or blockwise; got 'fp4'
