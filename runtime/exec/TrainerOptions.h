#ifndef OCTET_RUNTIME_EXEC_TRAINEROPTIONS_H
#define OCTET_RUNTIME_EXEC_TRAINEROPTIONS_H

// What a run asks of the host training loop (runtime/exec/Trainer.h), in a
// header of its own: octet-run's options (RunOptions.h), which `octet
// train` also fills, include it without the bundle's protobuf.

#include "support/Status.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace octet {

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
  std::string tensorboardDir;
  // Where the step lines go; null for none.
  std::FILE *out = stdout;
  // Tests inject checkpoint write failures through this.
  std::function<Status(const std::string &path)> checkpointAfterFile;
};

} // namespace octet

#endif
