#ifndef OCTET_COMPILER_TRANSFORMS_PASSES_H
#define OCTET_COMPILER_TRANSFORMS_PASSES_H

#include "dialects/graph/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace octet {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

// Registers the named pipeline octet-train-pipeline with the global registry,
// so octet-opt accepts it (the passes themselves are registered by
// registerCompilerPasses). Defined in the OctetPipelines library.
void registerTrainingPipeline();

} // namespace octet

#endif
