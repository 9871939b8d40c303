// octet: the command-line driver. Subcommands live in their own files and are
// listed in one table here.

#include "tools/octet/Commands.h"

#include <cstdio>
#include <cstring>

namespace {

struct Command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
};

const Command kCommands[] = {
    {"compile", "compile a model spec or HF config.json; dump IR by stage",
     octet::runCompileCommand},
    {"train", "train a spec on the CPU through the reference interpreter",
     octet::runTrainCommand},
    {"export-hf", "load a HF checkpoint into a model and write it back out",
     octet::runExportHfCommand},
    {"inspect", "print how a .octet bundle was built, its precision, memory "
                "plan and kernels",
     octet::runInspectCommand},
    {"golden", "the interpreter's first steps of a bundle, to check a GPU "
               "run against",
     octet::runGoldenCommand},
    {"data", "prepare and inspect training data", octet::runDataCommand},
};

void printHelp(std::FILE *out) {
  std::fprintf(out, "usage: octet <command> [options]\n\n"
                    "octet compiles decoder-transformer training for FP8 on "
                    "Hopper GPUs.\n\ncommands:\n");
  for (const Command &c : kCommands)
    std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`octet <command> --help` describes a command.\n");
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printHelp(stderr);
    return 2;
  }
  const char *name = argv[1];
  if (!std::strcmp(name, "--help") || !std::strcmp(name, "-h") ||
      !std::strcmp(name, "help")) {
    printHelp(stdout);
    return 0;
  }
  for (const Command &c : kCommands)
    if (!std::strcmp(name, c.name))
      return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "octet: unknown command '%s'; known commands:", name);
  for (const Command &c : kCommands)
    std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, " (see octet --help)\n");
  return 2;
}
