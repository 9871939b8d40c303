#ifndef OCTET_RUNTIME_EXEC_PIPELINEEXECUTOR_H
#define OCTET_RUNTIME_EXEC_PIPELINEEXECUTOR_H

// A pipeline rank's step: its instruction list (bundle.proto:
// PipelineRank) issued in order on two streams, compute (the CHUNK_*
// programs) and pipeline communication (each PIPE_COMMUNICATE one NCCL
// group of sends and receives). Nothing is decided while the step runs:
// before the first step, planPipelineRank works out for every instruction
// the stash entry it uses (bundle/PipelineBundle.h), whether it is its
// chunk's first or last run of that program in the step, and the one
// instruction of the other stream it waits for. The streams run in order,
// so waiting for the latest instruction of the other stream that touched
// one of its entries orders it after all of them: a forward after the
// receive of its input, a send after the program that wrote it, and an
// entry's next pair after everything its previous pair did with it. The
// host never waits inside a step.
//
// The device (PipelineDevice) is the GPU runtime, or, in the tests, ranks
// in host memory whose transfers meet in queues.

#include "bundle/bundle.pb.h"
#include "support/Status.h"

#include <memory>
#include <vector>

namespace octet {

struct PipeWork {
  size_t index = 0;
  const bundle::PipeInstruction *instruction = nullptr;
  // Compute: the program run and the stash entry its stash-strided slots
  // take.
  const bundle::Program *program = nullptr;
  int entry = -1;
  // The chunk's first and last run of this program in the step: the
  // first's GEMMs marked first_microbatch_overwrites write their
  // accumulators, the last runs the collectives marked last_microbatch
  // (the data-parallel gradient reduction).
  bool firstMicrobatch = false, lastMicrobatch = false;
  // Communicate: each transfer's stash entry.
  std::vector<int> transferEntries;
  // The instruction of the other stream this one waits for; -1: none.
  int waitFor = -1;
  bool communicate() const {
    return instruction->kind() == bundle::PIPE_COMMUNICATE;
  }
};

struct PipelineRankPlan {
  int worldRank = 0;
  // This rank's index in its pipeline.
  int pipelineRank = 0;
  std::vector<PipeWork> work;
  int stashEntries = 0;
  // The loss accumulator, on the last stage's rank only.
  int lossSumSlot = -1;
  // The instructions `work` points at when they are not the bundle's own
  // (evaluation's, derived from them); shared, so a copy points at them
  // too.
  std::shared_ptr<const std::vector<bundle::PipeInstruction>> ownedInstructions;
};

// The plan of `worldRank` in a pipeline bundle (which validate() has
// passed). The bundle must outlive it.
StatusOr<PipelineRankPlan> planPipelineRank(const bundle::Bundle &bundle,
                                            int worldRank);

// The plan of the same rank for evaluation: its forward-only list
// (bundle::forwardOnlyInstructions), the stash entries assigned over that
// list alone (never more than training's: an error otherwise), the
// pipeline's forward-only schedule simulated first. A chunk forward that
// addresses training state it may update (gradients, moments, FP8 scale
// state) or writes a parameter or weight cache is an error naming the
// program, the step and the slot: evaluation must not change the run.
StatusOr<PipelineRankPlan> planPipelineEvaluation(const bundle::Bundle &bundle,
                                                  int worldRank);

class PipelineDevice {
public:
  virtual ~PipelineDevice() = default;
  // Before a step's first instruction: the loss accumulator cleared.
  virtual Status beginStep(const PipelineRankPlan &plan) = 0;
  // Enqueue the work on its stream, after `work.waitFor` (an instruction
  // of the other stream enqueued earlier).
  virtual Status compute(const PipeWork &work) = 0;
  virtual Status communicate(const PipeWork &work) = 0;
  // After the last: the compute stream waits for the communication
  // stream, so what follows (the optimizer step) sees every transfer
  // done.
  virtual Status endStep(const PipelineRankPlan &plan) = 0;
};

// When an instruction of a step began (after its wait) and ended, in ms
// from the step's start, on the device's clock.
struct PipeOpTiming {
  float beginMs = 0;
  float endMs = 0;
};

// One step's instructions, in order.
Status runPipelineStep(const PipelineRankPlan &plan, PipelineDevice &device);

} // namespace octet

#endif
