// octet: the command-line driver. The command line is declared in
// tools/octet/CommandLine.cpp; each command runs in its own file.

#include "compiler/Interpreter/Kernels.h"
#include "tools/octet/Commands.h"

#include <cstdio>

#include <string>
#include <vector>

int main(int argc, char **argv) {
  octet::OctetCommandLine commandLine;
  octet::cli::Outcome parsed = octet::parseOctetCommandLine(
      std::vector<std::string>(argv + 1, argv + argc), octet::compileStageList(),
      commandLine);
  if (!parsed.shouldRun())
    return parsed.finish();
  // Checked before any command runs, so that a bad value is not noticed
  // only when (or if) the interpreter starts its threads.
  if (octet::StatusOr<int> threads = octet::interp::threadsFromEnvironment();
      !threads) {
    std::fprintf(stderr, "octet: error: %s\n",
                 threads.status().message().c_str());
    return 2;
  }
  const std::string &command = commandLine.command;
  if (command == "compile")
    return octet::runCompileCommand(commandLine.compile);
  if (command == "train")
    return octet::runTrainCommand(commandLine.train);
  if (command == "export-hf")
    return octet::runExportHfCommand(commandLine.exportHf);
  if (command == "inspect")
    return octet::runInspectCommand(commandLine.inspect);
  if (command == "launch")
    return octet::runLaunchCommand(commandLine.launch);
  if (command == "golden")
    return octet::runGoldenCommand(commandLine.golden);
  if (command == "data preprocess")
    return octet::runDataPreprocessCommand(commandLine.preprocess);
  return octet::runDataInspectCommand(commandLine.dataInspect);
}
