#ifndef OCTET_TOOLS_OCTET_COMMANDLINE_H
#define OCTET_TOOLS_OCTET_COMMANDLINE_H

// octet's command line: every command's options as a struct, declared on
// CLI11 (support/CommandLine.h) in CommandLine.cpp, apart from the code
// that runs the commands, so that the parser is tested without MLIR. One
// spelling per idea across octet's commands and octet-run:
//   --steps N          optimizer steps
//   --text FILE        a UTF-8 text file read as bytes
//   --data PREFIX      an indexed dataset (PREFIX.bin/.idx)
//   --init-from PATH   Hugging Face weights to start from
//   -o, --out PATH     what the command writes
//   --all-slots        every slot of the memory plan

#include "runtime/data/Preprocess.h"
#include "runtime/exec/RunOptions.h"
#include "support/CommandLine.h"
#include "tools/octet/MemoryFit.h"
#include "support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

// A stage of `octet compile` (--dump-ir names one), for the parser and
// the help text.
struct CompileStageInfo {
  std::string name;
  std::string summary;
};

struct CompileOptions {
  std::string spec, trainSpec, output, ptxDir;
  int64_t steps = 0; // 0: the spec's train.steps
  std::vector<std::string> dumps;
  bool fusionReport = false;
  bool precisionReport = false;
  bool memoryPlan = false;
  bool printPipeline = false;
  GpuTarget gpu = defaultGpuTarget(); // what --memory-plan checks the fit on
};

struct TrainOptions {
  std::string spec;
  int64_t steps = 0; // 0: the spec's train.steps
  // --text FILE ("text") or --data PREFIX ("indexed"); empty: the spec's
  // train.data.
  std::string dataKind, dataPath;
  std::string initFrom, saveHf; // Hugging Face checkpoint directories
  int64_t fp8StatsInterval = 0; // 0: no FP8 statistics
  bool cpu = false;             // the interpreter even with a GPU
  // GPU runs only: octet-run's checkpoint and TensorBoard options.
  std::string checkpointDir, tensorboardDir;
  bool resume = false;
};

struct GoldenOptions {
  std::string spec, dir;
  std::string text; // batches from this text file; empty: random tokens
  int64_t steps = 3;
};

struct ExportHfOptions {
  std::string model; // empty: the checkpoint's config.json
  std::string initFrom, out;
  std::string dtype = "source";
  uint64_t maxShardBytes = 5000000000ull;
};

struct InspectOptions {
  std::string bundle, modulesDir;
  bool allSlots = false;
  bool collectives = false; // only the NCCL calls, one line each
  GpuTarget gpu = defaultGpuTarget(); // what the plan's fit is checked on
};

struct LaunchCommandOptions {
  int gpus = 0;
  int port = 0;      // 0: a free port
  int graceSeconds = 30;
  std::vector<std::string> command; // what each rank runs
};

struct DataInspectOptions {
  std::string prefix, tokenizer;
  int64_t show = 1;
};

// The command named on the command line, with its options filled.
struct OctetCommandLine {
  // "compile", "train", "golden", "export-hf", "inspect", "launch",
  // "data preprocess" or "data inspect".
  std::string command;
  CompileOptions compile;
  TrainOptions train;
  GoldenOptions golden;
  ExportHfOptions exportHf;
  InspectOptions inspect;
  LaunchCommandOptions launch;
  data::PreprocessOptions preprocess;
  DataInspectOptions dataInspect;
};

// Parses the arguments after `octet`. `stages` are octet compile's, in
// order (--dump-ir checks its names against them; --help lists them).
cli::Outcome parseOctetCommandLine(const std::vector<std::string> &args,
                                   const std::vector<CompileStageInfo> &stages,
                                   OctetCommandLine &out);

// Whether the files `octet train` and `octet export-hf` read are there
// (--text, --data, --init-from), so that a typo is reported before
// anything compiles.
Status checkTrainInputs(const TrainOptions &opts);
Status checkExportHfInputs(const ExportHfOptions &opts);

// What `octet train` hands octet-run for a GPU run: the bundle it
// compiled, the data (--text/--data, else the spec's train.data:
// `specDataKind` and `specDataPath`) and the checkpoint, TensorBoard and
// --init-from options. An error when octet-run does not read that kind
// of data (the CPU trains it instead).
StatusOr<RunArgs> gpuRunArgs(const TrainOptions &opts,
                             const std::string &specDataKind,
                             const std::string &specDataPath,
                             const std::string &bundle);

} // namespace octet

#endif
