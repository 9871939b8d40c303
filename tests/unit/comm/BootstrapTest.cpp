// torchrun's variables, and the start of a job over loopback with threads
// as ranks: joining, hash comparison, ranks that never arrive, sharing rank
// 0's value, barriers and a clean finish.

#include "runtime/comm/Bootstrap.h"
#include "tests/unit/comm/Mentions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

using namespace octet;
using namespace octet::comm;
using namespace std::chrono_literals;
using octet::test::failsWith;

namespace {

StatusOr<RankEnv> parse(const std::map<std::string, std::string> &vars) {
  return parseRankEnv([&](const std::string &n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end())
      return std::nullopt;
    return it->second;
  });
}

std::map<std::string, std::string> torchrun(int rank, int world) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

// torchrun's variables for rank 1 of 2 with one changed (null: unset).
StatusOr<RankEnv> parseWith(const std::string &name, const char *value) {
  auto vars = torchrun(1, 2);
  if (value)
    vars[name] = value;
  else
    vars.erase(name);
  return parse(vars);
}

TEST(RankEnv, NoVariablesIsOneProcess) {
  auto env = parse({});
  ASSERT_TRUE(env.isOk());
  EXPECT_EQ(env->worldSize, 1);
  EXPECT_EQ(env->rank, 0);
  EXPECT_FALSE(env->fromEnvironment);
  EXPECT_EQ(env->masterPort, 0);
}

TEST(RankEnv, ReadsTorchrunsVariables) {
  auto env = parse(torchrun(3, 4));
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->worldSize, 4);
  EXPECT_EQ(env->localRank, 3);
  EXPECT_EQ(env->masterAddr, "127.0.0.1");
  EXPECT_EQ(env->masterPort, 29500);
  EXPECT_TRUE(env->fromEnvironment);
}

TEST(RankEnv, UnderTorchrunTheStoreTakesThePortAfterTheAgents) {
  auto plain = parse(torchrun(1, 2));
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->storePort, 29500);
  auto vars = torchrun(1, 2);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  auto agent = parse(vars);
  ASSERT_TRUE(agent.isOk()) << agent.status().message();
  EXPECT_EQ(agent->masterPort, 29500);
  EXPECT_EQ(agent->storePort, 29501);
  EXPECT_NE(agent->storePortSource.find("torchrun's agent store"),
            std::string::npos);
  vars["OCTET_STORE_PORT"] = "31000";
  auto chosen = parse(vars);
  ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
  EXPECT_EQ(chosen->storePort, 31000);
  EXPECT_EQ(chosen->storePortSource, "OCTET_STORE_PORT");
  vars["OCTET_STORE_PORT"] = "port";
  EXPECT_TRUE(failsWith(parse(vars), "OCTET_STORE_PORT='port' is not a TCP"));
  vars.erase("OCTET_STORE_PORT");
  vars["MASTER_PORT"] = "65535";
  EXPECT_TRUE(failsWith(parse(vars), "set OCTET_STORE_PORT"));
}

TEST(RankEnv, WorldSizeOneNeedsNoStoreAddress) {
  auto env = parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(env.isOk()) << env.status().message();
  EXPECT_EQ(env->worldSize, 1);
}

TEST(RankEnv, MissingVariablesAreNamed) {
  for (const char *name : {"RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    EXPECT_TRUE(
        failsWith(parseWith(name, nullptr), std::string(name) + " is not set"));
  EXPECT_TRUE(failsWith(parseWith("WORLD_SIZE", nullptr),
                        "RANK is set but WORLD_SIZE is not"));
  EXPECT_TRUE(failsWith(parse({{"MASTER_PORT", "29500"}}),
                        "MASTER_PORT is set but WORLD_SIZE and RANK are not"));
  // Every message says how the variables are set.
  EXPECT_TRUE(failsWith(parseWith("RANK", nullptr), "torchrun"));
}

// Each bad value of `name` is refused with a message that says `what`.
void expectRefused(
    const std::string &name,
    std::initializer_list<std::pair<const char *, const char *>> cases) {
  for (const auto &[value, what] : cases)
    EXPECT_TRUE(failsWith(parseWith(name, value), what))
        << name << "=" << value;
}

TEST(RankEnv, GarbageAndOutOfRangeValuesAreNamed) {
  expectRefused("WORLD_SIZE", {{"two", "WORLD_SIZE='two' is not"},
                               {"0", "WORLD_SIZE='0' is not"},
                               {"99999999999", "WORLD_SIZE='99999999999'"}});
  expectRefused("RANK", {{"-1", "RANK='-1' is not"},
                         {"1.0", "RANK='1.0' is not"},
                         {"2", "RANK=2 is outside WORLD_SIZE=2"}});
  expectRefused("LOCAL_RANK", {{"x", "LOCAL_RANK='x' is not"},
                               {"7", "LOCAL_RANK=7 is not below"}});
  expectRefused("MASTER_PORT", {{"0", "MASTER_PORT='0' is not a TCP port"},
                                {"70000", "MASTER_PORT='70000'"},
                                {"", "MASTER_PORT='' is not"}});
  expectRefused("MASTER_ADDR", {{"", "MASTER_ADDR is empty"}});
}

TEST(RankEnv, TheBundlesWorldSizeMustMatch) {
  RankEnv env;
  env.worldSize = 2;
  EXPECT_TRUE(checkWorldSize(env, 2));
  EXPECT_TRUE(failsWith(checkWorldSize(env, 1),
                        "WORLD_SIZE=2 but the bundle was compiled for world "
                        "size 1"));
  EXPECT_TRUE(failsWith(checkWorldSize(env, 4, "pipeline 2 × data 2"),
                        "WORLD_SIZE=2 but the bundle was compiled for world "
                        "size 4 (pipeline 2 × data 2): start 4 ranks"));
}

// A free loopback port for a job of threads.
int freePort() {
  auto s = StoreServer::start("127.0.0.1", 0, 1);
  return s ? (*s)->port() : 0;
}

// A job of `world` ranks on threads over loopback: each joins with
// options() and runs body() (or keeps the join's error).
struct ThreadJob {
  int world;
  std::function<void(BootstrapOptions &)> options = [](BootstrapOptions &) {};
  std::function<Status(Bootstrap &)> body = [](Bootstrap &) {
    return Status::ok();
  };
  std::vector<int> absent;

  std::vector<Status> run() const {
    int port = freePort();
    std::vector<Status> results(world, Status::ok());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      if (std::find(absent.begin(), absent.end(), r) == absent.end())
        threads.emplace_back([&, r] {
          BootstrapOptions o = optionsFor(r, port);
          options(o);
          auto b = Bootstrap::join(o);
          results[r] = b ? body(**b) : b.status();
        });
    for (auto &t : threads)
      t.join();
    return results;
  }

  BootstrapOptions optionsFor(int rank, int port) const {
    BootstrapOptions o;
    o.env.rank = rank;
    o.env.worldSize = world;
    o.env.localRank = rank;
    o.env.masterPort = port;
    o.env.storePort = port;
    o.env.fromEnvironment = true;
    o.bundleHash = "h";
    o.bundleWorldSize = uint32_t(world);
    o.joinTimeout = 3s;
    o.requestTimeout = 3s;
    o.lingerOnFailure = 200ms;
    return o;
  }
};

TEST(Bootstrap, RanksJoinShareRankZerosValueAndFinish) {
  ThreadJob job{3};
  std::vector<std::string> got(3);
  job.body = [&](Bootstrap &b) -> Status {
    auto id = b.shareFromRank0(
        "id", []() -> StatusOr<std::string> { return std::string("42"); }, 3s);
    if (!id)
      return id.status();
    got[b.rank()] = *id;
    OCTET_RETURN_IF_ERROR(b.barrier("step", 3s));
    OCTET_RETURN_IF_ERROR(b.barrier("step", 3s));
    return b.finish(3s);
  };
  auto results = job.run();
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(results[r]) << "rank " << r << ": " << results[r].message();
    EXPECT_EQ(got[r], "42");
  }
}

TEST(Bootstrap, WorldSizeOneRunsItsOwnStoreOnAnyPort) {
  BootstrapOptions o;
  o.bundleHash = "h";
  o.bundleWorldSize = 1;
  auto b = Bootstrap::join(o);
  ASSERT_TRUE(b.isOk()) << b.status().message();
  EXPECT_NE((*b)->storeAddress(), "127.0.0.1:0");
  EXPECT_TRUE((*b)->barrier("x", 1s));
  EXPECT_TRUE((*b)->finish(1s));
}

TEST(Bootstrap, DifferentBundlesAreRefusedNamingBothHashesAndRanks) {
  ThreadJob job{2};
  job.options = [](BootstrapOptions &o) {
    o.bundleHash = o.env.rank == 0 ? "aaaa" : "bbbb";
  };
  for (const Status &s : job.run())
    EXPECT_TRUE(failsWith(s, "rank 0 has bundle hash aaaa, rank 1 has bbbb"));
}

TEST(Bootstrap, ARankThatNeverArrivesIsNamedAtTheTimeout) {
  ThreadJob job{4};
  job.options = [](BootstrapOptions &o) { o.joinTimeout = 500ms; };
  job.absent = {2};
  auto start = Clock::now();
  auto results = job.run();
  EXPECT_LT(Clock::now() - start, 5s);
  for (int r : {0, 1, 3})
    EXPECT_TRUE(
        failsWith(results[r], "rank 2 of 4 did not join within 500 ms"));
}

TEST(Bootstrap, WorldSizeAgainstTheBundleIsCheckedFirst) {
  auto o = ThreadJob{2}.optionsFor(0, freePort());
  o.bundleWorldSize = 1;
  EXPECT_TRUE(failsWith(Bootstrap::join(o), "compiled for world size 1"));
}

TEST(Bootstrap, APortInUseStopsRankZero) {
  auto holder = StoreServer::start("127.0.0.1", 0, 1);
  ASSERT_TRUE(holder.isOk());
  auto o = ThreadJob{2}.optionsFor(0, (*holder)->port());
  EXPECT_TRUE(failsWith(Bootstrap::join(o), "is in use"));
}

TEST(Bootstrap, RankZerosFailureReachesTheOthersAtOnce) {
  ThreadJob job{2};
  job.options = [](BootstrapOptions &o) { o.joinTimeout = 10s; };
  job.body = [](Bootstrap &b) -> Status {
    auto make = []() -> StatusOr<std::string> {
      return Status::error("no libnccl.so.2");
    };
    auto id = b.shareFromRank0("id", make, 10s);
    return id ? Status::ok() : id.status();
  };
  auto start = Clock::now();
  auto results = job.run();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(results[0].message(), "no libnccl.so.2");
  EXPECT_EQ(results[1].message(), "rank 0: no libnccl.so.2");
}

TEST(Bootstrap, ABarrierNamesTheRanksThatDidNotReachIt) {
  ThreadJob job{3};
  job.body = [](Bootstrap &b) -> Status {
    if (b.rank() == 1) {
      std::this_thread::sleep_for(600ms);
      return Status::ok();
    }
    return b.barrier("eval", 200ms);
  };
  EXPECT_TRUE(failsWith(job.run()[0],
                        "rank 1 of 3 did not reach 'eval' within 200 ms"));
}

} // namespace
