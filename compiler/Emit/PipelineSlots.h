#ifndef OCTET_COMPILER_EMIT_PIPELINESLOTS_H
#define OCTET_COMPILER_EMIT_PIPELINESLOTS_H

// A pipeline's chunk functions (octet-split-stages) as the bundle's ranks
// run them. Whatever crosses a function lives while other programs run, so
// it is no activation of one program: the microbatch's inputs (tokens,
// labels, ...), the activation edge a forward sends and the one it
// receives, its stash (the forward's values its backward reads) and the
// gradient edges are planned as Stash slots, one entry per (chunk,
// microbatch) the rank holds at once (bundle/PipelineBundle.h:
// assignStashEntries). A chunk's forward and backward read the same
// inputs and stash memory: the backward's arguments are moved onto the
// forward's slots. Under ZB-H1 the backward is an input gradient (B) and a
// weight gradient (W): W's arguments are B's, moved onto the same slots,
// and the weight stash B returns for it, Stash slots of their own.

#include "compiler/Plan/MemoryPlan.h"
#include "compiler/Plan/PipelinePlan.h"
#include "support/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace octet::emit {

// One global stage chunk's functions and the values that cross them.
struct StageFunctions {
  int64_t stage = 0;
  // Handles: emitting diagnostics on them is no change to the struct.
  mutable mlir::func::FuncOp forward, backward;
  // Under ZB-H1 `backward` is the input gradient (B) and this its weight
  // gradient (W, octet-split-weight-gradients); null otherwise.
  mutable mlir::func::FuncOp weightGradient;
  // Evaluation's forward where `forward` writes state
  // (octet-stage-eval-functions); null otherwise. Its arguments and edge
  // results are the forward's, moved onto the forward's slots.
  mutable mlir::func::FuncOp eval;
  // The leading arguments of both that the host writes for the
  // microbatch, named (graph.name) as @train_microbatch names them.
  unsigned inputs = 0;
  // The forward's results: the loss first on the last stage, then the
  // activation edge it sends, then the stash.
  bool loss = false;
  llvm::SmallVector<mlir::Value> sendActivation, receiveActivation,
      sendGradient, receiveGradient;
  // What B returns after the gradient edge for its W: the weight stash.
  llvm::SmallVector<mlir::Value> weightStash;
};

// The chunk functions of `stages` global chunks, in chunk order; an error
// names the function that is missing or not shaped as
// octet-split-stages makes it.
mlir::FailureOr<std::vector<StageFunctions>>
findStageFunctions(mlir::ModuleOp module, int64_t stages);

// The variable the last stage's forward adds each microbatch's loss into
// (f32; bundle Pipeline.loss_sum_slot), which the runtime clears before a
// step.
inline constexpr const char kPipelineLossSum[] = "pipeline.loss_sum";
// Before codegen, so that the addition is a kernel; the variable is
// `lastRank`'s (pipeline_rank). The last stage's evaluation forward, where
// it has one, adds into it too: evaluation's losses are summed there.
mlir::LogicalResult addPipelineLossSum(mlir::ModuleOp module,
                                       const StageFunctions &last,
                                       int64_t lastRank);

// Rewrites `plan` (planned after codegen): each value above gets a Stash
// slot of `entriesPerRank[stage % pipelineRanks]` entries, placed after the
// activation region, the backward's input and stash arguments the
// forward's slots; the argument slots left unused are dropped. Fails,
// naming the function, on a crossing value that is a variable's memory or
// an edge that is part of a larger buffer.
mlir::LogicalResult planStashSlots(llvm::ArrayRef<StageFunctions> stages,
                                   int pipelineRanks,
                                   llvm::ArrayRef<int> entriesPerRank,
                                   plan::MemoryPlan &plan);

// Each pipeline rank's arena over `plan` (the one-step plan of a module
// cut into the schedule's chunks): the chunk functions' crossing values
// become Stash slots of each rank's assignStashEntries count
// (planStashSlots, which rewrites `plan`), then every rank's slots are
// placed in its own arena (compiler/Plan/PipelinePlan.h). What `octet
// compile` prints and what the bundle writer gives each rank.
mlir::FailureOr<std::vector<plan::PipelineRankPlan>>
planPipelineArenas(mlir::ModuleOp module, const PipelineSchedule &schedule,
                   plan::MemoryPlan &plan);

} // namespace octet::emit

#endif
