#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_PASSES_H
#define OCTET_COMPILER_TRANSFORMS_FUSION_PASSES_H

// Lowering to the kernel dialect and the fusion passes over it.

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace octet {

#define GEN_PASS_DECL
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"

struct KernelFusionOptions {
  // The LM head, its loss and gradients as one chunked region
  // (octet-fuse-lm-head), so f32 logits never exist whole. GPU codegen has
  // no lowering for that region yet, so a step that must run on the GPU
  // keeps the head as GEMMs and cross-entropy kernels.
  bool chunkedLmHead = false;
};

// Every fusion over the kernel dialect, in the order they compose.
void addKernelFusionPasses(mlir::OpPassManager &pm,
                           const KernelFusionOptions &options = {});

} // namespace octet

#endif
