#ifndef OCTET_GRAPH_OPS_TD
#define OCTET_GRAPH_OPS_TD

include "dialects/graph/GraphDialect.td"

defvar AnyFloatTensor = TensorOf<[AnyFloat]>;
defvar IntTensor = TensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

def Graph_VariableOp : Graph_Op<"variable", [Symbol]> {
  let summary = "a module-level parameter or state tensor";
  let description = [{
    `kind` is one of weight, bias, norm, embedding (trainable parameters) or
    state (optimizer moments, FP8 scale state, counters). `init` is normal
    (with `init_std`), zeros or ones. `hf_name` is the tensor's name in a
    Hugging Face checkpoint, where it has one.

    ```mlir
    graph.variable @layers.0.attn.wq : tensor<64x64xf32>
        {kind = "weight", init = "normal", init_std = 0.02 : f64,
         hf_name = "model.layers.0.self_attn.q_proj.weight"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyRankedTensor>:$type,
                   StrAttr:$kind, StrAttr:$init, OptionalAttr<F64Attr>:$init_std,
                   OptionalAttr<StrAttr>:$hf_name);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isTrainable() { return getKind() != "state"; }
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Graph_LoadOp : Graph_Op<"load", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "read a variable";
  let description = [{
    ```mlir
    %w = graph.load @layers.0.attn.wq : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$variable);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$variable attr-dict `:` type($result)";
}

def Graph_StoreOp : Graph_Op<"store", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "write a variable";
  let description = [{
    ```mlir
    graph.store %new, @step : tensor<i64>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$value, FlatSymbolRefAttr:$variable);
  let assemblyFormat = "$value `,` $variable attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Graph_EmbeddingOp : Graph_Op<"embedding", [Pure]> {
  let summary = "gather rows of a table by token id";
  let description = [{
    table [V, D], ids [B, S] → [B, S, D].
    ```mlir
    %h = graph.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$table, IntTensor:$ids);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LinearOp : Graph_Op<"linear", [Pure]> {
  let summary = "x · Wᵀ (+ b) with the weight stored [out, in]";
  let description = [{
    x [..., K], weight [N, K], optional bias [N] → [..., N]. `param` names the
    weight's variable so precision policies and reports speak of layers.
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.attn.wq"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input, AnyFloatTensor:$weight,
                   Optional<AnyFloatTensor>:$bias, OptionalAttr<StrAttr>:$param);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_MatmulOp : Graph_Op<"matmul", [Pure]> {
  let summary = "2-D matrix product with optional transposes";
  let description = [{
    op(a) [M, K] · op(b) [K, N] → [M, N], where op transposes when
    `transpose_a` / `transpose_b` is set. `role` is fprop, dgrad or wgrad and
    `param` the weight it belongs to, so backward GEMMs keep their identity.
    ```mlir
    %dx = graph.matmul %dy, %w {role = "dgrad", param = "lm_head"} : (tensor<16x256xf32>, tensor<256x64xf32>) -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$lhs, AnyFloatTensor:$rhs,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   OptionalAttr<StrAttr>:$role, OptionalAttr<StrAttr>:$param);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_RMSNormOp : Graph_Op<"rms_norm", [Pure]> {
  let summary = "x / sqrt(mean(x²) + eps) · weight over the last dimension";
  let description = [{
    ```mlir
    %y = graph.rms_norm %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input, AnyFloatTensor:$weight, F64Attr:$eps);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure]> {
  let summary = "(x - mean) / sqrt(var + eps) · weight + bias over the last dimension";
  let description = [{
    ```mlir
    %y = graph.layer_norm %x, %w, %b {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input, AnyFloatTensor:$weight,
                   AnyFloatTensor:$bias, F64Attr:$eps);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_RopeOp : Graph_Op<"rope", [Pure]> {
  let summary = "rotary position embedding (rotate-half layout)";
  let description = [{
    x [B, S, H, Dh], positions [B, S] → [B, S, H, Dh]. Frequencies are
    theta^(-2i/Dh); when `scaling` is "llama3" they are rescaled with
    `factor`, `low_freq_factor`, `high_freq_factor` and
    `original_max_position`. `inverse` rotates by the negative angle (the
    backward of rope).
    ```mlir
    %q2 = graph.rope %q, %pos {theta = 500000.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input, IntTensor:$positions, F64Attr:$theta,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$scaling,
                   OptionalAttr<F64Attr>:$factor, OptionalAttr<F64Attr>:$low_freq_factor,
                   OptionalAttr<F64Attr>:$high_freq_factor,
                   OptionalAttr<I64Attr>:$original_max_position, UnitAttr:$inverse);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AttentionOp : Graph_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention, causal, grouped-query, document-masked";
  let description = [{
    q [B, S, Hq, Dh], k and v [B, S, Hkv, Dh] with Hkv dividing Hq → output
    [B, S, Hq, Dh] and the row log-sum-exp of the scaled scores [B, Hq, S]
    (f32), which the backward needs.
    The optional `cu_seqlens` (i32, cumulative document lengths over the B·S
    flattened tokens, first 0, last B·S) keeps documents from attending to
    one another.
    ```mlir
    %o, %lse = graph.attention %q, %k, %v {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins AnyFloatTensor:$q, AnyFloatTensor:$k, AnyFloatTensor:$v,
                   Optional<TensorOf<[I32]>>:$cu_seqlens, UnitAttr:$causal, F64Attr:$scale);
  let results = (outs AnyFloatTensor:$result, TensorOf<[F32]>:$lse);
  let assemblyFormat = "$q `,` $k `,` $v (`,` $cu_seqlens^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure]> {
  let summary = "same elements, new static shape";
  let description = [{
    ```mlir
    %h = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<2x8x4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_CastOp : Graph_Op<"cast", [Pure]> {
  let summary = "convert element type (round to nearest even, saturating for FP8)";
  let description = [{
    ```mlir
    %b = graph.cast %x : (tensor<2x8xf32>) -> tensor<2x8xbf16>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Graph_UnaryOp<string mnemonic, string summaryText, string example>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = summaryText;
  let description = "```mlir\n" # example # "\n```";
  let arguments = (ins AnyFloatTensor:$input);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Graph_SiluOp : Graph_UnaryOp<"silu", "x · sigmoid(x)",
  "%y = graph.silu %x : tensor<2x8x64xf32>">;

def Graph_GeluOp : Graph_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh-approximated";
  let description = [{
    ```mlir
    %y = graph.gelu %x {approximate = "tanh"} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$input,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Graph_BinaryOp<string mnemonic, string summaryText, string example>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = summaryText;
  let description = "Both operands have the result's type.\n```mlir\n" # example # "\n```";
  let arguments = (ins AnyFloatTensor:$lhs, AnyFloatTensor:$rhs);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Graph_AddOp : Graph_BinaryOp<"add", "elementwise sum (residual connections)",
  "%y = graph.add %a, %b : tensor<2x8x64xf32>">;
def Graph_MulOp : Graph_BinaryOp<"mul", "elementwise product",
  "%y = graph.mul %a, %b : tensor<2x8x64xf32>">;
def Graph_SwigluOp : Graph_BinaryOp<"swiglu", "silu(gate) · up",
  "%y = graph.swiglu %gate, %up : tensor<2x8x128xf32>">;

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [Pure]> {
  let summary = "mean token cross-entropy over the tokens the loss mask keeps";
  let description = [{
    logits [B, S, V], labels [B, S] (integers in [0, V)), loss_mask [B, S]
    (1 where the token counts) → scalar loss = Σ mask·nll / max(Σ mask, 1).
    ```mlir
    %loss = graph.cross_entropy %logits, %labels, %mask : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$logits, IntTensor:$labels, AnyFloatTensor:$loss_mask);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$logits `,` $labels `,` $loss_mask attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif
