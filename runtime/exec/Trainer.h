#ifndef OCTET_RUNTIME_EXEC_TRAINER_H
#define OCTET_RUNTIME_EXEC_TRAINER_H

// The host training loop over a bundle's programs:
//   start: parameters and state from their Init (parameters from
//     --init-from when given), then INIT; or the latest checkpoint
//     (--resume);
//   each step: for every microbatch, write its batch into the
//     TRAIN_MICROBATCH inputs (tokens, labels, loss_mask, positions,
//     cu_seqlens: whichever the program takes) and run it; then
//     OPTIMIZER_STEP; read loss, grad norm and lr; print the step line and
//     write TensorBoard scalars. The first step runs eagerly, later ones
//     replay captured CUDA graphs;
//   every eval_interval steps: EVAL over held-out batches;
//   every checkpoint_interval steps and at the end: a checkpoint.
// One of several data-parallel ranks (TrainerOptions::dataParallel), it
// stages its share of each global batch, prints the global loss and
// tokens/s (rank 0 alone prints), evaluates its share of the held-out
// batches, and leaves checkpoints to rank 0.
// A rank of a pipeline bundle (TrainerOptions::pipeline) runs its
// instruction list instead of TRAIN_MICROBATCH, each compute instruction
// fed its microbatch's inputs in its stash entry (PipelineTraining.h); the
// loss is the last stage's, summed over the data and pipeline groups;
// checkpoints join the stages' own variables on rank 0.
//
// Evaluation cannot raise peak memory: the EVAL program's slots are part of
// the memory plan's arenas, which the runtime allocates once at load (the
// compiler places eval activations in the region the train step's use); the
// code of every kernel is loaded at load too (Runtime: cuFuncLoad, not lazy
// loading at first launch); EVAL runs eagerly (no graph to instantiate) and
// its batches come through pinned host staging. The trainer measures device
// use around every evaluation and reports both (GPU test:
// ResumeIsBitExactAndEvalKeepsMemory).

#include "runtime/checkpoint/TrainState.h"
#include "runtime/exec/TrainBackend.h"
#include "runtime/exec/TrainData.h"
#include "runtime/exec/TrainerOptions.h"
#include "runtime/metrics/EventFile.h"
#include "runtime/metrics/StepMetrics.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace octet {

struct StepRecord {
  int64_t step = 0;
  float loss = 0, gradNorm = 0, lr = 0;
  double seconds = 0;
  uint64_t deviceBytesUsed = 0;
};

struct EvalRecord {
  int64_t step = 0;
  double loss = 0;
  int64_t batches = 0;
  // Device memory in use just before and just after the evaluation.
  uint64_t bytesBefore = 0, bytesAfter = 0;
};

struct TrainResult {
  // The step the run started after (0, or the resumed checkpoint's).
  int64_t startStep = 0;
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  std::vector<std::string> checkpoints;
  uint64_t peakDeviceBytes = 0;
};

class Trainer {
public:
  // Checks that the bundle's programs take inputs and give outputs the loop
  // knows, with the sizes the schedule says; the error names the program,
  // the slot and what was expected.
  static StatusOr<std::unique_ptr<Trainer>>
  create(TrainBackend &backend, TrainData &data, const TrainerOptions &options);
  ~Trainer();

  // Starts (INIT, weights, or resume), trains, evaluates and checkpoints as
  // the options and the schedule say.
  StatusOr<TrainResult> run();

  // Pieces of run(), for tests and tools.
  Status start(TrainResult &result);
  Status evaluate(int64_t step, TrainResult &result);
  // The checkpoint's directory; empty on a data-parallel rank other than
  // 0, which writes none.
  StatusOr<std::string> saveCheckpoint(int64_t step);
  Status loadCheckpoint(const std::string &stepDir, int64_t &step);
  // For a tool that runs the programs itself (octet-profile), after
  // start(): writes the inputs of one run of `kind` as step `step`
  // (1-based) gives them, and waits for the copies. TRAIN_MICROBATCH takes
  // the data's next batch (tokens, labels, loss_mask, positions,
  // cu_seqlens: whichever it reads), OPTIMIZER_STEP the step's learning
  // rate and number. A program's input slots are its own only while it
  // runs (later activations reuse their bytes), so every run needs them
  // written again.
  Status writeInputs(bundle::ProgramKind kind, int64_t step);

private:
  struct Impl;
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The learning rate of `step` (1-based) under the bundle's schedule, ending
// at `totalSteps`: support/LrSchedule, as graph.lr_schedule computes it. Used
// only when the OPTIMIZER_STEP program takes the rate as an input or does
// not report it.
double scheduledLearningRate(const bundle::Schedule &schedule, int64_t step,
                             int64_t totalSteps);

} // namespace octet

#endif
