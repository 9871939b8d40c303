// The watchdog's exit path, with the exit function injected: a lost rank,
// an asynchronous communicator error, the store host gone, no step
// progress, and an abort that never returns.

#include "runtime/comm/Watchdog.h"
#include "runtime/comm/Store.h"
#include "tests/unit/comm/Mentions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

using namespace octet;
using namespace octet::comm;
using namespace std::chrono_literals;
using octet::test::mentions;

namespace {

class FakeComm : public Abortable {
public:
  explicit FakeComm(std::string name) : name_(std::move(name)) {}
  std::string describe() const override {
    return "communicator '" + name_ + "'";
  }
  Status pollAsyncError() override {
    return failing ? Status::error("ncclRemoteError: peer gone") : Status::ok();
  }
  void abort() override {
    aborted = true;
    while (blockAbort)
      std::this_thread::sleep_for(1ms);
  }
  std::atomic<bool> failing{false}, aborted{false}, blockAbort{false};

private:
  std::string name_;
};

// Two ranks' store connections, and a watchdog whose exit and print are
// recorded.
class WatchdogTest : public ::testing::Test {
protected:
  void SetUp() override {
    server = std::move(*StoreServer::start("127.0.0.1", 0, 2));
    for (int r = 0; r < 2; ++r)
      rank[r] =
          std::move(*StoreClient::connect("127.0.0.1", server->port(), r, 2));
  }

  // A watchdog for `r` polling every 10 ms, without a step timeout.
  std::unique_ptr<Watchdog>
  start(int r, std::chrono::milliseconds stepTimeout = 0ms,
        std::chrono::milliseconds abortDeadline = 2s) {
    WatchdogOptions o;
    o.rank = r;
    o.worldSize = 2;
    o.pollInterval = 10ms;
    o.stepTimeout = stepTimeout;
    o.abortDeadline = abortDeadline;
    o.lingerForNotice = 500ms;
    o.exit = [this](int code) {
      std::lock_guard<std::mutex> lock(mutex);
      ++exits;
      exitCode = code;
      exited.notify_all();
    };
    o.print = [this](const std::string &line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
    StoreClient *store = rank[r] ? rank[r].get() : nullptr;
    return Watchdog::start(o, store, r == 0 ? server.get() : nullptr);
  }

  // The one line printed, once the exit function has been called.
  std::string waitForExit() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!exited.wait_for(lock, 5s, [&] { return exits > 0; }))
      return "(no exit within 5 s)";
    EXPECT_EQ(lines.size(), 1u);
    return lines.empty() ? "" : lines.front();
  }

  std::unique_ptr<StoreServer> server;
  std::unique_ptr<StoreClient> rank[2];
  std::mutex mutex;
  std::condition_variable exited;
  int exits = 0, exitCode = 0;
  std::vector<std::string> lines;
};

TEST_F(WatchdogTest, ALostRankEndsTheOthersNamingIt) {
  FakeComm world("world");
  auto dog = start(0);
  dog->watch(&world);
  rank[1].reset(); // rank 1 dies: its connection closes without goodbye
  EXPECT_TRUE(
      mentions(waitForExit(), "octet: rank 0: the job failed: rank 1 is lost"));
  EXPECT_EQ(exitCode, kWatchdogExitCode);
  EXPECT_EQ(exits, 1);
  EXPECT_TRUE(world.aborted);
  EXPECT_TRUE(dog->fired());
}

TEST_F(WatchdogTest, AnAsyncErrorAbortsEveryCommunicatorAndTellsTheStore) {
  FakeComm dp("dp"), pp("pp");
  auto dog = start(1);
  dog->watch(&dp);
  dog->watch(&pp);
  pp.failing = true;
  EXPECT_TRUE(mentions(waitForExit(), "octet: rank 1: communicator 'pp': "
                                      "ncclRemoteError: peer gone"));
  EXPECT_TRUE(dp.aborted);
  EXPECT_TRUE(pp.aborted);
  // Rank 0 learns the cause from the store.
  EXPECT_TRUE(
      mentions(rank[0]->failureNotice().value(), "rank 1: communicator 'pp'"));
}

TEST_F(WatchdogTest, ALostRankIsTheCauseOfTheCommunicatorErrorItBrings) {
  FakeComm world("world");
  world.failing = true;
  rank[1].reset(); // both at once: the notice names the cause
  auto dog = start(0);
  dog->watch(&world);
  EXPECT_TRUE(mentions(waitForExit(), "the job failed: rank 1 is lost"));
}

TEST_F(WatchdogTest, TheStoreHostGoneIsRankZeroLost) {
  auto dog = start(1);
  rank[0].reset();
  server.reset();
  EXPECT_TRUE(mentions(waitForExit(), "rank 0, which runs the store, is gone"));
}

TEST_F(WatchdogTest, NoStepProgressIsAHangNamingEveryRanksLastStep) {
  ASSERT_TRUE(rank[1]->set("octet/step/1", "6"));
  auto begin = Clock::now();
  auto dog = start(0, /*stepTimeout=*/200ms);
  dog->heartbeat(7);
  EXPECT_TRUE(mentions(waitForExit(),
                       "no step progress for 200 ms (this rank's last step: "
                       "7); last steps by rank: 0:7 1:6"));
  EXPECT_GE(Clock::now() - begin, 200ms);
}

TEST_F(WatchdogTest, HeartbeatsKeepItQuietAndStopEndsItCleanly) {
  auto dog = start(0, /*stepTimeout=*/150ms);
  for (int step = 0; step < 20; ++step) {
    dog->heartbeat(step);
    std::this_thread::sleep_for(20ms);
  }
  dog->stop();
  EXPECT_EQ(exits, 0);
  EXPECT_FALSE(dog->fired());
  EXPECT_EQ(server->failure(), "");
}

TEST_F(WatchdogTest, AnAbortThatNeverReturnsStillExitsAtTheDeadline) {
  FakeComm stuck("world");
  stuck.failing = true;
  stuck.blockAbort = true;
  auto begin = Clock::now();
  auto dog = start(1, 0ms, /*abortDeadline=*/300ms);
  dog->watch(&stuck);
  EXPECT_TRUE(mentions(waitForExit(), "communicator 'world'"));
  auto took = Clock::now() - begin;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_TRUE(stuck.aborted);
  stuck.blockAbort = false; // let the watchdog's thread finish
  dog.reset();
  EXPECT_EQ(exits, 1);
}

} // namespace
