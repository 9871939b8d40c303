#ifndef OCTET_COMPILER_TRANSFORMS_PIPELINE_PASSES_H
#define OCTET_COMPILER_TRANSFORMS_PIPELINE_PASSES_H

// Pipeline parallelism: the train step cut into stage chunks.

#include "dialects/graph/GraphDialect.h"
#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>
#include <vector>

namespace octet {

#define GEN_PASS_DECL
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Pipeline/PipelinePasses.h.inc"

// The names of chunk `stage`'s functions.
std::string stageForwardName(int64_t stage);
std::string stageBackwardName(int64_t stage);
// Its backward split in two (octet-split-weight-gradients, for ZB-H1).
std::string stageInputGradientName(int64_t stage);
std::string stageWeightGradientName(int64_t stage);
// Its forward for evaluation, where the training forward writes state
// (octet-stage-eval-functions).
std::string stageEvalName(int64_t stage);
// The optimizer step of pipeline rank `rank` (octet-split-optimizer).
std::string rankOptimizerName(int64_t rank);
// Pipeline rank `rank`'s part of init function `name` (octet.init_functions).
std::string rankInitName(int64_t rank, llvm::StringRef name);
// The init functions octet.init_functions lists for pipeline rank `rank`
// (its rankInitName parts), in the module's order.
std::vector<std::string> rankInitFunctions(mlir::ModuleOp module,
                                           int64_t rank);

} // namespace octet

#endif
