#ifndef OCTET_TOOLS_OCTET_CPUPIPELINE_H
#define OCTET_TOOLS_OCTET_CPUPIPELINE_H

// A training step of train.parallel.pipeline × data ranks on the CPU
// interpreter: each data-parallel replica runs the schedule's forward and
// backward passes over the stage chunks on its pipeline ranks
// (compiler/Interpreter/PipelineStep.h), then the optimizer.
//
// The gradient reduction and the optimizer are not compiled for pipelines
// yet, so this driver makes them: every rank holds zeros in the gradients
// of the other pipeline ranks' chunks, the world's ranks sum their
// gradient accumulators in rank order (for each parameter the data group's
// sum, as the data-parallel all-reduce folds it, plus exact zeros), and
// every rank runs the whole @optimizer_step, so all end the step holding
// the same variables.

#include "compiler/Interpreter/Interpreter.h"
#include "support/PipelineSchedule.h"
#include "support/Status.h"

#include "mlir/IR/BuiltinOps.h"

#include <vector>

namespace octet {

struct CpuPipelineStep {
  double lossSum = 0; // over the step's microbatches, every replica's
  double gradNorm = 0;
  double lr = 0;
};

// Rank p·data + d (Megatron's order, data before pipeline) is pipeline rank
// p of replica d; `microbatches[d]` are replica d's.
StatusOr<CpuPipelineStep> runCpuPipelineStep(
    mlir::ModuleOp module, const PipelineSchedule &schedule, int data,
    std::vector<interp::Interpreter> &interpreters,
    std::vector<interp::VariableStore> &variables,
    const std::vector<std::vector<std::vector<interp::Tensor>>> &microbatches);

} // namespace octet

#endif
