#ifndef OCTET_COMPILER_TRANSFORMS_PASSES_TD
#define OCTET_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def OctetAutodiff : Pass<"octet-autodiff", "mlir::ModuleOp"> {
  let summary = "build the train step (backward, gradient accumulation, AdamW) from @forward";
  let description = [{
    Reverse-mode differentiation of the scalar loss returned by `@forward`
    with respect to every trainable `graph.variable`, emitted as two new
    functions (`@forward` stays, for evaluation):

    - `@train_microbatch(same arguments as @forward) -> loss`: the forward,
      then the backward, adding each parameter's gradient into its
      accumulator variable `grad.<name>`.
    - `@optimizer_step() -> (grad_norm, lr)`: increments `optimizer.step`,
      computes the LR (linear warmup, cosine to `min-lr-ratio`), the global
      norm of the accumulated gradients, the clipping
      multiplier, and one AdamW update per parameter with moments in
      `adam_m.<name>` / `adam_v.<name>`; zeroes the accumulators.

    Each microbatch's loss is its own mean; the backward is seeded with
    1 / (microbatches * data-parallel), so the accumulators (summed over
    the ranks by the data-parallel all-reduce) hold the gradient of the
    global batch's mean loss, and every microbatch's gradients have the
    magnitudes of the global batch's whatever the layout: FP8 gradient
    casts see the same values at data 2 as at data 1.

    Every forward tensor the backward reads goes through one `graph.save`
    (kept alive from forward to backward); norm outputs, activations and
    reshapes are recomputed in the backward instead (ops marked
    `recomputed`) unless `recompute=false`. RoPE's outputs are saved: its
    backward reads no forward value, so recomputing it would keep its input,
    as large, saved for nothing else; `recompute-rope` recomputes them
    anyway (pipeline stages, whose stash no tensor map may point into). A
    trainable parameter the loss does not depend on is an error that names
    it.

    Before:
    ```mlir
    graph.variable @w : tensor<4x8xf32> {kind = "weight", init = "normal", init_std = 0.02 : f64}
    func.func @forward(%x: tensor<2x8xf32>, ...) -> tensor<f32> {
      %w = graph.load @w : tensor<4x8xf32>
      %y = graph.linear %x, %w {param = "w"} : ...
      ...
    }
    ```
    After (excerpt):
    ```mlir
    graph.variable @grad.w : tensor<4x8xf32> {kind = "state", init = "zeros"}
    func.func @train_microbatch(...) -> tensor<f32> {
      %x.saved = graph.save %x : tensor<2x8xf32>
      ...
      %dw = graph.matmul %dy, %x.saved {transpose_a, role = "wgrad", param = "w"} : ...
      %acc = graph.load @grad.w : tensor<4x8xf32>
      %sum = graph.add %acc, %dw : tensor<4x8xf32>
      graph.store %sum, @grad.w : tensor<4x8xf32>
      return %loss : tensor<f32>
    }
    func.func @optimizer_step() -> (tensor<f32>, tensor<f32>) { ... graph.adamw_update ... }
    ```
  }];
  let options = [
    Option<"lr", "lr", "double", "3.0e-4", "peak learning rate">,
    Option<"minLrRatio", "min-lr-ratio", "double", "0.1",
           "the cosine schedule ends at lr * min-lr-ratio">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "steps of linear warmup">,
    Option<"totalSteps", "total-steps", "int64_t", "1000",
           "optimizer steps of the whole run (end of the cosine)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.95", "AdamW beta2">,
    Option<"eps", "eps", "double", "1.0e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.1",
           "decoupled weight decay of weight matrices">,
    Option<"decayEmbeddings", "decay-embeddings", "bool", "false",
           "apply weight decay to embedding tables too">,
    Option<"gradClip", "grad-clip", "double", "1.0",
           "clip the global gradient norm to this (0: no clipping)">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches per optimizer step: global / (micro * data parallel)">,
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "ranks that share the global batch; with `microbatches`, the "
           "loss gradient's seed is 1 / (microbatches * data-parallel)">,
    Option<"recompute", "recompute", "bool", "true",
           "recompute norms, activations and reshapes in the backward "
           "instead of saving their outputs">,
    Option<"recomputeRope", "recompute-rope", "bool", "false",
           "with `recompute`, recompute RoPE's outputs too (from its saved "
           "input) instead of saving them">,
  ];
  let dependentDialects = ["octet::graph::GraphDialect",
                           "mlir::func::FuncDialect"];
}

def OctetBf16Activations : Pass<"octet-bf16-activations", "mlir::ModuleOp"> {
  let summary = "train step with BF16 activations, BF16 GEMM operands and F32 state";
  let description = [{
    Runs after autodiff, before octet-precision. Every F32 tensor that an
    activation-producing op writes becomes BF16, as Megatron/TransformerEngine
    and torchtitan train: F32 master weights, F32 gradient accumulation and
    optimizer state, BF16 activations and activation gradients. Ops whose
    statistics need F32 (norms, softmax, cross-entropy, reductions) read
    BF16 and compute in F32 inside their kernels; only their stored results
    are BF16. The interpreter rounds every result to its element type, so
    it computes what the GPU does.

    Stays F32:
    - variables (parameters, moments, gradient accumulators, FP8 scale
      state, step) and function arguments (loss_mask);
    - parameter gradients: wgrad GEMMs (BF16 operands, F32 result; BF16
      after octet-bf16-gradients, train.precision.grad_dtype "bf16"),
      `embedding_grad`, `bias_grad`, norm weight/bias gradients (column
      sums), and the sums of a parameter's gradients;
    - scalars (loss, its seed gradient, lr, norms), attention's `lse`, the
      whole optimizer step.

    Becomes BF16: outputs of embedding (the gather reads the F32 table and
    rounds), linear / fprop and dgrad GEMMs (the logits included: the
    cross-entropy reads BF16 logits and computes its softmax in F32, as the
    peers do), norms, RoPE, attention, activations, residual adds, their
    backward counterparts (dx, dq/dk/dv, d_logits) and the views of all of
    these. A GEMM's F32 weight (and bias) is read through one `graph.cast`
    to BF16 per value; octet-precision quantizes FP8 weights from the F32
    master instead, so for FP8 GEMMs the cast disappears. Elementwise ops
    that join BF16 and F32 operands compute in F32.

    `activation-dtype=f32` leaves the module as it is.

    Before:
    ```mlir
    %w = graph.load @w : tensor<32x64xf32>
    %y = graph.linear %x, %w {param = "w"} : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
    ...
    %dw = graph.matmul %dy, %x2 {transpose_a, role = "wgrad", param = "w"} : (tensor<16x32xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
    ```
    After:
    ```mlir
    %w = graph.load @w : tensor<32x64xf32>
    %wb = graph.cast %w : (tensor<32x64xf32>) -> tensor<32x64xbf16>
    %y = graph.linear %x, %wb {param = "w"} : (tensor<2x8x64xbf16>, tensor<32x64xbf16>) -> tensor<2x8x32xbf16>
    ...
    %dw = graph.matmul %dy, %x2 {transpose_a, role = "wgrad", param = "w"} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xf32>
    ```
  }];
  let options = [
    Option<"activationDtype", "activation-dtype", "std::string", "\"bf16\"",
           "bf16, or f32 to keep the module unchanged">,
  ];
  let dependentDialects = ["octet::graph::GraphDialect",
                           "mlir::func::FuncDialect"];
}

def OctetBf16Gradients : Pass<"octet-bf16-gradients", "mlir::ModuleOp"> {
  let summary = "weight gradients of wgrad GEMMs, and their accumulators, in BF16";
  let description = [{
    Runs after octet-bf16-activations when train.precision.grad_dtype is
    "bf16". A gradient accumulator `grad.P` becomes BF16 when, in
    `train_microbatch`, its one writer is a wgrad GEMM (the accumulator is
    read once, into one add with the GEMM's result, which is stored back),
    and the other functions only read it into `graph.global_norm` and
    AdamW's gradient operand or store zeros into it. The wgrad then writes
    BF16 (cuBLASLt rounds its f32 result once, to nearest even, as the
    interpreter does), every load of the accumulator is BF16, and the
    gradient norm and AdamW widen it to f32 as they read it. Everything
    downstream follows the types: the data-parallel reduce-scatter or
    all-reduce of the accumulator is a BF16 collective, the memory plan
    holds half the bytes.

    Stay f32: norm, bias and embedding gradients (column sums and
    scatter-adds), a head tied to the embedding (two writers), and the head
    of more than `head-chunk-tokens` tokens, whose wgrad
    octet-chunk-lm-head splits into GEMMs that accumulate chunk after chunk
    (each would round the running sum to BF16).

    The spec check (train.precision.grad_dtype) refuses several microbatches
    a step and pipeline layouts: there the accumulator would sum the
    microbatches in BF16. Only with one microbatch a step does the wgrad
    overwrite its accumulator (octet-overwrite-gradients), so that the
    accumulator is one rounding of the f32 product.

    Before:
    ```mlir
    %acc = graph.load @grad.w : tensor<32x64xf32>
    %dw = graph.matmul %dy, %x {transpose_a, role = "wgrad", param = "w"} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xf32>
    %sum = graph.add %acc, %dw : tensor<32x64xf32>
    graph.store %sum, @grad.w : tensor<32x64xf32>
    ```
    After:
    ```mlir
    %acc = graph.load @grad.w : tensor<32x64xbf16>
    %dw = graph.matmul %dy, %x {transpose_a, role = "wgrad", param = "w"} : (tensor<16x32xbf16>, tensor<16x64xbf16>) -> tensor<32x64xbf16>
    %sum = graph.add %acc, %dw : tensor<32x64xbf16>
    graph.store %sum, @grad.w : tensor<32x64xbf16>
    ```
  }];
  let options = [
    Option<"headChunkTokens", "head-chunk-tokens", "int64_t", "0",
           "octet-chunk-lm-head's chunk-tokens: a head of more tokens keeps "
           "its f32 accumulator (0: the head is never chunked)">,
  ];
  let statistics = [
    Statistic<"converted", "converted", "gradient accumulators made BF16">,
  ];
  let dependentDialects = ["octet::graph::GraphDialect",
                           "mlir::func::FuncDialect"];
}

#endif
