// octet launch: runtime/comm's launcher behind the command line.

#include "runtime/comm/Launch.h"
#include "tools/octet/CommandErrors.h"
#include "tools/octet/Commands.h"

#include <chrono>
#include <cstdio>

namespace octet {

int runLaunchCommand(const LaunchCommandOptions &opts) {
  comm::LaunchOptions launch;
  launch.ranks = opts.gpus;
  launch.command = opts.command;
  launch.port = opts.port;
  launch.grace = std::chrono::seconds(opts.graceSeconds);
  std::fflush(stdout);
  StatusOr<comm::LaunchResult> result = comm::launchRanks(launch);
  if (!result)
    return reportInputError("launch", result.status().message());
  // The launcher has named the failing rank and its last line.
  return result->exitCode;
}

} // namespace octet
