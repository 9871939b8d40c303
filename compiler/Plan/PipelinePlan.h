#ifndef OCTET_COMPILER_PLAN_PIPELINEPLAN_H
#define OCTET_COMPILER_PLAN_PIPELINEPLAN_H

// Each pipeline rank's memory: the stash of the microbatches it holds in
// flight, which the one-step plan (MemoryPlan.h) does not see, on top of
// the activation region of its chunk functions and the persistent region.

#include "compiler/Plan/MemoryPlan.h"
#include "support/PipelineSchedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace octet::plan {

struct PipelineRankPlan {
  int rank = 0;
  // The most (chunk, microbatch) stashes the schedule holds at once.
  int peakStash = 0;
  // The largest stash of one of the rank's chunks for one microbatch, and
  // the bound peakStash × that.
  uint64_t stashBytesPerMicrobatch = 0;
  uint64_t stashBytes = 0;
  // The largest activation region of the rank's chunk functions.
  uint64_t activationBytes = 0;
  std::string largestFunction;
  // The rank's own variables (octet-split-optimizer's `pipeline_rank`),
  // the replicated ones and the other persistent slots.
  uint64_t persistentBytes = 0;
  // The largest persistent slots of the rank (name, bytes), largest first.
  std::vector<std::pair<std::string, uint64_t>> largestSlots;
  uint64_t totalBytes() const {
    return persistentBytes + activationBytes + stashBytes;
  }
};

// Fails, naming the function, when the module is not cut into the
// schedule's chunks (octet-split-stages).
mlir::FailureOr<std::vector<PipelineRankPlan>>
planPipelineRanks(mlir::ModuleOp module, const MemoryPlan &plan,
                  const PipelineSchedule &schedule,
                  const PipeSimulation &simulation);

void printPipelinePlans(const std::vector<PipelineRankPlan> &ranks,
                        llvm::raw_ostream &os);

} // namespace octet::plan

#endif
