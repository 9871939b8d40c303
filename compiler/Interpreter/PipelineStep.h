#ifndef OCTET_COMPILER_INTERPRETER_PIPELINESTEP_H
#define OCTET_COMPILER_INTERPRETER_PIPELINESTEP_H

// The interpreter's pipeline ranks: each rank of train.parallel.pipeline
// runs its instruction list (support/PipelineSchedule.h) on a thread, over
// the chunk functions octet-split-stages made, its sends and receives
// meeting the peers' in PipeChannels. This is the
// oracle for the GPU pipeline: a step of P ranks must train as one rank.

#include "compiler/Interpreter/Collectives.h"
#include "compiler/Interpreter/Interpreter.h"
#include "compiler/Interpreter/PipeChannels.h"
#include "support/PipelineSchedule.h"
#include "support/Status.h"

#include <vector>

namespace octet::interp {

struct PipelineStepResult {
  // The last stage's losses, summed in microbatch order.
  double lossSum = 0;
  // Per rank, the most (chunk, microbatch) stashes it held at once.
  std::vector<int> peakStash;
};

// Runs one step's forward and backward passes, or, for a forward-only
// schedule (PipelineSchedule.forwardOnly: evaluation), its forwards alone,
// each chunk's @stage<s>_eval where its training forward writes state
// (octet-stage-eval-functions), as the runtime's evaluation does.
// `microbatches[m]` are the batch tensors of microbatch m,
// `interpreters[r]` and `variables[r]` pipeline rank r's. Each rank writes only the gradients of its own chunks
// and reduces them over its data group where the chunk functions hold the
// collectives (a chunk's last backward runs those marked last_microbatch);
// the optimizer step is the caller's. `collectives`, the exchange the
// interpreters' collectives meet in when there are other data replicas, is
// aborted when a rank fails, so that their ranks stop waiting for it.
StatusOr<PipelineStepResult>
runPipelineStep(mlir::ModuleOp module, const PipelineSchedule &schedule,
                const std::vector<Interpreter *> &interpreters,
                const std::vector<VariableStore *> &variables,
                const std::vector<std::vector<Tensor>> &microbatches,
                RankExchange *collectives = nullptr);

} // namespace octet::interp

#endif
