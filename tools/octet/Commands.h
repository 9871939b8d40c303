#ifndef OCTET_TOOLS_OCTET_COMMANDS_H
#define OCTET_TOOLS_OCTET_COMMANDS_H

// The commands of `octet`. main.cpp parses the command line
// (tools/octet/CommandLine.h) and runs the one named with its options; each
// returns the process exit code: 0 on success, 1 on an error in the user's
// input, 2 on bad usage.

#include "tools/octet/CommandLine.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace octet {

// tools/octet/CompileCommand.cpp: spec -> IR, stage by stage.
int runCompileCommand(const CompileOptions &opts);
// Its stages, in order, for --dump-ir and the help text.
std::vector<CompileStageInfo> compileStageList();

// tools/octet/DataCommand.cpp: preparing training data.
int runDataPreprocessCommand(const data::PreprocessOptions &opts);
int runDataInspectCommand(const DataInspectOptions &opts);

// tools/octet/TrainCommand.cpp: train a spec on the GPU through octet-run,
// or on the CPU through the reference interpreter.
int runTrainCommand(const TrainOptions &opts);

// tools/octet/HfCommand.cpp: a Hugging Face checkpoint through octet's
// parameters and back out.
int runExportHfCommand(const ExportHfOptions &opts);

// tools/octet/InspectCommand.cpp: what a .octet bundle holds.
int runInspectCommand(const InspectOptions &opts);
// The fit verdict of the bundle at `path` on `gpu`, one line after
// `prefix`, as `octet compile -o` prints it; an unreadable bundle is an
// error.
Status printBundleFit(const std::string &path, const GpuTarget &gpu,
                      const std::string &prefix, std::ostream &os);

// tools/octet/LaunchCommand.cpp: a command as N ranks on this host.
int runLaunchCommand(const LaunchCommandOptions &opts);

// tools/octet/GoldenCommand.cpp: the reference interpreter's first steps of
// a compiled bundle, for octet-run --golden.
int runGoldenCommand(const GoldenOptions &opts);

} // namespace octet

#endif
