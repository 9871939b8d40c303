#ifndef OCTET_RUNTIME_COMM_LAUNCH_H
#define OCTET_RUNTIME_COMM_LAUNCH_H

// `octet launch --gpus N -- COMMAND...`: N processes of COMMAND on this
// host, each with the variables torchrun would give it (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT) and
// NCCL_NVLS_ENABLE=0 (NVLink multicast stays off, whatever the caller's
// environment says). Every line a rank prints comes out prefixed
// "[rank R] " on the launcher's stdout or stderr, as the rank wrote it. The
// first rank to fail decides the launcher's exit status and message (a
// rank its watchdog ended is a consequence, not the cause); the others get
// a grace period to end on their own (their watchdogs name the lost rank),
// then SIGTERM, then SIGKILL.

#include "support/Status.h"

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace octet::comm {

struct LaunchOptions {
  int ranks = 0;
  // argv of each rank; a name without '/' is looked up on PATH.
  std::vector<std::string> command;
  std::string masterAddr = "127.0.0.1";
  // 0: a free port of masterAddr.
  int port = 0;
  // After the first failure: how long the others may take to end on their
  // own, then how long after SIGTERM before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(30)};
  std::chrono::milliseconds killAfter{std::chrono::seconds(5)};
  // Variables for every rank on top of the launcher's own environment (the
  // rank variables and NCCL_NVLS_ENABLE=0 are set after these).
  std::vector<std::pair<std::string, std::string>> env;
  // Receives each output line (without newline), prefixed, and the
  // launcher's own messages; default: written to stdout / stderr.
  std::function<void(bool toStderr, const std::string &line)> output;
};

struct LaunchResult {
  // What the launcher exits with: 0, the first failing rank's exit status,
  // or 128 + the signal that ended it (or the launcher).
  int exitCode = 0;
  // The first rank that failed; -1 when none did.
  int failedRank = -1;
  // "rank 1 exited with status 3: <its last line>".
  std::string failure;
};

// Runs the ranks to the end. Errors are about the launch itself (no such
// command, a port in use); the ranks' own failures are in the result. One
// launch at a time per process (it handles SIGCHLD, SIGINT and SIGTERM
// while it runs and restores the previous handlers). Call it from the main
// thread: the ranks are killed when the thread that started them ends.
StatusOr<LaunchResult> launchRanks(const LaunchOptions &options);

} // namespace octet::comm

#endif
