#ifndef OCTET_TOOLS_OCTET_COMMANDS_H
#define OCTET_TOOLS_OCTET_COMMANDS_H

// The subcommands of `octet`. Each takes the arguments after its name
// (argv[0] is the subcommand's name) and returns the process exit code:
// 0 on success, 1 on an error in the user's input, 2 on bad usage. main.cpp
// lists them in its dispatch table.

namespace octet {

int runCompileCommand(int argc, char **argv);

// tools/octet/DataCommand.cpp: prepare and inspect training data.
int runDataCommand(int argc, char **argv);

// tools/octet/TrainCommand.cpp: train a spec on the CPU through the reference
// interpreter.
int runTrainCommand(int argc, char **argv);

// tools/octet/HfCommand.cpp: a Hugging Face checkpoint through octet's
// parameters and back out.
int runExportHfCommand(int argc, char **argv);

// tools/octet/InspectCommand.cpp: what a .octet bundle holds.
int runInspectCommand(int argc, char **argv);

// tools/octet/GoldenCommand.cpp: the reference interpreter's first steps of
// a compiled bundle, for octet-run --golden.
int runGoldenCommand(int argc, char **argv);

} // namespace octet

#endif
