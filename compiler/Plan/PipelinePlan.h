#ifndef OCTET_COMPILER_PLAN_PIPELINEPLAN_H
#define OCTET_COMPILER_PLAN_PIPELINEPLAN_H

// Each pipeline rank's arena, all that the rank allocates: the persistent
// slots of its own variables and of those every rank keeps (the step
// counter), one activation region for its chunk functions and its
// optimizer step, and its Stash slots (the edges, stashes and inputs of
// the (chunk, microbatch) pairs it holds at once). `octet compile` prints
// these plans and checks each against the GPU; the bundle writer writes
// them as each rank's PipelineRank.arena_bytes and slots.

#include "compiler/Plan/MemoryPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <utility>
#include <vector>

namespace octet::plan {

// What a pipeline rank runs and holds in flight.
struct PipelineRankFunctions {
  // Its chunk functions and its optimizer step.
  std::vector<std::string> functions;
  // The schedule's peak of (chunk, microbatch) stashes in flight (the
  // simulator's), and the stash entries the rank allocates (each pair from
  // its activation's receive to its last use: bundle/PipelineBundle.h
  // assignStashEntries).
  int peakStash = 0;
  int stashEntries = 0;
};

struct PipelineRankPlan {
  int rank = 0;
  int peakStash = 0;
  int stashEntries = 0;
  // One entry of every Stash slot of the rank, and all its entries.
  uint64_t stashEntryBytes = 0;
  uint64_t stashBytes = 0;
  // The rank's activation region and the function that reaches farthest
  // into it.
  uint64_t activationBytes = 0;
  std::string largestFunction;
  // Its variables (octet-split-optimizer's `pipeline_rank`), those of
  // every rank and the other persistent slots its functions use.
  uint64_t persistentBytes = 0;
  // The largest persistent slots of the rank (name, bytes), largest first.
  std::vector<std::pair<std::string, uint64_t>> largestSlots;
  // (slot, offset in the rank's arena), in slot order.
  std::vector<std::pair<uint32_t, uint64_t>> slotOffsets;
  uint64_t totalBytes() const {
    return persistentBytes + activationBytes + stashBytes;
  }
};

// `plan` holds the chunk functions' Stash slots (compiler/Emit/
// PipelineSlots.h: planStashSlots). A rank holds every slot its functions
// use (values, workspaces, the variables they load and store) and the
// variables whose `pipeline_rank` is its own or unset, placed by
// support/RankArena.h. Fails, naming the function, when one is missing.
mlir::FailureOr<std::vector<PipelineRankPlan>>
planPipelineRanks(mlir::ModuleOp module, const MemoryPlan &plan,
                  llvm::ArrayRef<PipelineRankFunctions> ranks);

void printPipelinePlans(const std::vector<PipelineRankPlan> &ranks,
                        llvm::raw_ostream &os);

} // namespace octet::plan

#endif
