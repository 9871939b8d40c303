#ifndef OCTET_TOOLS_OCTET_CPUPIPELINE_H
#define OCTET_TOOLS_OCTET_CPUPIPELINE_H

// A training step of train.parallel.pipeline × data ranks on the CPU
// interpreter: each data-parallel replica runs the schedule's forward and
// backward passes over the stage chunks on its pipeline ranks
// (compiler/Interpreter/PipelineStep.h), then the optimizer.
//
// Each rank holds only its own chunks' variables (octet-split-optimizer's
// `pipeline_rank`, see keepPipelineRankVariables) and the replicated ones.
// The chunk functions reduce each pipeline rank's gradients over its data
// group (octet-reduce-gradients' buckets, cut per chunk by
// octet-split-stages), their collectives meeting in `exchange`. Then every
// rank runs its own @rank<p>_optimizer_step, whose gradient norm meets the
// other pipeline ranks' there too.

#include "compiler/Interpreter/Collectives.h"
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
// p of replica d; `microbatches[d]` are replica d's. Every interpreter is
// set to its rank of `exchange` (layout data × pipeline).
StatusOr<CpuPipelineStep> runCpuPipelineStep(
    mlir::ModuleOp module, const PipelineSchedule &schedule, int data,
    interp::RankExchange &exchange,
    std::vector<interp::Interpreter> &interpreters,
    std::vector<interp::VariableStore> &variables,
    const std::vector<std::vector<std::vector<interp::Tensor>>> &microbatches);

} // namespace octet

#endif
