#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONPASSES_TD
#define OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONPASSES_TD

include "mlir/Pass/PassBase.td"

def OctetFuseQkv : Pass<"octet-fuse-qkv", "mlir::ModuleOp"> {
  let summary = "projections of one input (q, k, v; gate, up) become one GEMM over a concatenated weight";
  let description = [{
    Runs on the train step after autodiff and before precision, so the fused
    weight is one parameter with one FP8 scale. Linears without bias that
    read the same input and whose weights are loaded variables of one layer
    become one linear over a new variable whose rows are the weights in
    order; `fused_from`, `hf_names` and `split` (rows per part) on it keep
    the map to the Hugging Face tensors. State variables named
    `<prefix>.<weight>` (gradient accumulators, AdamW moments) are merged
    the same way. Every former read becomes a `graph.slice` of the fused
    value, and simplification then makes one GEMM out of each group of
    forward (fprop), input-gradient (dgrad) and weight-gradient (wgrad)
    matmuls and one AdamW update out of each group of updates.

    Before:
    ```mlir
    %wq = graph.load @layers.0.attn.wq : tensor<256x256xf32>
    %q = graph.linear %x, %wq {param = "layers.0.attn.wq"} : (tensor<8x128x256xf32>, tensor<256x256xf32>) -> tensor<8x128x256xf32>
    %wk = graph.load @layers.0.attn.wk : tensor<128x256xf32>
    %k = graph.linear %x, %wk {param = "layers.0.attn.wk"} : (tensor<8x128x256xf32>, tensor<128x256xf32>) -> tensor<8x128x128xf32>
    ```
    After:
    ```mlir
    graph.variable @layers.0.attn.wqk : tensor<384x256xf32> {fused_from = ["layers.0.attn.wq", "layers.0.attn.wk"], split = array<i64: 256, 128>, ...}
    %w = graph.load @layers.0.attn.wqk : tensor<384x256xf32>
    %qk = graph.linear %x, %w {param = "layers.0.attn.wqk"} : (tensor<8x128x256xf32>, tensor<384x256xf32>) -> tensor<8x128x384xf32>
    %q = graph.slice %qk {dim = 2 : i64, offset = 0 : i64} : (tensor<8x128x384xf32>) -> tensor<8x128x256xf32>
    %k = graph.slice %qk {dim = 2 : i64, offset = 256 : i64} : (tensor<8x128x384xf32>) -> tensor<8x128x128xf32>
    ```
  }];
  let dependentDialects = ["octet::graph::GraphDialect"];
}

def OctetSaveFusedOutputs : Pass<"octet-save-fused-outputs", "mlir::ModuleOp"> {
  let summary = "saves of the slices of one tensor become slices of one save of the tensor";
  let description = [{
    Autodiff saves the outputs of the separate q/k/v and gate/up linears;
    after octet-fuse-qkv those outputs are slices of one GEMM's output, and
    a saved strided slice must be stored by a copy kernel of its own (the
    forward's SwiGLU kernel wrote gate and up again beside h). Where the
    saved slices of a tensor hold at least as many bytes as the tensor (all
    of q, k and v; gate and up), the tensor is saved once and every former
    save becomes a slice of that save: the same bytes are kept, no copy is
    made, and the forward and backward kernels read their parts as strided
    slices. Where fewer bytes are saved the saves stay as they are, since
    saving the whole would keep more memory.

    Before:
    ```mlir
    %g = graph.slice %gu {dim = 2 : i64, offset = 0 : i64} : (tensor<2x4x48xf32>) -> tensor<2x4x24xf32>
    %u = graph.slice %gu {dim = 2 : i64, offset = 24 : i64} : (tensor<2x4x48xf32>) -> tensor<2x4x24xf32>
    %gs = graph.save %g : tensor<2x4x24xf32>
    %us = graph.save %u : tensor<2x4x24xf32>
    ```
    After:
    ```mlir
    %s = graph.save %gu : tensor<2x4x48xf32>
    %gs = graph.slice %s {dim = 2 : i64, offset = 0 : i64} : (tensor<2x4x48xf32>) -> tensor<2x4x24xf32>
    %us = graph.slice %s {dim = 2 : i64, offset = 24 : i64} : (tensor<2x4x48xf32>) -> tensor<2x4x24xf32>
    ```
  }];
  let dependentDialects = ["octet::graph::GraphDialect"];
}

def OctetLowerToKernel : Pass<"octet-lower-to-kernel", "mlir::ModuleOp"> {
  let summary = "graph and fp8 ops to kernel ops: GEMMs, attention, copies, collectives, one-op fused kernels";
  let description = [{
    Every matmul (graph.linear, graph.matmul, tensorwise fp8.matmul) becomes
    a kernel.gemm on 2-D operands (a linear's bias rides in the `bias`
    epilogue), attention and its gradient kernel.attention_fwd / bwd,
    fp8.transpose a kernel.copy, and every other compute op a one-op
    kernel.fused. Variable reads and writes, reshapes, slices and saves
    stay: they are views and arena slots, not kernels. Every kernel op gets
    `layer` (transformer layer, -1 outside the layers) and `section`
    (forward, backward, optimizer, eval) for the fusion report. The layer
    is that of the variables the op reads (a norm: its weight's), else of
    the name it carries (`param`, `tensor`), else of the op before it; the
    embedding and the loss are outside the layers.

    With data-parallel > 1, delayed scaling's amaxes go through one
    bucketed max all_reduce over the data group before the scale updates
    (the scale state must agree on every rank); current scaling's amax is
    reduced right before its fp8.compute_scale only where its amax_reduce
    names "data" (the precision pass names the tensor group alone: a
    rank's scale need only fit the values that rank casts). The gradients
    are reduced by octet-reduce-gradients.

    Before:
    ```mlir
    %y = graph.linear %x, %w {param = "layers.0.mlp.w_up"} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
    %s = graph.silu %y : tensor<2x8x128xf32>
    ```
    After:
    ```mlir
    %x2 = graph.reshape %x : (tensor<2x8x64xf32>) -> tensor<16x64xf32>
    %y2 = kernel.gemm %x2, %w {layer = 0 : i64, param = "layers.0.mlp.w_up", role = "fprop", section = "forward", transpose_b} : (tensor<16x64xf32>, tensor<128x64xf32>) -> tensor<16x128xf32>
    %y = graph.reshape %y2 : (tensor<16x128xf32>) -> tensor<2x8x128xf32>
    %s = kernel.fused "layers.0.silu" kind("elementwise") ins(%y : tensor<2x8x128xf32>) {
    ^bb0(%a: tensor<2x8x128xf32>):
      %r = graph.silu %a : tensor<2x8x128xf32>
      kernel.yield %r : tensor<2x8x128xf32>
    } {layer = 0 : i64, section = "forward"} : tensor<2x8x128xf32>
    ```
  }];
  let options = [
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "data-parallel ranks: > 1 agrees on the FP8 amaxes">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetFuseLmHead : Pass<"octet-fuse-lm-head", "mlir::ModuleOp"> {
  let summary = "LM head GEMM + cross-entropy + its gradient + the head's dgrad and wgrad as one chunked kernel";
  let description = [{
    The fp32 logits of a large vocabulary are the biggest tensor of the
    step (Llama 3 8B, 8192 tokens: 4.2 GB, and as much again for their
    gradient). The head's fprop GEMM, the cross-entropy, its gradient and
    the head's dgrad and wgrad GEMMs become one `kernel.fused` of kind
    "row" whose body states the computation over all tokens and whose
    `chunk_rows` says how many token rows one step of it covers: per chunk
    the runtime computes the logits, the loss contribution and the logits'
    gradient, and folds the latter into dx (rows of the chunk) and dW
    (accumulated over chunks), so only one chunk of logits exists at a time.
    `chunk_rows` is the largest power of two whose fp32 logits fit in
    256 MiB. Only plain (non-FP8) head GEMMs are taken, as the precision
    policy keeps the head.

    Before:
    ```mlir
    %logits = kernel.gemm %x, %w {role = "fprop", param = "lm_head", transpose_b} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
    %loss = kernel.fused "cross_entropy" kind("row") ins(%logits3, %labels, %mask : ...) { graph.cross_entropy }
    %dlogits = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %logits3, %labels, %mask : ...) { graph.cross_entropy_grad }
    %dx = kernel.gemm %dlogits2, %w {role = "dgrad", param = "lm_head"} : ...
    %dw = kernel.gemm %dlogits2, %x {role = "wgrad", param = "lm_head", transpose_a} : ...
    ```
    After:
    ```mlir
    %loss, %dx, %dw = kernel.fused "lm_head_cross_entropy" kind("row") ins(%x, %w, %labels, %mask, %one : ...) {
      graph.matmul, graph.cross_entropy, graph.cross_entropy_grad, graph.matmul (dgrad), graph.matmul (wgrad)
    } {chunk_rows = 8 : i64} : tensor<f32>, tensor<8x16xf32>, tensor<32x16xf32>
    ```
  }];
}

def OctetFuseEpilogue : Pass<"octet-fuse-epilogue", "mlir::ModuleOp"> {
  let summary = "bias, GELU, bias-grad and gradient accumulation into cuBLASLt GEMM epilogues";
  let description = [{
    - a one-op GELU kernel (tanh form) reading only a GEMM's output becomes
      the GEMM's `gelu` epilogue, `gelu_aux` when the pre-activation is
      still read (saved for the backward);
    - a bias_grad kernel over the dy that a wgrad GEMM reads as dyᵀ becomes
      its `bias_grad` epilogue (the aux result);
    - an add of a GEMM's output (its only use) and a tensor of the same
      shape becomes `accumulate`: the wgrad's accumulation into its
      gradient variable costs no extra pass over the weight.
    What does not fit an epilogue is left for octet-fuse-elementwise, which
    puts it in the next row kernel.

    Before:
    ```mlir
    %dw = kernel.gemm %dy, %x {transpose_a, role = "wgrad"} : (tensor<16x128xf32>, tensor<16x64xf32>) -> tensor<128x64xf32>
    %acc = graph.load @grad.w : tensor<128x64xf32>
    %sum = kernel.fused "add" kind("elementwise") ins(%acc, %dw : ...) { ... graph.add ... }
    ```
    After:
    ```mlir
    %acc = graph.load @grad.w : tensor<128x64xf32>
    %sum = kernel.gemm %dy, %x accumulate(%acc) {transpose_a, role = "wgrad"} : (tensor<16x128xf32>, tensor<16x64xf32>, tensor<128x64xf32>) -> tensor<128x64xf32>
    ```
  }];
}

def OctetFuseRope : Pass<"octet-fuse-rope", "mlir::ModuleOp"> {
  let summary = "RoPE of q and k with the head split, after the QKV GEMM; its inverse in the backward kernel";
  let description = [{
    The RoPE kernels of one attention (q and k) become one kernel that reads
    the QKV GEMM's output through the head-split views (slice and reshape,
    pulled into the kernel). In the backward, the inverse RoPE of dq and dk
    joins the kernel that concatenates dq, dk, dv for the QKV dgrad and
    wgrad GEMMs, with their FP8 quantization and transposed copy.

    Before:
    ```mlir
    %q4 = graph.reshape %q : (tensor<8x128x256xf32>) -> tensor<8x128x4x64xf32>
    %qr = kernel.fused "layers.0.rope" kind("elementwise") ins(%q4, %pos : ...) { graph.rope ... }
    %kr = kernel.fused "layers.0.rope" kind("elementwise") ins(%k4, %pos : ...) { graph.rope ... }
    ```
    After:
    ```mlir
    %qr, %kr = kernel.fused "layers.0.rope_qk" kind("elementwise") ins(%q, %pos, %k : ...) {
      graph.reshape, graph.rope, graph.reshape, graph.rope ...
    }
    ```
  }];
}

def OctetFuseNormQuantize : Pass<"octet-fuse-norm-quantize", "mlir::ModuleOp"> {
  let summary = "residual add + RMSNorm/LayerNorm + FP8 quantize + amax + transposed copy as one kernel, and the backward";
  let description = [{
    Forward: the norm kernel takes in the residual add that produces its
    input and the quantize (with its amax) and K-major transposed copy of
    its output. Backward: the norm-gradient kernel takes in the residual
    gradient add, the quantize and transposed copy of the sum, and the
    accumulation of the norm weight's gradient.

    Blockwise: the kernels that only block-quantize an RMSNorm's output
    (every side a multiple of 128; 1x128 tiles, 128x1 tiles with their
    K-major copy) join the norm's kernel when the norm's input stays in
    memory (a kernel input, or the residual sum the kernel yields anyway).
    The BF16 output is then no longer a result: codegen's row kernel keeps
    each row's 1/rms and the 128 x 128 tile kernel after it evaluates the
    norm on its tiles from the input and those factors.

    Before:
    ```mlir
    %h = kernel.fused "add" ... { graph.add }
    %n = kernel.fused "rms_norm" ... { graph.rms_norm }
    %q, %amax = kernel.fused "quantize" ... { fp8.quantize }
    %qT = kernel.copy %q {transpose} : ...
    ```
    After:
    ```mlir
    %h, %q, %amax, %qT = kernel.fused "layers.0.attn_norm" kind("row") ins(...) {
      graph.add, graph.rms_norm, fp8.quantize, fp8.transpose
    }
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect"];
}

def OctetFuseSwigluQuantize : Pass<"octet-fuse-swiglu-quantize", "mlir::ModuleOp"> {
  let summary = "SwiGLU + FP8 quantize (+ transposed copy) as one kernel, and its backward";
  let description = [{
    Forward: silu(gate)·up with the quantize, amax and transposed copy of
    the product that feeds the down projection. Backward: swiglu_grad with
    the concatenation of d_gate and d_up (after octet-fuse-qkv) and its
    quantize and transposed copy for the gate/up dgrad and wgrad GEMMs.
    Under blockwise scaling the kernels that only block-quantize the result
    (the gradient's 1x128 tiles and K-major 128x1 tiles, the recomputed
    SwiGLU's K-major 128x1 tiles) join it where every side is a multiple
    of 128 and nothing else reads the BF16 tensor: codegen's tile kernel
    then computes SwiGLU or its gradient on each tile from the kernel's
    inputs, and the BF16 tensor is neither written nor read back. A SwiGLU
    of strided slices (the forward's gate and up halves, which a kernel of
    their own stores for the backward) is left as it is: the tiles would
    read as many bytes as they save.

    Before:
    ```mlir
    %s = kernel.fused "swiglu" ... { graph.swiglu }
    %q, %amax = kernel.fused "quantize" ... { fp8.quantize }
    ```
    After:
    ```mlir
    %q, %amax = kernel.fused "layers.0.swiglu" kind("elementwise") ... { graph.swiglu, fp8.quantize }
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect"];
}

def OctetFuseAdamW : Pass<"octet-fuse-adamw", "mlir::ModuleOp"> {
  let summary = "every AdamW update in one multi-tensor kernel that also writes next step's FP8 weights";
  let description = [{
    The AdamW kernels of a function become one `multi_tensor` kernel (with
    the zeroing of the gradient accumulators). Where the train step casts a
    weight to FP8 (fp8.quantize of a loaded weight with a scale from state,
    and its transposed copy), the cast moves into the optimizer kernel:
    it quantizes the new weight with the scale the next step will read and
    stores the FP8 weight, its transpose and its amax in state variables
    (`fp8w.<param>`, `fp8w.<param>.t`, `fp8w.<param>.amax`) that the train
    step loads instead (a later stage, octet-step-local-kmajor-weights,
    makes the K-major copy in the step again, transposed from
    `fp8w.<param>`, so that it is no state; octet-step-local-fp8-weights
    then makes the FP8 weight itself in the step, from the f32 parameter,
    where the layout allows). `@cache_weights` casts the initial (or loaded)
    weights once; the module's `octet.init_functions` names it. The weight
    is then cast once per optimizer step, as Transformer Engine does with
    several microbatches. Under current scaling the step's cast reads the
    scale of the weight's own amax (an fp8.amax kernel and an
    fp8.compute_scale kernel of the loaded weight): the amax joins the
    multi-tensor kernel (taken as AdamW writes the weight), the scale and
    the cast are kernels after it (the cast must wait for the whole amax),
    and the state is the FP8 weight, its transpose and its scale
    (`fp8w.<param>.scale`, which the GEMMs read).

    Before:
    ```mlir
    %p1, %m1, %v1 = kernel.fused "adamw" ... { graph.adamw_update }
    %p2, %m2, %v2 = kernel.fused "adamw" ... { graph.adamw_update }
    ```
    After:
    ```mlir
    %p1, %m1, %v1, %p2, %m2, %v2, %q1, %a1 = kernel.fused "optimizer.adamw" kind("multi_tensor") ... {
      graph.adamw_update, graph.adamw_update, fp8.quantize ...
    }
    ```

    With `bf16-caches` (the pipeline table sets it for ZeRO-1 without a
    pipeline), a parameter without an FP8 cast whose every reader in the
    step functions needs it in BF16 only (a kernel casting it to BF16, as
    a BF16 GEMM's weight, or an embedding kernel with BF16 rows) gets a
    BF16 cache the same way: `bf16w.<param>`, written by the optimizer
    kernel and by the init function, which those readers load instead
    (the values are the same: a BF16 value widened and rounded again is
    itself). octet-shard-optimizer then all-gathers the BF16 cache's parts
    instead of the f32 parameter: half the bytes. At one rank a cache of
    a parameter read only by an embedding kernel would only add its bytes
    to the persistent region (the kernel reads a few rows).

    With `bf16-gemm-caches` (train.codegen.bf16_weight_cast "optimizer"),
    only the parameters that some step function casts to BF16 (a BF16
    GEMM's weight; with tied embeddings the embedding kernel reads the
    same cache) get one: the step no longer casts them, reading 4 B and
    writing 2 B an element a microbatch, and the AdamW kernel writes 2 B
    more an element a step. The step's cast lived from the forward's GEMM
    to the backward's, so the cache takes its bytes from the train step's
    peak wherever that peak falls between the two.
  }];
  let options = [
    Option<"bf16Caches", "bf16-caches", "bool", "false",
           "cache the BF16 cast of parameters whose readers need BF16 only">,
    Option<"bf16GemmCaches", "bf16-gemm-caches", "bool", "false",
           "cache the BF16 cast of parameters whose readers need BF16 only "
           "and that a step function casts for BF16 GEMMs">,
  ];
  let dependentDialects = ["octet::fp8::Fp8Dialect", "octet::graph::GraphDialect"];
}

def OctetFuseElementwise : Pass<"octet-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "fold the remaining elementwise kernels into a neighbouring kernel";
  let description = [{
    A kernel of elementwise ops joins the fused kernel that produces one of
    its inputs, else the one fused kernel that consumes its result, where
    the merge keeps every value defined before its uses. The K-major copy
    (kernel.copy {transpose}) of an FP8 tensor becomes an fp8.transpose in
    the kernel that quantizes it. The small scale bookkeeping kernels of
    delayed scaling (scale_update, compute_scale) of a function become one
    multi-tensor kernel. A strided graph.slice left between kernels (outer
    dimensions other than 1: no view a kernel can read in place) first gets
    a kernel of its own, which then joins a neighbour like the others.
    With `join-siblings`, two elementwise kernels of one layer and section
    that read the same tensor and neither of which depends on the other
    become one kernel that reads it once (the backward's SwiGLU recomputed
    for w_down's wgrad and the SwiGLU gradient).

    Before:
    ```mlir
    %a = kernel.fused "x" kind("row") ... { graph.rms_norm }
    %b = kernel.fused "y" kind("elementwise") ins(%a : ...) { graph.mul }
    ```
    After:
    ```mlir
    %b = kernel.fused "x" kind("row") ... { graph.rms_norm, graph.mul }
    ```
  }];
  let options = [
    Option<"joinSiblings", "join-siblings", "bool", "true",
           "join elementwise kernels that read a tensor in common">,
  ];
}

def OctetGatherEmbeddingGradient
    : Pass<"octet-gather-embedding-gradient", "mlir::ModuleOp"> {
  let summary = "data-parallel ranks all-gather the embedding gradient kernel's inputs instead of reducing its accumulator";
  let description = [{
    With data-parallel > 1, before octet-reduce-gradients. The token
    embedding's gradient is sparse in rows: a microbatch touches only the
    rows of its own tokens. So in every microbatch of @train_microbatch the
    ranks all-gather the embedding gradient kernel's rows (the gradient of
    the embedding's output and the token ids, along dimension 0, on the
    compute stream right before the kernel) and each rank scatter-adds the
    whole data group's rows into its own f32 accumulator. The accumulator
    then holds, on every rank, the sum one rank would make of the global
    batch (up to the order of the f32 additions), and needs no reduction:
    its store is marked `summed_over_data`, which octet-reduce-gradients
    leaves out of its buckets and octet-shard-optimizer reads the rank's
    part of as it is.

    Only a kernel that makes its accumulator from the embedding gradient
    alone is rewritten: its inputs are the rows, the token ids and the
    accumulator's load, its body adds the gradient to the accumulator, and
    its result is only stored back. A tied embedding's accumulator also
    takes the LM head's dense wgrad, which each rank has for its own rows
    only; that kernel is left to the buckets.

    Only while it sends fewer bytes: a rank's all-gathers send
    (data - 1) x its rows' bytes every microbatch, a reduce-scatter of the
    table (data - 1) / data x its f32 bytes once a step (an all-reduce
    twice that), so the rows are gathered while `microbatches` x data x the
    rows' bytes is at most the table's bytes (twice them without
    `sharded-optimizer`), and the accumulator keeps its reduction past that.

    Before (data = 2):
    ```mlir
    %acc = graph.load @grad.embed : tensor<256x64xf32>
    %g = kernel.fused "embedding_grad" kind("row") ins(%dy, %tokens, %acc : tensor<2x8x64xbf16>, tensor<2x8xi32>, tensor<256x64xf32>) {...}
    graph.store %g, @grad.embed : tensor<256x64xf32>
    ```
    After:
    ```mlir
    %all:2 = kernel.collective %dy, %tokens {group = "data", group_size = 2 : i64, kind = "all_gather", ...} : (tensor<2x8x64xbf16>, tensor<2x8xi32>) -> (tensor<4x8x64xbf16>, tensor<4x8xi32>)
    %g = kernel.fused "embedding_grad" kind("row") ins(%all#0, %all#1, %acc : tensor<4x8x64xbf16>, tensor<4x8xi32>, tensor<256x64xf32>) {...}
    graph.store %g, @grad.embed {summed_over_data} : tensor<256x64xf32>
    ```
  }];
  let options = [
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "data-parallel ranks: > 1 gathers the embedding gradient's rows">,
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches a rank runs each step (each gathers its rows)">,
    Option<"shardedOptimizer", "sharded-optimizer", "bool", "false",
           "the accumulators would be reduce-scattered (ZeRO-1), not "
           "all-reduced: the reduction to beat sends half the bytes">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetReduceGradients : Pass<"octet-reduce-gradients", "mlir::ModuleOp"> {
  let summary = "data-parallel gradient buckets all-reduced during the backward, on the communication stream";
  let description = [{
    With data-parallel > 1, the gradient accumulators of @train_microbatch
    are summed over the data group while the backward still runs, as
    Megatron's and PyTorch DDP's overlapped reduction does. The values
    stored into `grad.*` are grouped in the order the backward makes them
    (the LM head's first, the embedding's last) into buckets of at least
    `bucket-elements` elements (0: max(40M, 1M x data), Megatron's rule);
    right after the kernel that finishes a bucket comes one
    kernel.collective all_reduce "sum" over them, marked
    `last_microbatch` (it runs only in the microbatch that completes the
    step's accumulation; in the others its results are its inputs) and
    `comm_stream` (the bundle places it on the communication stream,
    ordered after that kernel by an event). The stores then write the
    reduced values, which share the accumulators' memory. Autodiff seeds
    each microbatch with 1 / (microbatches x ranks), so the sum is the
    gradient of the global batch's mean, and @optimizer_step reads it
    as it would on one rank.

    The delayed recipe's amax all-reduce (a "max" over the data group that
    octet-lower-to-kernel puts before the scale updates, every microbatch)
    moves to the end of the program, after the last bucket, on the
    communication stream, with the scale-update kernels it feeds and their
    stores after it: NCCL runs a communicator's calls in issue order, so on
    the compute stream in the backward it would hold compute until the
    buckets issued before it were done. It stays where it is when the
    updates feed more than stores, or when the program loads their state
    after storing it.

    Before (data = 2):
    ```mlir
    %g = kernel.gemm %dy, %x accumulate(%acc) {param = "lm_head", role = "wgrad", ...} : (...) -> tensor<256x256xf32>
    ...
    graph.store %g, @grad.lm_head : tensor<256x256xf32>
    ```
    After:
    ```mlir
    %g = kernel.gemm %dy, %x accumulate(%acc) {param = "lm_head", role = "wgrad", ...} : (...) -> tensor<256x256xf32>
    %r = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<256x256xf32>) -> tensor<256x256xf32>
    ...
    graph.store %r, @grad.lm_head : tensor<256x256xf32>
    ```
  }];
  let options = [
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "data-parallel ranks: > 1 reduces the gradients">,
    Option<"bucketElements", "bucket-elements", "int64_t", "0",
           "elements a bucket holds at least before its all-reduce is "
           "issued; 0: max(40M, 1M x data-parallel)">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetShardOptimizer : Pass<"octet-shard-optimizer", "mlir::ModuleOp"> {
  let summary = "ZeRO-1: each data-parallel rank updates its part of every parameter";
  let description = [{
    With data-parallel > 1 (train.parallel.shard_optimizer), after
    octet-reduce-gradients: every parameter's dimension 0 is cut into
    `data-parallel` equal parts, and rank r owns part r. The gradient
    buckets' all-reduces become in-place reduce-scatters (each rank's part
    of an accumulator gets the sum over the ranks; same `last_microbatch`
    and `comm_stream` placement). In @optimizer_step the AdamW kernel reads
    the rank's part of each parameter and gradient (kernel.rank_part) and
    the moments, whose variables now hold that part only (`data_shards`);
    one all-gather after it writes the new parts into every rank's
    parameters. The gradient norm is each rank's norm of its parts,
    all-gathered (one small collective) and joined as the square root of
    the sum of their squares, so clipping uses the global norm. Under an
    FP8 recipe the AdamW kernel also casts the weights it updates
    (octet-fuse-adamw); those casts leave it, one kernel per weight after
    the all-gather, reading the whole weight, so every rank writes the
    same FP8 copies and amaxes (current scaling's cast kernels after the
    optimizer read the whole weights too). A parameter whose dimension 0
    does not divide, or an AdamW kernel computing from its updates what is
    not a function of one updated weight, is an error.

    With `shard-cast-weights` (the default; the pipeline table turns it
    off for pipeline layouts) a weight whose cast reads only the new
    weight and a scale loaded from the state (delayed scaling), and whose
    f32 values nothing else reads, keeps its f32 master sharded: the
    variable holds the rank's part (`data_shards`), the cast quantizes
    that part right after its AdamW kernel, the FP8 parts are all-gathered
    in place instead of the f32 weight, one all-reduce (max) joins the
    parts' amaxes, and a kernel after the last AdamW kernel transposes
    the gathered copy into the K-major one. A current-scaled weight (its
    scale made from its amax in the step) is sharded the same way: each
    rank takes its part's amax right after the AdamW kernel, one
    all-reduce (max) per AdamW kernel joins them before its gathers, and
    the scale made from the joined amax casts the part. @cache_weights's
    casts of such a weight are rewritten the same way.

    Before (data = 2, one parameter):
    ```mlir
    %r = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, kind = "all_reduce", last_microbatch, reduction = "sum"} : (tensor<64x16xf32>) -> tensor<64x16xf32>
    ...
    %p1, %m1, %v1 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%p, %g, %m, %v, ...) {...} : tensor<64x16xf32>, ...
    graph.store %p1, @w : tensor<64x16xf32>
    ```
    After:
    ```mlir
    %r = kernel.collective %g {comm_stream, group = "data", group_size = 2 : i64, in_place, kind = "reduce_scatter", last_microbatch, reduction = "sum"} : (tensor<64x16xf32>) -> tensor<64x16xf32>
    ...
    %pp = kernel.rank_part %p {group = "data", group_size = 2 : i64} : tensor<64x16xf32> -> tensor<32x16xf32>
    %gp = kernel.rank_part %g {group = "data", group_size = 2 : i64} : tensor<64x16xf32> -> tensor<32x16xf32>
    %p1, %m1, %v1 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(%pp, %gp, %m, %v, ...) {...} : tensor<32x16xf32>, ...
    %w = kernel.collective %p1 {group = "data", group_size = 2 : i64, kind = "all_gather", reduction = "sum"} : (tensor<32x16xf32>) -> tensor<64x16xf32>
    graph.store %w, @w : tensor<64x16xf32>
    ```
  }];
  let options = [
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "data-parallel ranks: > 1 shards the optimizer over them">,
    Option<"shardCastWeights", "shard-cast-weights", "bool", "true",
           "keep the f32 master of each FP8 weight (delayed or current "
           "scaling) sharded, and all-gather its FP8 parts">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect",
                           "octet::fp8::Fp8Dialect"];
}

def OctetStepLocalKMajorWeights : Pass<"octet-step-local-kmajor-weights", "mlir::ModuleOp"> {
  let summary = "an FP8 weight's K-major copy is transposed from its row-major cache right before the GEMM that reads it, instead of kept as state";
  let description = [{
    After octet-fuse-adamw (and octet-shard-optimizer, which transposes
    the gathered FP8 copy after the AdamW kernels), the optimizer step and
    @cache_weights write two FP8 caches of a weight: the row-major
    `fp8w.<param>` the forward's fprop GEMM reads, and its transpose
    `fp8w.<param>.t` (K-major), which only the backward's dgrad GEMM reads.
    Both are persistent, so at the start of the backward, where the
    activations peak, every K-major copy sits in memory unread. Here the
    optimizer and @cache_weights stop writing the copy (the variable goes),
    and each GEMM that read it reads instead a kernel right before it
    that loads the row-major cache and transposes it (fp8.transpose, a
    tiled transpose launch from memory): a step-local buffer, dead after
    that GEMM. GEMMs that read one load of the copy (the dgrads of an FP8
    LM head over token chunks) share one kernel, before the first of them. The row-major cache holds the very bytes the copy was
    transposed from, so the GEMM reads the same copy as before. Each
    microbatch transposes again: 1 B read and 1 B written an element a
    microbatch, where the optimizer wrote 1 B an element a step.

    Only a copy that every write makes as a tensorwise transpose of what
    the same function stores to the row-major cache, and that only GEMMs
    read (their inverse scale rides along: a tensorwise scale passes a
    transpose unchanged), is made in the step; any other stays state.

    Before:
    ```mlir
    func.func @train_microbatch(...) {
      %wt = graph.load @fp8w.w.t : tensor<64x128xf8E4M3FN>
      ...
      %dx = kernel.gemm %dy, %wt scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : ...
    }
    func.func @optimizer_step() {
      %p, %q, %qt, %a = kernel.fused "optimizer.adamw" kind("multi_tensor") ... {
        ... %q = fp8.quantize ... ; %qt = fp8.transpose %q ... }
      graph.store %q, @fp8w.w : tensor<128x64xf8E4M3FN>
      graph.store %qt, @fp8w.w.t : tensor<64x128xf8E4M3FN>
    }
    ```
    After:
    ```mlir
    func.func @train_microbatch(...) {
      ...
      %w = graph.load @fp8w.w : tensor<128x64xf8E4M3FN>
      %wt = kernel.fused "w.kmajor" kind("elementwise") ins(%w, %sw) {
        %t, %s = fp8.transpose %arg0, %arg1 ... ; kernel.yield %t }
      %dx = kernel.gemm %dy, %wt scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : ...
    }
    func.func @optimizer_step() {
      %p, %q, %a = kernel.fused "optimizer.adamw" kind("multi_tensor") ... {
        ... %q = fp8.quantize ... }
      graph.store %q, @fp8w.w : tensor<128x64xf8E4M3FN>
    }
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect", "octet::kernel::KernelDialect"];
}

def OctetStepLocalFp8Weights : Pass<"octet-step-local-fp8-weights", "mlir::ModuleOp"> {
  let summary = "an FP8 weight is cast from its f32 master right before each GEMM that reads it, instead of kept as state";
  let description = [{
    After octet-fuse-adamw and octet-step-local-kmajor-weights, the
    optimizer step and @cache_weights write the FP8 cast of a weight,
    `fp8w.<param>`, which the forward's fprop GEMM reads and the
    backward's dgrad GEMM reads transposed (a K-major kernel right before
    it). The cast is persistent, so at the start of the backward, where
    the activations peak, every FP8 weight sits in memory unread. Here the
    optimizer and @cache_weights stop writing it (the variable goes), and
    each GEMM that read it reads instead a kernel right before it that
    loads the f32 parameter and quantizes it, and each K-major kernel
    becomes one that quantizes and transposes the f32 parameter (the FP8
    row-major copy is not written): step-local buffers, dead after their
    GEMM.

    The bytes are the optimizer's: the parameter the step reads is the one
    the optimizer cast, and the scale is the one it cast with. Current
    scaling's optimizer stores that scale already (`fp8w.<param>.scale`);
    delayed scaling's cast read the weight's scale from the step's state,
    which the step's scale update moves on after every microbatch, so the
    optimizer (and @cache_weights) now copy it into
    `fp8w.<param>.cast_scale`, derived state that INIT makes again on a
    resume. The weight's amax (delayed scaling's amax history reads
    `fp8w.<param>.amax`) stays the optimizer's: an fp8.amax of the same f32
    weight takes the place of the cast in the multi-tensor kernel.

    Cost per FP8 weight element: each microbatch 4 B read and 1 B written
    for the forward's cast, and the backward's cast-transpose reads 4 B
    where the transpose read 1 B; the optimizer writes 1 B less a step.

    Only a cache that every write makes as a tensorwise quantize of the
    parameter as its function leaves it (with a scale every writer keeps
    alike), and that only GEMMs (tensorwise scales) and K-major transposes
    read, is made in the step; any other stays state. The pipeline table
    runs this pass per `train.codegen.fp8_weight_cast` ("step": one GPU and
    replicated data parallelism by default).

    Before:
    ```mlir
    func.func @train_microbatch(...) {
      %w = graph.load @fp8w.w : tensor<128x64xf8E4M3FN>
      %y = kernel.gemm %x, %w scales_inv(%sx, %sw) {role = "fprop", transpose_b} : ...
      ...
      %w2 = graph.load @fp8w.w : tensor<128x64xf8E4M3FN>
      %wt = kernel.fused "w.kmajor" kind("elementwise") ins(%w2, %sw) {
        %t, %s = fp8.transpose %arg0, %arg1 ... ; kernel.yield %t }
      %dx = kernel.gemm %dy, %wt scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : ...
    }
    func.func @optimizer_step() {
      %p, %q, %a = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(..., %scale) {
        ... %q, %a = fp8.quantize %new, %arg9 ... }
      graph.store %q, @fp8w.w : tensor<128x64xf8E4M3FN>
      graph.store %a, @fp8w.w.amax : tensor<f32>
    }
    ```
    After:
    ```mlir
    func.func @train_microbatch(...) {
      %m = graph.load @w : tensor<128x64xf32>
      %c = graph.load @fp8w.w.cast_scale : tensor<f32>
      %w = kernel.fused "w.fp8" kind("elementwise") ins(%m, %c) {
        %q, %a = fp8.quantize %arg0, %arg1 ... ; kernel.yield %q }
      %y = kernel.gemm %x, %w scales_inv(%sx, %sw) {role = "fprop", transpose_b} : ...
      ...
      %wt = kernel.fused "w.kmajor" kind("elementwise") ins(%m2, %c2) {
        %q, %a = fp8.quantize %arg0, %arg1 ... ; %t, %s = fp8.transpose %q, %arg1 ... ; kernel.yield %t }
      %dx = kernel.gemm %dy, %wt scales_inv(%sdy, %sw) {role = "dgrad", transpose_b} : ...
    }
    func.func @optimizer_step() {
      %p, %a = kernel.fused "optimizer.adamw" kind("multi_tensor") ... {
        ... %a = fp8.amax %new ... }
      graph.store %a, @fp8w.w.amax : tensor<f32>
      graph.store %scale, @fp8w.w.cast_scale : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect", "octet::kernel::KernelDialect"];
}

def OctetFuseBlockFactors : Pass<"octet-fuse-block-factors", "mlir::ModuleOp"> {
  let dependentDialects = ["octet::fp8::Fp8Dialect"];
  let summary = "the kernels that block-quantize a GEMM's operands also write its dequantization factors in cuBLASLt's layout";
  let description = [{
    cuBLASLt's block-scaled GEMMs on sm_90 multiply by f32 factors
    (1 / scale) in a layout of their own: [K/128, R] for 1x128 tiles,
    [R/128, ceil4(K/128)] for 128x128 blocks (fp8.block_factors). Without
    this pass the bundle launches a small kernel before each such GEMM to
    write them from the quantize scales. Here, for every block-scaled
    kernel.gemm whose two operands' scales come from kernels that
    block-quantize them with power-of-two scales (their
    fp8.block_quantize scales or the scales of its fp8.transpose, possibly
    through a graph.save), an
    fp8.block_factors of those scales joins the producing kernel, whose
    codegen writes each factor where it writes the scale, and the GEMM
    reads the factors (scale operands of rank 1). A scales result that
    nothing else reads then leaves the kernel. One factors result per
    scales and layout, whatever the number of GEMMs that read it. Only
    power-of-two scales: their factors are exact, so multiplying by them
    gives the bits of dividing by the scales (the interpreter's meaning of
    a GEMM on quantize scales); other GEMMs keep the factors launch.

    Before:
    ```mlir
    %q:2 = kernel.fused "quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
      %a, %s = fp8.block_quantize ...
      kernel.yield %a, %s
    }
    %y = kernel.gemm %q#0, %w scales(%q#1, %ws) {a_block = array<i64: 1, 128>, ...}
    ```
    After:
    ```mlir
    %q:2 = kernel.fused "quantize" kind("elementwise") ins(%x : tensor<256x256xbf16>) {
      %a, %s = fp8.block_quantize ...
      %f = fp8.block_factors %s {block = array<i64: 1, 128>} : (tensor<256x2xf32>) -> tensor<512xf32>
      kernel.yield %a, %f
    }
    %y = kernel.gemm %q#0, %w scales(%q#1, %wf) {a_block = array<i64: 1, 128>, ...}
    ```
  }];
}

def OctetRecomputeCast : Pass<"octet-recompute-cast", "mlir::ModuleOp"> {
  let summary = "a cast-only kernel recomputes its input from the producer's inputs where that moves fewer bytes";
  let description = [{
    Under current FP8 scaling a tensor's cast waits for its whole amax, so
    the kernel that produces the tensor writes it (BF16) with its amax, and
    a kernel after the scale reads it back to cast it (quantize, and the
    K-major transpose). Where only that cast reads the tensor and the ops
    that make it (elementwise ops, RMSNorm/LayerNorm, RoPE, joins) read
    fewer bytes than the tensor's write and read together, the cast kernel
    computes them again from the producer's inputs, or from what the
    producer stores anyway (the residual stream a norm reads), and the
    producer keeps only the amax: a norm output (2 B an element read again
    against 4 B), SwiGLU's gradient (3 B against 4 B), the q/k/v gradient
    join; not SwiGLU (4 B against 4 B) nor the norm gradients (their
    weight gradients sum over all rows). The cast kernel then takes the
    one-launch paths codegen has for them (the clustered RMSNorm + quantize
    + transpose, the quantized joins).

    Before:
    ```mlir
    %h, %n, %a = kernel.fused "layers.1.rms_norm" kind("row") ins(%r, %d, %w : ...) {
      %h = graph.add ... ; %n = graph.rms_norm %h, %w ; %a = fp8.amax %n
    }
    %s = kernel.fused "compute_scale" ins(%a) { fp8.compute_scale }
    %q, %qT = kernel.fused "layers.1.quantize" ins(%s, %n) { fp8.quantize %n, %s ; fp8.transpose }
    ```
    After:
    ```mlir
    %h, %a = kernel.fused "layers.1.rms_norm" kind("row") ins(%r, %d, %w : ...) {
      %h = graph.add ... ; %n = graph.rms_norm %h, %w ; %a = fp8.amax %n
    }
    %s = kernel.fused "compute_scale" ins(%a) { fp8.compute_scale }
    %q, %qT = kernel.fused "layers.1.quantize" kind("row") ins(%h, %w, %s) {
      %n = graph.rms_norm %h, %w ; fp8.quantize %n, %s ; fp8.transpose
    }
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect"];
}

def OctetRecomputeKMajor : Pass<"octet-recompute-kmajor", "mlir::ModuleOp"> {
  let summary = "a K-major FP8 copy saved for a wgrad GEMM is cast again in the backward, in the kernel that reads its saved sources or just before the GEMM";
  let description = [{
    The forward kernel that casts a tensor for its fprop GEMM also writes
    the K-major (transposed) FP8 copy the backward's wgrad GEMM reads, and
    that copy is kept from the forward to the backward. Where the copy is
    made by elementwise ops, RMSNorm, views and a tensorwise cast from
    tensors the backward reads anyway (saved by the autodiff pass, or
    reshapes of them), state loads (a norm weight) and a scale loaded from
    state, the backward makes it again and the forward stops writing it. If
    a backward kernel already reads every one of those saved tensors, that
    kernel casts the copy again and the wgrad GEMM moves after it: SwiGLU's
    output (the SwiGLU gradient kernel reads the saved gate and up halves;
    w_down's wgrad) and the norms' outputs (the RMSNorm gradient kernel
    reads the saved norm input and the weight; the QKV and gate_up
    wgrads). Otherwise a kernel of its own casts the saved tensor again
    just before the GEMM: the attention output (read in the backward by
    the attention kernel only; wo's wgrad). Exact under delayed scaling:
    the same scale, the same inputs, the same ops; the repeated cast's amax
    is read by nothing (the forward's is the step's). Codegen transposes
    FP8 from memory, so the kernel also yields the row-major cast for its
    transpose launch (or writes both in one launch, quantizing as it
    transposes): 1 B an element more written a step than when the forward
    wrote the copy where a kernel reads the sources already, and a launch
    that reads the saved tensor again where none does.

    Before:
    ```mlir
    %g, %u, %q, %a, %qT, %s = kernel.fused "layers.0.swiglu" ins(%gu, %scale) {
      slices ; %y = graph.swiglu ; fp8.quantize %y, %scale ; fp8.transpose }
    %gs = graph.save %g  ;  %us = graph.save %u  ;  %qTs = graph.save %qT
    ...
    %dw = kernel.gemm %dyT, %qTs ... {role = "wgrad"}
    %dgu = kernel.fused "layers.0.swiglu_grad" ins(%dh, %gs, %us, %dyscale) {...}
    ```
    After:
    ```mlir
    %g, %u, %q, %a = kernel.fused "layers.0.swiglu" ins(%gu, %scale) {...}
    %gs = graph.save %g  ;  %us = graph.save %u
    ...
    %qT2, %dgu = kernel.fused "layers.0.swiglu_grad" ins(%gs, %us, %scale, %dh, %dyscale) {
      %y = graph.swiglu ; fp8.quantize %y, %scale {recomputed} ; fp8.transpose ;
      graph.swiglu_grad ... }
    %dw = kernel.gemm %dyT, %qT2 ... {role = "wgrad"}
    ```
  }];
  let dependentDialects = ["octet::fp8::Fp8Dialect"];
}

def OctetOverwriteGradients : Pass<"octet-overwrite-gradients", "mlir::ModuleOp"> {
  let summary = "the first microbatch's wgrad GEMM writes its gradient accumulator, so the optimizer step does not clear it";
  let description = [{
    A gradient accumulator `grad.*` that @train_microbatch reads once, as
    the accumulate operand of a wgrad kernel.gemm whose result (or its
    data-parallel `last_microbatch` all-reduce) is what is stored back, and
    that @optimizer_step clears with a stored zero (a memset), is written
    rather than added to in the first microbatch of a step: the GEMM gets
    the unit attribute `first_microbatch_overwrites` (beta = 0 in the
    first microbatch, 1 in the later ones of gradient accumulation) and
    the clearing store goes. The reference interpreter and the runtime are
    told which run of @train_microbatch is a step's first, as they are told
    which is its last; between steps such an accumulator holds the last
    step's gradient instead of zeros. Accumulators with other writers (a
    norm weight's column sums, the embedding's scatter, a tied weight's two
    GEMMs) keep the clearing store, unless a step has one microbatch
    (`microbatches=1`): then the clearing store moves from the optimizer
    step into @train_microbatch, just before the first op that reads or
    writes the accumulator, which clears it every run as the optimizer did
    once a step; the accumulator is step-local too, live from that memset
    to the optimizer's last read (the embedding's 1.96 GiB gradient of
    Llama 3 8B no longer held through the forward).

    Before:
    ```mlir
    func.func @train_microbatch(...) {
      %acc = graph.load @grad.w : tensor<16x8xf32>
      %g = kernel.gemm %dy, %x accumulate(%acc) {role = "wgrad", transpose_a} : (...) -> tensor<16x8xf32>
      graph.store %g, @grad.w : tensor<16x8xf32>
    }
    func.func @optimizer_step() {
      ...
      %z = graph.fill {value = 0.0 : f64} : tensor<16x8xf32>
      graph.store %z, @grad.w : tensor<16x8xf32>
    }
    ```
    After:
    ```mlir
      %g = kernel.gemm %dy, %x accumulate(%acc) {first_microbatch_overwrites, role = "wgrad", transpose_a} : (...) -> tensor<16x8xf32>
    ...
    func.func @optimizer_step() {
      ...
    }
    ```
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "0",
           "runs of @train_microbatch per optimizer step (0: not known); "
           "with 1 the other accumulators' clearing moves into it">,
  ];
}

def OctetChunkLmHead : Pass<"octet-chunk-lm-head", "mlir::ModuleOp"> {
  let summary = "the LM head, its loss and gradients over chunks of tokens";
  let description = [{
    The logits [tokens, vocabulary] are the largest tensor of the step
    (Llama 3 at 8192 tokens: 1.96 GiB in BF16), live at the head of the
    backward beside every saved activation. The head's fprop GEMM, the
    cross-entropy kernel, its gradient's and the head's dgrad and wgrad
    GEMMs (as octet-lower-to-kernel and octet-fuse-epilogue leave them)
    become the same kernels over chunks of `chunk-tokens` tokens (the
    largest multiple of 16 up to it that divides the token count), one
    chunk after the other:
    - the fprop GEMM of the chunk's rows of the head's input (a view);
    - cross_entropy and cross_entropy_grad of the chunk's logits, labels
      and mask `over` the whole batch's mask, so each divides by the
      batch's token count; the gradient is written over the chunk's
      logits (octet-overwrite-logits);
    - the dgrad GEMM: the chunk's rows of dx, the pieces of a
      `graph.concat` along dimension 0 that the memory plan lays out in
      its buffer (no copy);
    - the wgrad GEMM, accumulating (beta = 1) into the previous chunk's
      result, the first into the wgrad's own accumulator if it had one.
    One scalar kernel adds the chunks' losses. Only one chunk of logits is
    live at a time, and the wgrad reads the forward's normalized input
    rather than the backward's recomputation. Per token the loss and dx
    are computed as before; the wgrad's sum over tokens and the loss's are
    regrouped by chunk (f32). A head of `chunk-tokens` tokens or fewer, or
    `chunk-tokens` 0, is left whole.

    A head in FP8 (octet-precision with keep-head-bf16=false, tensorwise
    scales) chunks the same way, its GEMMs keeping their inverse scales:
    the fprop reads the chunk's rows of the quantized input; the gradient
    kernel is the head's own (cross_entropy_grad, the E5M2 cast with the
    step's scale and its transpose) over the chunk; a kernel transposes
    the chunk's input for the wgrad (the backward's whole K-major copy of
    it, which only the replaced wgrad read, is dropped from its kernel);
    and one scalar kernel takes the largest of the chunks' amaxes (a
    concat and an fp8.amax with the cast's amax_reduce), which replaces
    the gradient's amax where the scale update reads it.

    Before (8 tokens, chunk-tokens=4):
    ```mlir
    %logits = kernel.gemm %x, %w {role = "fprop", param = "embed", transpose_b} : (tensor<8x16xbf16>, tensor<32x16xbf16>) -> tensor<8x32xbf16>
    %loss = kernel.fused "cross_entropy" kind("row") ins(%l3, %labels, %mask : ...) { graph.cross_entropy }
    %dlogits = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : ...) { graph.cross_entropy_grad }
    %dx = kernel.gemm %d2, %w {role = "dgrad", param = "embed"} : ...
    %dw = kernel.gemm %d2, %x {role = "wgrad", param = "embed", transpose_a} : ...
    ```
    After:
    ```mlir
    %x0 = graph.slice %x {dim = 0 : i64, offset = 0 : i64} : (tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %z0 = kernel.gemm %x0, %w {role = "fprop", ...} : (...) -> tensor<4x32xbf16>
    %loss0 = kernel.fused "cross_entropy" ... { graph.cross_entropy %a, %b, %c over %d }
    %g0 = kernel.fused "cross_entropy_grad" ... { graph.cross_entropy_grad %s, %a, %b, %c over %d }
    %dx0 = kernel.gemm %g0r, %w {role = "dgrad", ...} : (...) -> tensor<4x16xbf16>
    %dw0 = kernel.gemm %g0r, %x0 {role = "wgrad", transpose_a, ...} : (...) -> tensor<32x16xf32>
    ... chunk 1, its wgrad `accumulate(%dw0)` ...
    %loss = kernel.fused "lm_head.loss" kind("elementwise") ins(%loss0, %loss1 : ...) { graph.add }
    %dx = graph.concat %dx0, %dx1 {dim = 0 : i64} : (...) -> tensor<8x16xbf16>
    ```
  }];
  let options = [
    Option<"chunkTokens", "chunk-tokens", "int64_t", /*default=*/"2048",
           "tokens per chunk: 2048 keeps each chunk's wgrad GEMM (K = the "
           "chunk) compute-bound and a Llama 3 chunk of logits at 0.49 GiB; "
           "0 keeps the head whole">
  ];
}

def OctetOverwriteLogits : Pass<"octet-overwrite-logits", "mlir::ModuleOp"> {
  let summary = "the cross-entropy gradient written over the logits it reads";
  let description = [{
    The BF16 logits [tokens, vocabulary] and their gradient are the largest
    tensors of the step (Llama 3, 8192 tokens: 1.96 GiB each), and at the
    head of the backward both are live beside every saved activation. A
    kernel.fused whose body is one graph.cross_entropy_grad gets
    `overwrites = array<i64: N>`, N its logits input, when the logits are
    the result of an op of the same function and every reader of them
    (through reshapes, slices and saves: the loss kernel) runs before it.
    The memory plan then gives the gradient the logits' buffer (and refuses
    the mark if a later op reads the logits); the GPU lowering reads a
    token's row whole (max, sum of exponentials) before each thread writes
    the gradient of the elements it has just read. Values do not change: the
    reference interpreter runs the kernel as before.

    Before:
    ```mlir
    %logits = kernel.gemm %x, %w {role = "fprop", param = "lm_head", transpose_b} : (...) -> tensor<8x32xbf16>
    %l3 = graph.reshape %logits : (tensor<8x32xbf16>) -> tensor<1x8x32xbf16>
    %loss = kernel.fused "cross_entropy" kind("row") ins(%l3, %labels, %mask : ...) { graph.cross_entropy } : tensor<f32>
    %dlogits = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : ...) { graph.cross_entropy_grad } : tensor<1x8x32xbf16>
    ```
    After:
    ```mlir
    %dlogits = kernel.fused "cross_entropy_grad" kind("row") ins(%one, %l3, %labels, %mask : ...) { graph.cross_entropy_grad } {overwrites = array<i64: 1>} : tensor<1x8x32xbf16>
    ```
  }];
  let dependentDialects = ["octet::kernel::KernelDialect"];
}

#endif
