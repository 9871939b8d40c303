#ifndef OCTET_RUNTIME_EXEC_RUNOPTIONS_H
#define OCTET_RUNTIME_EXEC_RUNOPTIONS_H

// octet-run's options (and octet-profile's), parsed apart from the GPU so
// that octet-run answers --help and rejects a bad command line before any
// GPU setup, and so that the parser is tested on any machine.
//
// Each option is declared once, in a table in RunOptions.cpp: its flag,
// what it takes, its help and the field it sets. The command line and the
// options file (JSON, `octet-run --options FILE`) are both read through
// that table and checked by the same rules. `octet train` hands its GPU
// runs to octet-run that way: it fills a RunArgs, writes it with
// writeRunOptionsFile, and octet-run reads it back into the same struct.
// This library links no protobuf, so octet (shared libprotobuf) and
// octet-run (static libprotobuf) both use it.

#include "runtime/exec/TrainerOptions.h"
#include "support/CommandLine.h"
#include "support/Status.h"

#include <string>
#include <vector>

namespace octet {

struct RunArgs {
  std::string bundle;
  // --plan: print the build and memory plan, run nothing.
  bool planOnly = false;
  // --all-slots: list every slot of the plan (else the largest).
  bool allSlots = false;
  bool recordAlgorithms = false;
  // --gemm-heuristic: cuBLASLt's first answer, untimed.
  bool gemmHeuristic = false;
  // --gemm-configs N: candidates in all where the heuristic gives fewer
  // than 8 (runtime/exec/Runtime.h GemmTuningOptions). Off by default: on
  // an H100 it found nothing faster for the blockwise bench models and
  // adds seconds to the load (bench/results/h100/blockwise-speed).
  int gemmConfigs = 0;
  // --gemm-cache FILE; empty: $OCTET_GEMM_CACHE, else BUNDLE.gemms.
  std::string gemmCache;
  // --bench: synthetic data, `warmup` extra steps left out of the timing,
  // and the throughput written to `json`.
  bool bench = false;
  int64_t warmup = 2;
  std::string json;
  // --timeline FILE: the last step's device timeline as a Chrome trace
  // (runtime/exec/StepTimeline.h); empty: none.
  std::string timeline;
  // --golden DIR: check against the reference interpreter's steps
  // (runtime/exec/GoldenCheck.h) instead of training.
  std::string golden;
  // --golden-save DIR: the GPU's snapshots, in the golden's format.
  std::string goldenSave;
  // Data: kind "synthetic" (default), "indexed" (--data PREFIX) or "text"
  // (--text FILE); the schedule's sizes and seed fill the rest.
  std::string dataKind = "synthetic";
  std::string dataPath, evalPath;
  // trainer.initWeights is --init-from.
  TrainerOptions trainer;
  // --gpus N: start N ranks of this command on this host (as `octet launch`
  // does) unless this process already is a rank of a job.
  int gpus = 0;
  // --nccl-buffers: "none" or "registered" (comm::BufferRegistration);
  // empty: registered for a data-parallel layout without pipeline stages.
  std::string ncclBuffers;
};

// The cuBLASLt algorithm cache octet-run reads and writes: --gemm-cache,
// else $OCTET_GEMM_CACHE, else the bundle's path with ".gemms" added.
std::string gemmCachePath(const RunArgs &args);

// Where rank `rank` of a job writes an output file octet-run was given as
// `path` (--json, --timeline): rank 0 `path` itself, rank R
// `path`.rankR.
std::string rankOutputPath(const std::string &path, int rank);

// Parses the arguments after the program name into `out`.
cli::Outcome parseRunArgs(const std::vector<std::string> &args, RunArgs &out);

// The rules between options (--resume needs --checkpoint-dir, ...), for
// the command line and the options file alike; the bundle is checked apart.
Status validateRunArgs(const RunArgs &args);

// Whether the files the options name are there (the bundle, --text FILE,
// --data PREFIX.bin/.idx, --eval-data, --init-from, --golden DIR), so that
// a typo is reported before the GPU is set up.
Status checkRunInputs(const RunArgs &args);

// The options file: a JSON object whose keys are the flags without their
// dashes ("steps", "checkpoint-dir", "bundle"), holding the options that
// differ from the defaults. Reading checks the keys, the types and the
// rules above; the error names the file and the key.
std::string runArgsToJson(const RunArgs &args);
StatusOr<RunArgs> runArgsFromJson(const std::string &text,
                                  const std::string &source);
Status writeRunOptionsFile(const RunArgs &args, const std::string &path);
StatusOr<RunArgs> readRunOptionsFile(const std::string &path);

// octet-profile's options.
struct ProfileArgs {
  std::string bundle;
  int top = 30;
  int repeat = 3;
};
cli::Outcome parseProfileArgs(const std::vector<std::string> &args,
                              ProfileArgs &out);

} // namespace octet

#endif
