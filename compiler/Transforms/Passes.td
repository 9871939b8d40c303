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
      norm of the averaged gradients (1 / microbatches), the clipping
      multiplier, and one AdamW update per parameter with moments in
      `adam_m.<name>` / `adam_v.<name>`; zeroes the accumulators.

    Every forward tensor the backward reads goes through one `graph.save`
    (kept alive from forward to backward); norm outputs, activations, RoPE
    outputs and reshapes are recomputed in the backward instead (ops marked
    `recomputed`) unless `recompute=false`. A trainable parameter the loss
    does not depend on is an error that names it.

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
    Option<"recompute", "recompute", "bool", "true",
           "recompute norms, activations, RoPE and reshapes in the backward "
           "instead of saving their outputs">,
  ];
  let dependentDialects = ["octet::graph::GraphDialect",
                           "mlir::func::FuncDialect"];
}

#endif
