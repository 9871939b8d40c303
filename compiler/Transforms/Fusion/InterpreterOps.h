#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_INTERPRETEROPS_H
#define OCTET_COMPILER_TRANSFORMS_FUSION_INTERPRETEROPS_H

// Teaches the reference interpreter the ops the fusion passes produce:
// graph.slice / graph.concat, kernel.fused (runs its body),
// kernel.attention_fwd / bwd (as graph.attention / attention_grad) and
// kernel.collective (a group of one rank: the identity).

#include "mlir/IR/BuiltinOps.h"

namespace octet::fusion {

void registerFusionInterpreterOps();

// Rewrites every kernel.gemm epilogue (bias, gelu, gelu_aux, bias_grad,
// accumulate) as a plain GEMM followed by the graph ops it stands for, the
// reference meaning of the epilogue. Scaled (FP8) GEMMs become fp8.matmul:
// the interpreter's kernel.gemm applies 1/(sa·sb) as one rounded factor
// where fp8.matmul divides by each scale, so only the latter reproduces the
// precision stage's results bit for bit.
void expandGemmEpilogues(mlir::ModuleOp module);

} // namespace octet::fusion

#endif
