#ifndef OCTET_COMPILER_TRANSFORMS_PIPELINE_PIPELINEPASSES_TD
#define OCTET_COMPILER_TRANSFORMS_PIPELINE_PIPELINEPASSES_TD

include "mlir/Pass/PassBase.td"

def OctetSplitStages : Pass<"octet-split-stages", "mlir::ModuleOp"> {
  let summary = "the train step cut into pipeline stage chunks: a forward and a backward function per chunk";
  let description = [{
    With `layer-split` (layers a chunk, in chunk order), @train_microbatch
    is cut into one forward and one backward function per chunk:

      @stage<s>_forward(batch..., edge...) -> ([loss,] edge..., stash...)
      @stage<s>_backward(batch..., stash..., gradient edge...) -> (gradient edge...)

    An op's chunk is its `layer`'s; the ops of no layer go with the first
    chunk where they come before every layer (the embedding and its
    gradient) and with the last otherwise (final norm, LM head, loss).
    Its phase is its `section` (forward or backward). Ops of neither (loads,
    reshapes, saves, slices) are copied into every function that uses
    them. What a function reads from another becomes a function boundary:
    the previous chunk's forward values (the activation edge, received;
    those the backward needs are also stashed), the chunk's own forward
    values its backward reads (the stash), and the next chunk's backward
    values (the gradient edge). Every edge tensor has a static shape. A
    collective goes with the function that makes its operands: a
    data-parallel gradient bucket filled across a chunk boundary is cut
    into one collective per function, each right after the op that makes
    the last of its own operands, with the bucket's attributes; an operand
    that is the step's argument (the token ids an embedding gradient's
    rows are gathered with) goes where the collective's own section and
    layer put it. Any other
    value crossing chunks, a variable stored by two chunks, or an op of
    another section (FP8 scale updates) is an error naming the op. The last chunk's forward returns the loss first. Every
    function carries `octet.stage` and `octet.phase`; forward functions
    `octet.edge_results` (edge tensors after the loss), backward functions
    `octet.stash_args`. @train_microbatch is removed: a program for one
    rank does not run on a pipeline.
  }];
  let options = [
    ListOption<"layerSplit", "layer-split", "int64_t",
               "layers of each chunk, in chunk order (empty: no cut)">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetSplitOptimizer : Pass<"octet-split-optimizer", "mlir::ModuleOp"> {
  let summary = "each pipeline rank's optimizer step over its own chunks' variables";
  let description = [{
    After octet-split-stages, a variable belongs to the pipeline rank whose
    chunk functions (@stage<s>_forward/backward, chunk s on rank s mod
    `ranks`) read or write it; a parameter's gradient accumulator and
    moments go with it. @optimizer_step becomes one
    @rank<r>_optimizer_step per rank: the AdamW updates, accumulator
    clearing and norm operands of other ranks' variables are dropped, and
    the rank's norm is all-gathered over the "pipeline" group and joined,
    so clipping uses the whole model's norm. Variables one rank holds get
    `pipeline_rank = r`; the rest (the step counter) every rank keeps.

    Before (two ranks, @w0 on rank 0, @w1 on rank 1):
      %n = kernel.fused "global_norm" ins(%g0, %g1) ...
      %p:6 = kernel.fused "optimizer.adamw" kind("multi_tensor") ins(...)
    After, in @rank1_optimizer_step:
      %n = kernel.fused "global_norm" ins(%g1) ...
      %a = kernel.collective ... kind = "all_gather", group = "pipeline"
      %j = kernel.fused "global_norm" ins(%a) ...
      %p:3 = kernel.fused "optimizer.adamw" ... (the update of @w1 alone)

    A variable used by chunks on two ranks is an error naming it.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "pipeline ranks">,
  ];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetSplitWeightGradients
    : Pass<"octet-split-weight-gradients", "mlir::ModuleOp"> {
  let summary = "each chunk's backward split into an input-gradient and a weight-gradient function (ZB-H1)";
  let description = [{
    After octet-split-stages, each @stage<s>_backward becomes

      @stage<s>_input_gradient(batch..., stash..., gradient edge...)
          -> (gradient edge..., weight stash...)
      @stage<s>_weight_gradient(batch..., stash..., gradient edge...,
                                weight stash...) -> ()

    so that a zero-bubble schedule can run the weight gradients (W) later
    than the input gradients (B) the previous stage waits for. W holds the
    weight-gradient GEMMs (role "wgrad"), everything that reads what they
    make (the stores into the gradient accumulators, the data-parallel
    collectives of their buckets) and the ops whose results only W reads
    (a recomputed norm output that only a wgrad GEMM takes). B keeps the
    rest: the dgrad chain, and what a kernel makes for both (the norm
    gradients, whose kernels also accumulate their weights' gradients, and
    the output gradients or their FP8 copies a dgrad and a wgrad GEMM
    share). What W reads of B's kernels is B's "weight stash", returned
    after the gradient edge and passed to W with the microbatch (a stash
    entry like the forward's); W also takes every argument of B, which
    stay in the microbatch's entry until W has run. Loads and views are
    copied into W rather than stashed. A variable one function writes and
    the other reads, or a gradient edge that depends on a weight gradient,
    is an error naming the op. B carries `octet.stash_args` and
    `octet.weight_stash_results`, W `octet.stash_args` and
    `octet.weight_stash_args`; both `octet.stage`, and `octet.phase`
    "input_gradient" or "weight_gradient".
  }];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

def OctetStageEvalFunctions
    : Pass<"octet-stage-eval-functions", "mlir::ModuleOp"> {
  let summary = "per pipeline chunk whose forward writes state, an evaluation forward that writes none";
  let description = [{
    After octet-split-stages, each @stage<s>_forward that stores into a
    variable (delayed scaling's amax histories and scales) gets a copy,

      @stage<s>_eval(batch..., edge...) -> ([loss,] edge...)

    without its stores and its stash results, and without what only those
    read: the scale updates, the copies of scales kept for the backward,
    and the results of a fused kernel nobody reads (a quantize's
    transposed copy and amax). It reads the state the forward reads, as it
    was before the forward's own update, so it computes the edge and the
    loss the training forward computes and one rank's @forward would,
    and leaves the state as it found it: what evaluation of a pipeline
    runs on every stage. A forward that stores nothing (BF16, blockwise and
    current scaling) gets none: evaluation runs it as it is. Each copy
    carries the forward's `octet.stage` and `octet.edge_results`, and
    `octet.phase` "eval".
  }];
  let dependentDialects = ["octet::kernel::KernelDialect",
                           "octet::graph::GraphDialect"];
}

#endif
