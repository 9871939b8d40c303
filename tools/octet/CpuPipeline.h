#ifndef OCTET_TOOLS_OCTET_CPUPIPELINE_H
#define OCTET_TOOLS_OCTET_CPUPIPELINE_H

// A training step of train.parallel.pipeline ranks on the CPU interpreter:
// the schedule's forward and backward passes over the stage chunks
// (compiler/Interpreter/PipelineStep.h), then the optimizer.
//
// The optimizer is not cut into stages yet: each rank holds zeros in the
// gradients of the other ranks' chunks, the ranks sum their gradients (a
// sum with zeros, so exact) and every rank runs the whole @optimizer_step,
// so they end the step holding the same variables.

#include "compiler/Interpreter/Interpreter.h"
#include "support/PipelineSchedule.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace octet {

struct CpuPipelineStep {
  double lossSum = 0; // over the step's microbatches
  double gradNorm = 0;
  double lr = 0;
};

StatusOr<CpuPipelineStep>
runCpuPipelineStep(mlir::ModuleOp module, const PipelineSchedule &schedule,
                   std::vector<interp::Interpreter> &interpreters,
                   std::vector<interp::VariableStore> &variables,
                   const std::vector<std::vector<interp::Tensor>> &microbatches);

} // namespace octet

#endif
