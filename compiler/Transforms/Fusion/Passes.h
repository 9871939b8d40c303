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

} // namespace octet

#endif
