#ifndef OCTET_RUNTIME_EXEC_GOLDENCHECK_H
#define OCTET_RUNTIME_EXEC_GOLDENCHECK_H

// octet-run --golden DIR: runs a bundle's first steps on a TrainBackend from
// the golden's initial values and batches (runtime/exec/Golden.h) and
// compares what it computes with the reference interpreter's: the loss and
// grad norm of every step, and after step 1 every persistent slot (the
// gradients before the optimizer, parameters, optimizer and FP8 state and
// weight caches after it), within golden::tolerancesFor's bounds.

#include "runtime/exec/TrainBackend.h"

#include <cstdio>
#include <string>

namespace octet {

struct GoldenCheckOptions {
  std::string dir;
  // Replay captured CUDA graphs after the first step, as training does.
  bool graph = true;
  // The worst slots printed per snapshot.
  int worst = 12;
  // When set, the GPU's snapshots are written there in the golden's format
  // (<name>.tsv, <name>.safetensors), to compare offline.
  std::string saveDir;
  std::FILE *out = stdout;
};

// True when everything is within tolerance; false (having printed the
// mismatches, worst first, by slot name) when not; an error when the golden
// cannot be read or does not belong to the bundle.
StatusOr<bool> runGoldenCheck(TrainBackend &backend,
                              const GoldenCheckOptions &options);

} // namespace octet

#endif
