#ifndef OCTET_COMPILER_TRANSFORMS_PRECISIONPASSES_TD
#define OCTET_COMPILER_TRANSFORMS_PRECISIONPASSES_TD

include "mlir/Pass/PassBase.td"

def OctetPrecision : Pass<"octet-precision", "mlir::ModuleOp"> {
  let summary = "run fprop, dgrad and wgrad GEMMs in FP8 per the recipe and the per-layer policy";
  let description = [{
    Every graph.linear and graph.matmul that names a `param` is a GEMM of a
    layer (`layers.<i>.` in the name) or outside the layers (LM head, tied
    embedding). The policy keeps in their original precision: GEMMs outside
    the layers (unless keep-head-bf16=false), the first and last N layers
    (first-layers-bf16, last-layers-bf16), and parameters matching any glob
    of bf16-patterns. A pattern that matches no parameter is an error that
    names it. Kept GEMMs get `bf16_reason`; the module gets `fp8.recipe`.

    Each other GEMM becomes an `fp8.matmul` over quantized operands:
    activations and weights in E4M3, gradients in E5M2 (hybrid) or E4M3
    (e4m3). A tensor feeding several GEMMs is quantized once per block
    orientation (x of wq/wk/wv, dy of dgrad and wgrad, W of fprop and
    dgrad). Tensors are named `<param>.x|w|dy` (attribute `tensor`).
    - delayed: state variables `fp8.<tensor>.amax_history` [H],
      `fp8.<tensor>.scale` and `fp8.<tensor>.scale_inv` (1 / scale); the
      quantize reads the scale, the GEMMs the inverse, and an
      `fp8.scale_update` writes next step's history, scale and inverse in
      the same step. Functions in `eval-functions` read the scales and
      update nothing.
    - current: fp8.amax → fp8.compute_scale (scale and inverse) →
      fp8.quantize, no state.
    Tensorwise GEMMs take the inverses (`inverse_scales`): cuBLASLt
    multiplies by one per operand, so nothing combines them at run time.
    - blockwise: fp8.block_quantize with 1×128 tiles along the contraction
      dimension for activations and gradients, 128×128 for weights. A GEMM
      whose M, N or K is not a multiple of 128 (what cuBLASLt's
      block-scaled GEMMs take) keeps BF16, its `bf16_reason` naming the
      dimension.
    amax_reduce: under delayed scaling activations and gradients reduce over
    data and tensor parallel groups (the state must agree on every replica),
    weights over tensor only (DP replicas hold the same weight); under
    current scaling every tensor reduces over the tensor group (one scale
    per TP-sharded tensor). Blockwise scales are local.

    Saved activations stay FP8 where the recipe allows: with tensorwise
    scaling the wgrad GEMM reuses the forward's quantized input through a
    `graph.save` of the FP8 tensor, so the high-precision activation (or
    its recomputation) is no longer kept for it. Blockwise wgrad needs
    tiles along the token dimension, a different quantization, so it
    quantizes the saved high-precision input again.

    Before:
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.mlp.w1"} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
    ...
    %dx = graph.matmul %dy, %w {role = "dgrad", param = "layers.0.mlp.w1"} : (tensor<16x128xf32>, tensor<128x64xf32>) -> tensor<16x64xf32>
    %dw = graph.matmul %dy, %x2 {transpose_a, role = "wgrad", param = "layers.0.mlp.w1"} : (tensor<16x128xf32>, tensor<16x64xf32>) -> tensor<128x64xf32>
    ```
    After (recipe=current):
    ```mlir
    %x2 = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
    %ax = fp8.amax %x2 {amax_reduce = ["tensor"]} : (tensor<16x64xf32>) -> tensor<f32>
    %sx, %ix = fp8.compute_scale %ax {dtype = f8E4M3FN} : tensor<f32>
    %qx, %0 = fp8.quantize %x2, %sx {tensor = "layers.0.mlp.w1.x"} : (tensor<16x64xf32>, tensor<f32>) -> (tensor<16x64xf8E4M3FN>, tensor<f32>)
    %qx.saved = graph.save %qx : tensor<16x64xf8E4M3FN>
    ...
    %y2 = fp8.matmul %qx, %ix, %qw, %iw {inverse_scales, transpose_b, role = "fprop", param = "layers.0.mlp.w1"} : ...
    %dx = fp8.matmul %qdy, %idy, %qw, %iw {inverse_scales, role = "dgrad", param = "layers.0.mlp.w1"} : ...
    %dw = fp8.matmul %qdy, %idy, %qx.saved, %ix.saved {inverse_scales, transpose_a, role = "wgrad", param = "layers.0.mlp.w1"} : ...
    ```
  }];
  let options = [
    Option<"recipe", "recipe", "std::string", "\"delayed\"",
           "delayed, current or blockwise">,
    Option<"format", "format", "std::string", "\"hybrid\"",
           "hybrid (E5M2 gradients) or e4m3">,
    Option<"amaxHistoryLen", "amax-history-len", "int64_t", "1024",
           "delayed: steps of amax history per tensor">,
    Option<"amaxAlgorithm", "amax-algorithm", "std::string", "\"max\"",
           "delayed: max or most_recent">,
    Option<"margin", "margin", "int64_t", "0",
           "scale = fp8_max / (amax * 2^margin)">,
    Option<"powerOfTwoScales", "power-of-two-scales", "bool", "false",
           "blockwise: round scales down to powers of two">,
    Option<"firstLayersBf16", "first-layers-bf16", "int64_t", "0",
           "keep this many first transformer layers in BF16">,
    Option<"lastLayersBf16", "last-layers-bf16", "int64_t", "0",
           "keep this many last transformer layers in BF16">,
    ListOption<"bf16Patterns", "bf16-patterns", "std::string",
               "globs on parameter names to keep in BF16">,
    Option<"keepHeadBf16", "keep-head-bf16", "bool", "true",
           "keep GEMMs outside the transformer layers (LM head) in BF16 "
           "(the spec: not train.precision.lm_head_fp8)">,
    ListOption<"evalFunctions", "eval-functions", "std::string",
               "functions that read FP8 scale state but do not update it "
               "(default: forward)">,
  ];
  let dependentDialects = ["octet::fp8::Fp8Dialect",
                           "octet::graph::GraphDialect"];
}

def OctetLayout : Pass<"octet-layout", "mlir::ModuleOp"> {
  let summary = "give every FP8 GEMM K-major (TN) operands, as Hopper requires";
  let description = [{
    Hopper FP8 GEMMs read both operands K-major: A as [M, K] and B as
    [N, K], i.e. `transpose_b` set and `transpose_a` clear. For every
    fp8.matmul that differs, this pass inserts an `fp8.transpose` of the
    offending operand (data and block scales together, exact) right after
    its producer, so fusion can fold the copy into the quantize kernel, and
    flips the flag. A transposed copy of a `graph.save`d tensor is saved
    instead of the original. One copy per value serves every GEMM.

    Before:
    ```mlir
    %dx = fp8.matmul %qdy, %sdy, %qw, %sw {role = "dgrad"} : (tensor<16x128xf8E5M2>, tensor<f32>, tensor<128x64xf8E4M3FN>, tensor<f32>) -> tensor<16x64xf32>
    %dw = fp8.matmul %qdy, %sdy, %qx, %sx {transpose_a, role = "wgrad"} : (tensor<16x128xf8E5M2>, tensor<f32>, tensor<16x64xf8E4M3FN>, tensor<f32>) -> tensor<128x64xf32>
    ```
    After:
    ```mlir
    %qwT, %swT = fp8.transpose %qw, %sw : (tensor<128x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x128xf8E4M3FN>, tensor<f32>)
    %dx = fp8.matmul %qdy, %sdy, %qwT, %swT {transpose_b, role = "dgrad"} : ...
    %qdyT, %sdyT = fp8.transpose %qdy, %sdy : (tensor<16x128xf8E5M2>, tensor<f32>) -> (tensor<128x16xf8E5M2>, tensor<f32>)
    %qxT, %sxT = fp8.transpose %qx, %sx : (tensor<16x64xf8E4M3FN>, tensor<f32>) -> (tensor<64x16xf8E4M3FN>, tensor<f32>)
    %dw = fp8.matmul %qdyT, %sdyT, %qxT, %sxT {transpose_b, role = "wgrad"} : ...
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect",
                           "octet::graph::GraphDialect"];
}

#endif
