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
    table [V, D], ids [B, S] → [B, S, D]. The result may be narrower than
    the table (rows are rounded as they are copied): BF16 activations read
    the F32 parameter directly.
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
    With `over %batch_mask` the logits are a chunk of a batch's tokens and
    the divisor is the whole batch's count, max(Σ batch_mask, 1): the
    chunks' losses add up to the batch's (octet-chunk-lm-head).
    ```mlir
    %part = graph.cross_entropy %logits, %labels, %mask over %batch_mask : (tensor<1x8x256xbf16>, tensor<1x8xi32>, tensor<1x8xf32>, tensor<2x16xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$logits, IntTensor:$labels,
                   AnyFloatTensor:$loss_mask,
                   Optional<AnyFloatTensor>:$batch_mask);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$logits `,` $labels `,` $loss_mask (`over` $batch_mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Backward ops: VJPs that are not a composition of forward ops
//===----------------------------------------------------------------------===//

def Graph_SaveOp : Graph_Op<"save", [Pure, SameOperandsAndResultType]> {
  let summary = "a forward tensor kept alive for the backward pass";
  let description = [{
    Identity. The autodiff pass routes every forward tensor that a backward op
    reads through one `graph.save`, so the set of saved activations is
    explicit in the IR (and is what the memory planner keeps). Tensors that
    the backward recomputes instead carry a `recomputed` unit attribute on
    the recomputing op.
    ```mlir
    %x.saved = graph.save %x : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Graph_FillOp : Graph_Op<"fill", [Pure]> {
  let summary = "a tensor with every element equal to `value`";
  let description = [{
    ```mlir
    %zero = graph.fill {value = 0.0 : f64} : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_EmbeddingGradOp : Graph_Op<"embedding_grad", [Pure]> {
  let summary = "scatter-add rows of the output gradient into a table gradient";
  let description = [{
    dy [B, S, D], ids [B, S] → d_table [V, D] with
    d_table[v] = Σ_{ids[b, s] = v} dy[b, s]. V comes from the result type.
    The sum is formed in the result's type, which may be wider than dy's
    (BF16 gradients into an F32 table gradient).
    ```mlir
    %dtable = graph.embedding_grad %dy, %ids : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, IntTensor:$ids);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$grad `,` $ids attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_RMSNormGradOp : Graph_Op<"rms_norm_grad", [Pure]> {
  let summary = "backward of rms_norm: input and weight gradients";
  let description = [{
    Takes the forward input and recomputes the row reciprocal RMS from it
    (cheaper to recompute than to save). dx [..., D], dweight [D].
    ```mlir
    %dx, %dw = graph.rms_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$input,
                   AnyFloatTensor:$weight, F64Attr:$eps);
  let results = (outs AnyFloatTensor:$input_grad, AnyFloatTensor:$weight_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_LayerNormGradOp : Graph_Op<"layer_norm_grad", [Pure]> {
  let summary = "backward of layer_norm: input, weight and bias gradients";
  let description = [{
    Recomputes the row mean and reciprocal standard deviation from the
    forward input.
    ```mlir
    %dx, %dw, %db = graph.layer_norm_grad %dy, %x, %w {eps = 1.0e-5 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$input,
                   AnyFloatTensor:$weight, F64Attr:$eps);
  let results = (outs AnyFloatTensor:$input_grad, AnyFloatTensor:$weight_grad,
                      AnyFloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [Pure]> {
  let summary = "backward of attention from the saved output and log-sum-exp";
  let description = [{
    dout, q [B, S, Hq, Dh], k, v [B, S, Hkv, Dh], the forward output and its
    lse [B, Hq, S] → dq, dk, dv. The probabilities are recomputed from q, k
    and lse (flash-attention style); dk and dv sum over the query heads of
    each kv group. `causal`, `scale` and `cu_seqlens` are the forward's.
    ```mlir
    %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v, %o, %lse {causal, scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$q, AnyFloatTensor:$k,
                   AnyFloatTensor:$v, AnyFloatTensor:$out, TensorOf<[F32]>:$lse,
                   Optional<TensorOf<[I32]>>:$cu_seqlens, UnitAttr:$causal,
                   F64Attr:$scale);
  let results = (outs AnyFloatTensor:$q_grad, AnyFloatTensor:$k_grad,
                      AnyFloatTensor:$v_grad);
  let assemblyFormat = "$grad `,` $q `,` $k `,` $v `,` $out `,` $lse (`,` $cu_seqlens^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_SiluGradOp : Graph_Op<"silu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dy · silu'(x)";
  let description = [{
    ```mlir
    %dx = graph.silu_grad %dy, %x : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$input);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def Graph_GeluGradOp : Graph_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dy · gelu'(x), exact or tanh-approximated as the forward";
  let description = [{
    ```mlir
    %dx = graph.gelu_grad %dy, %x {approximate = "tanh"} : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$input,
                   DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_SwigluGradOp : Graph_Op<"swiglu_grad", [Pure, AllTypesMatch<["grad", "gate", "up", "gate_grad", "up_grad"]>]> {
  let summary = "backward of swiglu: gradients of gate and up";
  let description = [{
    d_gate = dy · up · silu'(gate), d_up = dy · silu(gate).
    ```mlir
    %dg, %du = graph.swiglu_grad %dy, %gate, %up : tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad, AnyFloatTensor:$gate, AnyFloatTensor:$up);
  let results = (outs AnyFloatTensor:$gate_grad, AnyFloatTensor:$up_grad);
  let assemblyFormat = "$grad `,` $gate `,` $up attr-dict `:` type($grad)";
}

def Graph_CrossEntropyGradOp : Graph_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of the masked mean cross-entropy with respect to the logits";
  let description = [{
    d_logits[t] = dloss · mask[t] · (softmax(logits[t]) - onehot(labels[t]))
    / max(Σ mask, 1), with dloss the scalar loss gradient. With
    `over %batch_mask`, as graph.cross_entropy: the divisor is
    max(Σ batch_mask, 1), the whole batch's count of a chunk's tokens.
    ```mlir
    %dlogits = graph.cross_entropy_grad %dloss, %logits, %labels, %mask : (tensor<f32>, tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, AnyFloatTensor:$logits,
                   IntTensor:$labels, AnyFloatTensor:$loss_mask,
                   Optional<AnyFloatTensor>:$batch_mask);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$grad `,` $logits `,` $labels `,` $loss_mask (`over` $batch_mask^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_BiasGradOp : Graph_Op<"bias_grad", [Pure]> {
  let summary = "sum of the output gradient over every dimension but the last";
  let description = [{
    ```mlir
    %db = graph.bias_grad %dy : (tensor<2x8x64xf32>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins AnyFloatTensor:$grad);
  let results = (outs AnyFloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

defvar StepTensor = 0DTensorOf<[I64]>;
defvar ScalarF32Tensor = 0DTensorOf<[F32]>;

def Graph_IncrementOp : Graph_Op<"increment", [Pure, SameOperandsAndResultType]> {
  let summary = "step counter + 1";
  let description = [{
    ```mlir
    %s1 = graph.increment %s : tensor<i64>
    ```
  }];
  let arguments = (ins StepTensor:$input);
  let results = (outs StepTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Graph_LrScheduleOp : Graph_Op<"lr_schedule", [Pure]> {
  let summary = "learning rate at a 1-based step: linear warmup, then cosine to a floor";
  let description = [{
    lr(s) = lr · s / warmup_steps for s ≤ warmup_steps; afterwards
    lr · (r + (1 - r) · (1 + cos(π · p)) / 2) with r = min_lr_ratio and
    p = min(1, (s - warmup_steps) / max(1, total_steps - warmup_steps)).
    ```mlir
    %lr = graph.lr_schedule %step {lr = 3.0e-4 : f64, warmup_steps = 10 : i64, total_steps = 200 : i64, min_lr_ratio = 0.1 : f64} : (tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins StepTensor:$step, F64Attr:$lr, I64Attr:$warmup_steps,
                   I64Attr:$total_steps, F64Attr:$min_lr_ratio);
  let results = (outs ScalarF32Tensor:$result);
  let assemblyFormat = "$step attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_GlobalNormOp : Graph_Op<"global_norm", [Pure]> {
  let summary = "L2 norm over all elements of all operands, times `scale`";
  let description = [{
    `scale` folds in gradient averaging (1 / microbatches) so the norm is the
    averaged gradient's without a pass that rescales every tensor.
    ```mlir
    %norm = graph.global_norm %g0, %g1 {scale = 0.25 : f64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<AnyFloatTensor>:$inputs,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs ScalarF32Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ClipScaleOp : Graph_Op<"clip_scale", [Pure, SameOperandsAndResultType]> {
  let summary = "gradient multiplier: averaging scale times the clipping coefficient";
  let description = [{
    scale · min(1, max_norm / (norm + 1e-6)); max_norm = 0 disables clipping
    and gives `scale`.
    ```mlir
    %mult = graph.clip_scale %norm {max_norm = 1.0 : f64, scale = 0.25 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins ScalarF32Tensor:$norm, F64Attr:$max_norm,
                   DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs ScalarF32Tensor:$result);
  let assemblyFormat = "$norm attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Graph_AdamWUpdateOp : Graph_Op<"adamw_update", [Pure]> {
  let summary = "one AdamW step with decoupled weight decay and bias correction";
  let description = [{
    With g = grad · grad_scale and t the 1-based step:
    m' = β1·m + (1-β1)·g, v' = β2·v + (1-β2)·g²,
    param' = param - lr·(m'/(1-β1ᵗ)) / (sqrt(v'/(1-β2ᵗ)) + eps)
             - lr·weight_decay·param.
    The autodiff pass sets weight_decay to 0 for norms and biases (and
    embeddings unless asked otherwise).
    ```mlir
    %p1, %m1, %v1 = graph.adamw_update %p, %g, %m, %v, %lr, %step, %mult {beta1 = 0.9 : f64, beta2 = 0.95 : f64, eps = 1.0e-8 : f64, weight_decay = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>)
    ```
  }];
  let arguments = (ins AnyFloatTensor:$param, AnyFloatTensor:$grad,
                   AnyFloatTensor:$exp_avg, AnyFloatTensor:$exp_avg_sq,
                   ScalarF32Tensor:$lr, StepTensor:$step,
                   ScalarF32Tensor:$grad_scale, F64Attr:$beta1, F64Attr:$beta2,
                   F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs AnyFloatTensor:$new_param, AnyFloatTensor:$new_exp_avg,
                      AnyFloatTensor:$new_exp_avg_sq);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step `,` $grad_scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Slicing and concatenation (fused projections)
//===----------------------------------------------------------------------===//

def Graph_SliceOp : Graph_Op<"slice", [Pure]> {
  let summary = "a contiguous range of one dimension";
  let description = [{
    Elements [offset, offset + n) along `dim`, where n is the result's size
    there; every other dimension is kept. Fusion passes use it to read one
    projection out of a fused one (q, k and v out of the QKV GEMM's output,
    one weight out of a concatenated variable).
    ```mlir
    %k = graph.slice %qkv {dim = 2 : i64, offset = 256 : i64} : (tensor<2x8x512xf32>) -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$dim, I64Attr:$offset);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure]> {
  let summary = "operands joined along one dimension, in order";
  let description = [{
    ```mlir
    %dqkv = graph.concat %dq, %dk, %dv {dim = 1 : i64} : (tensor<16x256xf32>, tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x512xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif
