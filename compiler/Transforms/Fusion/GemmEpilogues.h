#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_GEMMEPILOGUES_H
#define OCTET_COMPILER_TRANSFORMS_FUSION_GEMMEPILOGUES_H

// kernel.gemm epilogues restated as graph ops, so a test can check the
// interpreter's kernel.gemm against the ops the epilogue stands for.

#include "mlir/IR/BuiltinOps.h"

namespace octet::fusion {

// Rewrites every kernel.gemm epilogue (bias, gelu, gelu_aux, bias_grad,
// accumulate) as a plain GEMM followed by the graph ops it stands for, the
// reference meaning of the epilogue. Scaled (FP8) GEMMs become fp8.matmul,
// tensorwise ones with inverse_scales: both ops then multiply the product
// by the same f32 product of the two inverses, so the precision stage's
// results are reproduced bit for bit.
void expandGemmEpilogues(mlir::ModuleOp module);

} // namespace octet::fusion

#endif
