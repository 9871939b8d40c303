#ifndef OCTET_RUNTIME_EXEC_RUNOPTIONS_H
#define OCTET_RUNTIME_EXEC_RUNOPTIONS_H

// octet-run's command line, parsed apart from the GPU so that its errors
// are tested on any machine.

#include "support/Status.h"
#include "runtime/exec/TrainData.h"
#include "runtime/exec/Trainer.h"

#include <string>
#include <vector>

namespace octet {

struct RunArgs {
  std::string bundle;
  bool help = false;
  bool planOnly = false;
  bool recordAlgorithms = false;
  // Slots the plan listing shows (0: all).
  int planSlots = 12;
  // --bench: synthetic data, `warmup` extra steps left out of the timing,
  // and the throughput written to `json`.
  bool bench = false;
  int64_t warmup = 2;
  std::string json;
  // --golden DIR: check against the reference interpreter's steps
  // (runtime/exec/GoldenCheck.h) instead of training.
  std::string golden;
  // --golden-save DIR: the GPU's snapshots, in the golden's format.
  std::string goldenSave;
  // Data: kind "synthetic" (default), "indexed" (--data) or "text"
  // (--text); the schedule's sizes and seed fill the rest.
  std::string dataKind = "synthetic";
  std::string dataPath, evalPath;
  TrainerOptions trainer;
};

// Parses the arguments after the program name. A usage error names the
// option and what it takes.
StatusOr<RunArgs> parseRunArgs(const std::vector<std::string> &args);
const char *runUsage();

} // namespace octet

#endif
