#ifndef OCTET_RUNTIME_EXEC_TRAINEROPTIONS_H
#define OCTET_RUNTIME_EXEC_TRAINEROPTIONS_H

// What a run asks of the host training loop (runtime/exec/Trainer.h), in a
// header of its own: octet-run's options (RunOptions.h), which `octet
// train` also fills, include it without the bundle's protobuf.

#include "support/Status.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace octet {

// The data-parallel ranks a trainer is one of. Every rank reads the same
// global batches and stages only its share (rank r of n takes microbatches
// r·M .. r·M+M-1 of the n·M in a step), so the data position is the job's,
// and a checkpoint resumes at another number of ranks at the same global
// batch. The ranks' parameters and state are replicated but for a sharded
// state (ZeRO-1's moments), whose parts the ranks join for a checkpoint:
// rank 0 alone prints and writes checkpoints.
class DataParallelGroup {
public:
  virtual ~DataParallelGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Replaces each value by its sum over the ranks (every rank passes as
  // many, in the same order) and returns once every rank has.
  virtual Status sum(std::vector<double> &values) = 0;
  // `all` becomes every rank's `mine` side by side, in rank order (every
  // rank passes as many bytes); returns once every rank has. For
  // checkpoints of a state the ranks share out (ZeRO-1's moments).
  virtual Status gather(const std::vector<uint8_t> &mine,
                        std::vector<uint8_t> &all) = 0;
  // The job's liveness: called after every step and during long phases.
  virtual void heartbeat(int64_t step) = 0;
};

struct TrainerOptions {
  // -1: the bundle's schedule.
  int64_t steps = -1;
  int64_t logInterval = -1;
  int64_t evalInterval = -1;
  int64_t checkpointInterval = -1;
  // Held-out batches per evaluation (0: all of a bounded split, capped at
  // 16).
  int64_t evalBatches = 0;
  bool graph = true;
  std::string checkpointDir;
  bool resume = false;
  int keepCheckpoints = 2;
  // A safetensors file (or HF model directory) with the parameters, by HF
  // name or octet name; written before INIT runs.
  std::string initWeights;
  // After the last step: the parameters as a HF model (safetensors under
  // HF names and config.json) in this directory; empty for none.
  std::string saveHf;
  std::string tensorboardDir;
  // A pipeline bundle: time every instruction of each step after the
  // second, and print the measured bubble beside the one the schedule
  // predicts from those times (runtime/exec/PipelineTimeline.h). The
  // backend must time its steps (RuntimeOptions.pipelineTimeline).
  bool pipelineTimeline = false;
  // Record the last step's device timeline (TrainBackend::beginTimeline),
  // running it eagerly; not for a pipeline bundle.
  bool stepTimeline = false;
  // Where the step lines go; null for none.
  std::FILE *out = stdout;
  // Null: this process trains alone.
  std::shared_ptr<DataParallelGroup> dataParallel;
  // A pipeline bundle's rank: its pipeline group (the same interface, over
  // the ranks of one data replica, in stage order), through which the
  // loss reaches rank 0 and checkpoints join the stages' own variables.
  std::shared_ptr<DataParallelGroup> pipeline;
  // Tests inject checkpoint write failures through this.
  std::function<Status(const std::string &path)> checkpointAfterFile;
};

} // namespace octet

#endif
