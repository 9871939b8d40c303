#ifndef OCTET_TOOLS_OCTET_COMMANDERRORS_H
#define OCTET_TOOLS_OCTET_COMMANDERRORS_H

// How every octet command reports failure, so exit codes and wording stay
// the same across commands: 2 for a command-line mistake, 1 for bad input.

#include "support/CommandLine.h"

#include <cstdio>
#include <string>

namespace octet {

// A command-line mistake found while running: the same one line as the
// parser's. `command` is e.g. "train".
inline int reportUsageError(const char *command, const std::string &message) {
  return cli::Outcome::usageError(std::string("octet ") + command, message)
      .finish();
}

// Input that cannot be used (a file, a spec, a checkpoint).
inline int reportInputError(const char *command, const std::string &message) {
  std::fprintf(stderr, "octet %s: error: %s\n", command, message.c_str());
  return 1;
}

} // namespace octet

#endif
