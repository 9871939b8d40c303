#include "runtime/comm/RankEnv.h"

#include <cstdlib>

namespace octet::comm {

namespace {

const char *kHowToSet =
    "torchrun and `octet launch --gpus N` set RANK, WORLD_SIZE, LOCAL_RANK, "
    "MASTER_ADDR and MASTER_PORT for every rank; set all five when starting "
    "ranks by hand, or none for one GPU";

// Decimal digits only: "1e3", "-1", " 2" and "" are all refused.
std::optional<long> parseCount(const std::string &text) {
  if (text.empty() || text.size() > 9)
    return std::nullopt;
  long value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

Status notANumber(const std::string &name, const std::string &value,
                  const std::string &expected) {
  return Status::error(name + "='" + value + "' is not " + expected + "; " +
                       kHowToSet);
}

} // namespace

StatusOr<RankEnv> parseRankEnv(const EnvLookup &lookup) {
  RankEnv env;
  auto rank = lookup("RANK");
  auto world = lookup("WORLD_SIZE");
  auto local = lookup("LOCAL_RANK");
  auto addr = lookup("MASTER_ADDR");
  auto port = lookup("MASTER_PORT");
  if (!rank && !world) {
    if (addr || port)
      return Status::error(std::string(addr ? "MASTER_ADDR" : "MASTER_PORT") +
                           " is set but WORLD_SIZE and RANK are not; " +
                           kHowToSet);
    // LOCAL_RANK alone still picks the GPU (runtime/core/Device).
    return env;
  }
  env.fromEnvironment = true;
  if (!world)
    return Status::error(std::string("RANK is set but WORLD_SIZE is not; ") +
                         kHowToSet);
  auto worldValue = parseCount(*world);
  if (!worldValue || *worldValue < 1)
    return notANumber("WORLD_SIZE", *world, "a number of ranks (1 or more)");
  env.worldSize = int(*worldValue);
  if (!rank) {
    if (env.worldSize > 1)
      return Status::error("WORLD_SIZE=" + *world + " but RANK is not set; " +
                           kHowToSet);
  } else {
    auto rankValue = parseCount(*rank);
    if (!rankValue)
      return notANumber("RANK", *rank, "a rank (0 or more)");
    if (*rankValue >= env.worldSize)
      return Status::error(
          "RANK=" + *rank + " is outside WORLD_SIZE=" + *world +
          " (ranks are 0.." + std::to_string(env.worldSize - 1) + "); " +
          kHowToSet);
    env.rank = int(*rankValue);
  }
  bool single = env.worldSize == 1;
  if (local) {
    auto localValue = parseCount(*local);
    if (!localValue)
      return notANumber("LOCAL_RANK", *local, "a GPU index (0 or more)");
    if (*localValue >= env.worldSize)
      return Status::error("LOCAL_RANK=" + *local +
                           " is not below WORLD_SIZE=" + *world + "; " +
                           kHowToSet);
    env.localRank = int(*localValue);
  } else if (!single) {
    return Status::error("WORLD_SIZE=" + *world +
                         " but LOCAL_RANK is not set (it picks this rank's "
                         "GPU); " +
                         kHowToSet);
  }
  if (addr) {
    if (addr->empty())
      return Status::error(std::string("MASTER_ADDR is empty; it names the "
                                       "host of rank 0; ") +
                           kHowToSet);
    env.masterAddr = *addr;
  } else if (!single) {
    return Status::error("WORLD_SIZE=" + *world +
                         " but MASTER_ADDR is not set (the host of rank 0); " +
                         kHowToSet);
  }
  if (port) {
    auto portValue = parseCount(*port);
    if (!portValue || *portValue < 1 || *portValue > 65535)
      return notANumber("MASTER_PORT", *port, "a TCP port (1..65535)");
    env.masterPort = int(*portValue);
  } else if (!single) {
    return Status::error("WORLD_SIZE=" + *world +
                         " but MASTER_PORT is not set (rank 0's store port); " +
                         kHowToSet);
  }
  env.storePort = env.masterPort;
  // torchrun's agent serves its own TCP store on MASTER_PORT and tells its
  // workers so; octet's store, which speaks another protocol, takes the
  // next port, which every rank can work out alone.
  auto agentStore = lookup("TORCHELASTIC_USE_AGENT_STORE");
  if (agentStore && (*agentStore == "True" || *agentStore == "true" ||
                     *agentStore == "1") &&
      env.masterPort != 0) {
    if (env.masterPort == 65535)
      return Status::error(
          "MASTER_PORT=65535 is torchrun's agent store, and octet's store "
          "wants the next port, which does not exist; set OCTET_STORE_PORT "
          "to a free port (the same on every rank) or use a lower "
          "--master-port");
    env.storePort = env.masterPort + 1;
    env.storePortSource =
        "MASTER_PORT + 1 (torchrun's agent store holds MASTER_PORT; "
        "OCTET_STORE_PORT picks another, the same on every rank)";
  }
  if (auto override = lookup("OCTET_STORE_PORT")) {
    auto value = parseCount(*override);
    if (!value || *value < 1 || *value > 65535)
      return Status::error("OCTET_STORE_PORT='" + *override +
                           "' is not a TCP port (1..65535); it is where rank "
                           "0's store listens, the same on every rank");
    env.storePort = int(*value);
    env.storePortSource = "OCTET_STORE_PORT";
  }
  return env;
}

StatusOr<RankEnv> rankEnvFromProcess() {
  return parseRankEnv(
      [](const std::string &name) -> std::optional<std::string> {
        const char *value = std::getenv(name.c_str());
        if (!value)
          return std::nullopt;
        return std::string(value);
      });
}

Status checkWorldSize(const RankEnv &env, uint32_t bundleWorldSize,
                      const std::string &layout) {
  if (uint32_t(env.worldSize) == bundleWorldSize)
    return Status::ok();
  return Status::error(
      "WORLD_SIZE=" + std::to_string(env.worldSize) +
      " but the bundle was compiled for world size " +
      std::to_string(bundleWorldSize) +
      (layout.empty() ? "" : " (" + layout + ")") + ": start " +
      std::to_string(bundleWorldSize) +
      (bundleWorldSize == 1 ? " rank" : " ranks") + " (octet launch --gpus " +
      std::to_string(bundleWorldSize) +
      "), or recompile with train.parallel sizes whose product is " +
      std::to_string(env.worldSize));
}

} // namespace octet::comm
