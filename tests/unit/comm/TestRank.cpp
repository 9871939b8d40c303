// One rank of a multi-process comm test, started by the launcher tests
// (LaunchTest.cpp) with torchrun's variables:
//   octet-comm-test-rank ok              join, barrier, finish
//   octet-comm-test-rank die RANK        join; RANK kills itself (SIGKILL)
//                                        mid-"step"; the others run the
//                                        watchdog until it ends them
//   octet-comm-test-rank hash-per-rank   join with a different bundle hash
//                                        on each rank (must fail)
//   octet-comm-test-rank env             print the launcher's variables
// Timeouts are short: the tests must end in seconds.

#include "runtime/comm/Bootstrap.h"
#include "runtime/comm/Watchdog.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

using namespace octet;
using namespace octet::comm;
using namespace std::chrono_literals;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

const char *envOr(const char *name, const char *fallback) {
  const char *v = std::getenv(name);
  return v ? v : fallback;
}

} // namespace

int main(int argc, char **argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "env") {
    for (const char *name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
          "MASTER_PORT", "NCCL_NVLS_ENABLE"})
      std::printf("%s=%s\n", name, envOr(name, "(unset)"));
    return 0;
  }
  auto env = rankEnvFromProcess();
  if (!env)
    return fail(env.status().message());
  BootstrapOptions options;
  options.env = *env;
  options.bundleHash = scenario == "hash-per-rank"
                           ? "bundle-of-rank-" + std::to_string(env->rank)
                           : "same-bundle";
  options.bundleWorldSize = uint32_t(env->worldSize);
  options.joinTimeout = 5s;
  options.requestTimeout = 5s;
  auto boot = Bootstrap::join(options);
  if (!boot)
    return fail(boot.status().message());
  Bootstrap &b = **boot;

  if (scenario == "ok" || scenario == "hash-per-rank") {
    if (Status s = b.barrier("work", 5s); !s)
      return fail(s.message());
    if (Status s = b.finish(5s); !s)
      return fail(s.message());
    std::printf("rank %d done\n", b.rank());
    return 0;
  }

  if (scenario == "die") {
    int victim = argc > 2 ? std::atoi(argv[2]) : 1;
    WatchdogOptions wo;
    wo.rank = b.rank();
    wo.worldSize = b.worldSize();
    wo.pollInterval = 20ms;
    wo.stepTimeout = 8s;
    wo.abortDeadline = 3s;
    wo.lingerForNotice = 1s;
    auto dog = Watchdog::start(wo, &b.store(), b.server());
    if (Status s = b.barrier("steps", 5s); !s)
      return fail(s.message());
    for (int step = 0; step < 400; ++step) {
      dog->heartbeat(step);
      std::printf("step %d\n", step);
      std::fflush(stdout);
      if (b.rank() == victim && step == 3)
        ::kill(::getpid(), SIGKILL);
      std::this_thread::sleep_for(20ms);
    }
    return fail("the watchdog did not end this rank");
  }
  return fail("unknown scenario '" + scenario + "'");
}
