#ifndef OCTET_TOOLS_OCTET_COMMANDERRORS_H
#define OCTET_TOOLS_OCTET_COMMANDERRORS_H

// How every octet subcommand reports failure, so exit codes and wording stay
// the same across commands: 2 for a command-line mistake, 1 for bad input.

#include <cstdio>
#include <string>

namespace octet {

// A command-line mistake: says where the help is. `command` is e.g. "train".
inline int reportUsageError(const char *command, const std::string &message) {
  std::fprintf(stderr, "octet %s: %s (see octet %s --help)\n", command,
               message.c_str(), command);
  return 2;
}

// Input that cannot be used (a file, a spec, a checkpoint).
inline int reportInputError(const char *command, const std::string &message) {
  std::fprintf(stderr, "octet %s: error: %s\n", command, message.c_str());
  return 1;
}

// The one positional argument every subcommand takes: the first becomes
// `spec`, a second is a usage error. Returns -1 when taken, else the exit code.
inline int takeSpecArgument(const char *command, const std::string &arg,
                            std::string &spec) {
  if (spec.empty()) {
    spec = arg;
    return -1;
  }
  return reportUsageError(command, "one SPEC only; got '" + spec + "' and '" +
                                       arg + "'");
}

} // namespace octet

#endif
