#ifndef OCTET_FRONTENDS_GRAPHIMPORTER_H
#define OCTET_FRONTENDS_GRAPHIMPORTER_H

// Spec → the forward graph: a module of graph.variable parameters and one
// func.func @forward. Autodiff, the interpreter and checkpoints build on this
// shape, so it is a contract:
//
// Parameters (f32, static shapes, no data: importing a 70B model allocates
// nothing), in this order, with D = hidden, V = vocab, F = intermediate,
// Hq / Hkv = query / kv heads, Dh = head_dim, P = max positions:
//   embed [V, D]              pos_embed [P, D] (learned positions only)
//   layers.N.attn_norm [D]    (+ layers.N.attn_norm_bias with LayerNorm)
//   layers.N.attn.wq [Hq*Dh, D]   wk, wv [Hkv*Dh, D]   wo [D, Hq*Dh]
//   layers.N.mlp_norm [D]     (+ layers.N.mlp_norm_bias)
//   layers.N.mlp.w_gate [F, D] (SwiGLU only)  w_up [F, D]  w_down [D, F]
//   final_norm [D]            (+ final_norm_bias)
//   lm_head [V, D]            (absent when embeddings are tied)
// A linear's bias follows its weight, named weight + "_bias"
// (layers.N.attn.wq_bias). kind: embedding / weight / bias / norm; init:
// normal(init_std) for weights and embeddings, ones for norm weights, zeros
// for biases.
//
// hf_name is the tensor in a Hugging Face checkpoint (model.layers.N.
// self_attn.q_proj.weight, lm_head.weight, transformer.h.N.ln_1.bias, ...).
// GPT-2 stores its linears as Conv1D, [in, out], and fuses q, k, v into
// c_attn; two discardable attributes say how to get ours from the HF tensor:
//   graph.hf_transpose          transpose the HF tensor first;
//   graph.hf_chunk = [i, n]     then take chunk i of n equal parts along
//                               dimension 0 (q, k, v = chunks 0, 1, 2 of
//                               c_attn.weight and of c_attn.bias).
//
// @forward(tokens [B,S] i32, labels [B,S] i32, loss_mask [B,S] f32,
//          positions [B,S] i32 [, cu_seqlens [B·S+1] i32 when documents
//          are packed]) -> loss (f32 scalar); B = micro_batch_size,
//          S = seq_len. cu_seqlens is sized for the most documents a batch
//          can hold (one token each); a batch with fewer ends in empty
//          documents, its last boundary (B·S) repeated.
// Each argument and the result carry {graph.name = "..."}. Every variable is
// loaded once, at its first use; a tied LM head reuses the embed load.

#include "spec/spec.pb.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace octet {

// The dialects an imported module holds (graph, func).
void registerImportDialects(mlir::DialectRegistry &registry);

// Builds and verifies the forward module of a resolved spec (see
// spec::resolveSpec); a spec that fails the checks is an error.
StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
importForwardGraph(mlir::MLIRContext &context, const spec::Spec &spec);

} // namespace octet

#endif
