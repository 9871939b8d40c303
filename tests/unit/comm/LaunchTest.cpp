// The launcher with small shell commands, and whole jobs of
// octet-comm-test-rank processes: joining over the store, a rank killed
// with SIGKILL (the others' watchdogs end them naming it), different
// bundles.

#include "runtime/comm/Launch.h"
#include "runtime/comm/Socket.h"
#include "tests/unit/comm/Mentions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace octet;
using namespace octet::comm;
using namespace std::chrono_literals;
using octet::test::failsWith;
using octet::test::mentions;

namespace {

// Runs a launch, keeping what it printed: each line as "out| ..." or
// "err| ...", all in one text for mentions().
struct Launched {
  StatusOr<LaunchResult> result = Status::error("not run");
  std::string output;
  std::chrono::steady_clock::duration took{};
  const LaunchResult &operator*() const { return result.value(); }
  const LaunchResult *operator->() const { return &result.value(); }
};

Launched launch(LaunchOptions o) {
  Launched l;
  std::mutex mutex;
  o.output = [&](bool toStderr, const std::string &line) {
    std::lock_guard<std::mutex> lock(mutex);
    l.output += (toStderr ? "err| " : "out| ") + line + "\n";
  };
  auto start = Clock::now();
  l.result = launchRanks(o);
  l.took = Clock::now() - start;
  return l;
}

// The launch ended with rank `rank`'s failure and status `code`, in
// seconds.
void expectFailedRank(const Launched &l, int rank, int code) {
  ASSERT_TRUE(l.result.isOk()) << l.result.status().message();
  EXPECT_LT(l.took, 5s);
  EXPECT_EQ(l->failedRank, rank) << l.output;
  EXPECT_EQ(l->exitCode, code) << l.output;
}

LaunchOptions shell(int ranks, const std::string &script) {
  LaunchOptions o;
  o.ranks = ranks;
  o.command = {"/bin/sh", "-c", script};
  o.grace = 300ms;
  o.killAfter = 300ms;
  return o;
}

TEST(Launch, PrefixesEveryLineWithItsRank) {
  auto l = launch(shell(
      2, "echo hello from $RANK; echo oops $RANK >&2; printf 'no newline'"));
  ASSERT_TRUE(l.result.isOk()) << l.result.status().message();
  EXPECT_EQ(l->exitCode, 0);
  EXPECT_EQ(l->failedRank, -1);
  for (const char *line :
       {"out| [rank 0] hello from 0\n", "out| [rank 1] hello from 1\n",
        "err| [rank 1] oops 1\n", "out| [rank 0] no newline\n"})
    EXPECT_TRUE(mentions(l.output, line));
}

TEST(Launch, GivesEachRankTorchrunsVariablesAndNvlsOff) {
  auto o = shell(2, "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE "
                    "LOCAL_RANK=$LOCAL_RANK ADDR=$MASTER_ADDR "
                    "PORT=$MASTER_PORT NVLS=$NCCL_NVLS_ENABLE EXTRA=$EXTRA");
  o.env = {{"NCCL_NVLS_ENABLE", "1"}, {"EXTRA", "x"}};
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);
  auto l = launch(o);
  ::unsetenv("NCCL_NVLS_ENABLE");
  ASSERT_TRUE(l.result.isOk()) << l.result.status().message();
  EXPECT_TRUE(mentions(l.output, "[rank 0] RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 "
                                 "ADDR=127.0.0.1 PORT="));
  EXPECT_TRUE(mentions(l.output, "[rank 1] RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "
                                 "ADDR=127.0.0.1 PORT="));
  EXPECT_TRUE(mentions(l.output, "NVLS=0 EXTRA=x"));
  EXPECT_FALSE(mentions(l.output, "NVLS=1"));
  EXPECT_FALSE(mentions(l.output, "PORT=0 "));
}

TEST(Launch, TheFirstFailureDecidesAndTheOthersAreTerminated) {
  auto l = launch(shell(3, "if [ $RANK = 1 ]; then echo 'bad input' >&2; "
                           "exit 3; fi; echo waiting; exec sleep 30"));
  expectFailedRank(l, 1, 3);
  EXPECT_EQ(l->failure, "rank 1 exited with status 3: bad input");
  EXPECT_TRUE(mentions(l.output,
                       "err| octet launch: rank 1 exited with status 3: bad "
                       "input"));
  EXPECT_TRUE(
      mentions(l.output, "err| octet launch: terminating rank(s) 0, 2"));
}

TEST(Launch, OthersIgnoringSigtermAreKilled) {
  auto l = launch(shell(2, "if [ $RANK = 0 ]; then exit 5; fi; trap '' TERM; "
                           "while true; do sleep 0.05; done"));
  expectFailedRank(l, 0, 5);
}

TEST(Launch, ARankKilledByASignalExitsWith128PlusIt) {
  auto l =
      launch(shell(2, "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 30"));
  expectFailedRank(l, 1, 128 + 9);
  EXPECT_TRUE(mentions(l->failure, "rank 1 was killed by signal 9"));
}

TEST(Launch, SigtermToTheLauncherStopsEveryRank) {
  // The signal goes once both ranks run: the launcher handles it by then.
  std::atomic<int> started{0};
  std::atomic<bool> stopping{false};
  auto o = shell(2, "echo started; exec sleep 30");
  o.output = [&](bool, const std::string &line) {
    started += mentions(line, "started") ? 1 : 0;
    stopping = stopping || mentions(line, ": stopping every rank");
  };
  std::thread interrupter([&] {
    for (int i = 0; i < 500 && started < 2; ++i)
      std::this_thread::sleep_for(10ms);
    if (started == 2)
      ::kill(::getpid(), SIGTERM);
  });
  auto result = launchRanks(o);
  interrupter.join();
  ASSERT_TRUE(result.isOk()) << result.status().message();
  EXPECT_EQ(result->exitCode, 128 + SIGTERM);
  EXPECT_EQ(result->failedRank, -1);
  EXPECT_TRUE(stopping);
}

TEST(Launch, LaunchErrorsAreStatuses) {
  auto o = shell(2, "true");
  o.command = {"no-such-program-octet"};
  EXPECT_TRUE(failsWith(launchRanks(o), "'no-such-program-octet' is not a "
                                        "program on PATH"));
  o.command = {"/bin/true"};
  o.ranks = 0;
  EXPECT_TRUE(failsWith(launchRanks(o), "launch at least one rank"));
}

TEST(Launch, APortInUseIsRefused) {
  int port = 0;
  auto holder = listenTcp("127.0.0.1", 0, &port, "test");
  ASSERT_TRUE(holder.isOk());
  auto o = shell(1, "true");
  o.port = port;
  EXPECT_TRUE(failsWith(launchRanks(o),
                        "--port=" + std::to_string(port) + " is in use"));
}

// A job of octet-comm-test-rank processes (TestRank.cpp).
Launched job(int ranks, std::vector<std::string> args) {
  LaunchOptions o;
  o.ranks = ranks;
  o.command = {OCTET_COMM_TEST_RANK};
  o.command.insert(o.command.end(), args.begin(), args.end());
  o.grace = 6s;
  o.killAfter = 1s;
  return launch(o);
}

TEST(LaunchJob, RanksJoinOverTheStoreAndFinish) {
  auto l = job(4, {"ok"});
  ASSERT_TRUE(l.result.isOk()) << l.result.status().message();
  EXPECT_EQ(l->exitCode, 0) << l.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(mentions(l.output, "[rank " + std::to_string(rank) + "] rank " +
                                       std::to_string(rank) + " done"));
}

TEST(LaunchJob, AKilledRankEndsEveryOtherRankNamingIt) {
  auto l = job(3, {"die", "1"});
  expectFailedRank(l, 1, 128 + 9);
  // The survivors' watchdogs ended them on their own (no "terminating"),
  // each naming the lost rank.
  EXPECT_FALSE(mentions(l.output, "octet launch: terminating"));
  for (const char *line : {"err| [rank 0] octet: rank 0: the job failed: rank "
                           "1 is lost",
                           "err| [rank 2] octet: rank 2: the job failed: rank "
                           "1 is lost"})
    EXPECT_TRUE(mentions(l.output, line));
}

TEST(LaunchJob, RankZeroKilledIsNamedByTheOthers) {
  auto l = job(2, {"die", "0"});
  expectFailedRank(l, 0, 128 + 9);
  EXPECT_TRUE(mentions(l.output, "[rank 1] octet: rank 1: the job failed: "
                                 "lost the connection to the store"));
  EXPECT_TRUE(mentions(l.output, "rank 0, which runs the store, is gone"));
}

TEST(LaunchJob, DifferentBundlesStopTheJob) {
  auto l = job(2, {"hash-per-rank"});
  ASSERT_TRUE(l.result.isOk()) << l.result.status().message();
  EXPECT_EQ(l->exitCode, 1) << l.output;
  EXPECT_TRUE(mentions(l->failure, "rank 0 has bundle hash bundle-of-rank-0, "
                                   "rank 1 has bundle-of-rank-1"));
}

} // namespace
