#ifndef OCTET_RUNTIME_COMM_RANKENV_H
#define OCTET_RUNTIME_COMM_RANKENV_H

// Where this process stands in the job, from the variables torchrun (and
// `octet launch`) set: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT. None of them set is one process on its own; WORLD_SIZE > 1
// needs all five. TORCHELASTIC_USE_AGENT_STORE and OCTET_STORE_PORT move
// rank 0's store off MASTER_PORT (RankEnv::storePort).

#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace octet::comm {

// A variable's value, or nullopt when it is not set (tests pass their own).
using EnvLookup =
    std::function<std::optional<std::string>(const std::string &name)>;

struct RankEnv {
  int rank = 0;
  int worldSize = 1;
  // The GPU of this host the rank uses (the caller opens the device).
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  // 0 only for one process: its store listens on a port the kernel picks.
  int masterPort = 0;
  // Where rank 0's store listens: MASTER_PORT, except under torchrun, whose
  // agent keeps its own store there (TORCHELASTIC_USE_AGENT_STORE=True):
  // then MASTER_PORT + 1. OCTET_STORE_PORT overrides both.
  int storePort = 0;
  // How storePort was chosen, for messages about it.
  std::string storePortSource = "MASTER_PORT";
  // False when no variable was set.
  bool fromEnvironment = false;
};

// Validates the variables `lookup` returns; a missing, malformed or
// out-of-range one is an error naming it and the fix.
StatusOr<RankEnv> parseRankEnv(const EnvLookup &lookup);
// The same, from this process's environment.
StatusOr<RankEnv> rankEnvFromProcess();

// A job must start as many ranks as the bundle was compiled for.
// `layout` says how that number comes about ("pipeline 2 × data 2"),
// for the message; empty for none.
Status checkWorldSize(const RankEnv &env, uint32_t bundleWorldSize,
                      const std::string &layout = "");

} // namespace octet::comm

#endif
