// The rendezvous store over loopback: keys, waits, timeouts, many client
// threads, and how it learns that a rank is gone.

#include "runtime/comm/Store.h"
#include "tests/unit/comm/Mentions.h"

#include <gtest/gtest.h>

#include <thread>

using namespace octet::comm;
using namespace std::chrono_literals;
using octet::test::failsWith;
using octet::test::mentions;

namespace {

std::unique_ptr<StoreServer> startServer(int world) {
  auto server = StoreServer::start("127.0.0.1", 0, world);
  EXPECT_TRUE(server.isOk()) << server.status().message();
  return std::move(*server);
}

StoreClient::Options shortTimeouts() {
  StoreClient::Options o;
  o.connectTimeout = 1s;
  o.requestTimeout = 2s;
  return o;
}

std::unique_ptr<StoreClient> join(const StoreServer &server, int rank,
                                  int world) {
  auto client = StoreClient::connect("127.0.0.1", server.port(), rank, world,
                                     shortTimeouts());
  EXPECT_TRUE(client.isOk()) << client.status().message();
  return client ? std::move(*client) : nullptr;
}

TEST(Store, SetGetAddAndMultiGet) {
  auto server = startServer(1);
  auto c = join(*server, 0, 1);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->set("a", std::string("x\0y", 3)));
  EXPECT_EQ(**c->get("a"), std::string("x\0y", 3));
  EXPECT_FALSE(c->get("nothing")->has_value());
  EXPECT_EQ(*c->add("n", 5), 5);
  EXPECT_EQ(*c->add("n", -2), 3);
  auto three = c->multiGet({"a", "missing", "n"});
  ASSERT_TRUE(three.isOk());
  EXPECT_TRUE((*three)[0].has_value());
  EXPECT_FALSE((*three)[1].has_value());
  EXPECT_EQ(*(*three)[2], "3");
}

TEST(Store, WaitReturnsOnceAnotherClientSetsTheKey) {
  auto server = startServer(2);
  auto c0 = join(*server, 0, 2);
  auto c1 = join(*server, 1, 2);
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(c1->set("ready", "yes"));
  });
  auto v = c0->waitFor({"ready"}, Clock::now() + 2s);
  setter.join();
  ASSERT_TRUE(v.isOk()) << v.status().message();
  EXPECT_EQ((*v)[0], "yes");
}

TEST(Store, WaitTimesOutNamingTheMissingKeys) {
  auto server = startServer(1);
  auto c = join(*server, 0, 1);
  ASSERT_TRUE(c->set("here", ""));
  auto start = Clock::now();
  EXPECT_TRUE(
      failsWith(c->waitFor({"here", "never"}, Clock::now() + 150ms), "never"));
  EXPECT_LT(Clock::now() - start, 2s);
  auto custom = c->waitFor({"never"}, Clock::now() + 50ms,
                           [](const std::vector<size_t> &missing) {
                             return "missing " + std::to_string(missing[0]);
                           });
  EXPECT_EQ(custom.status().message(), "missing 0");
}

TEST(Store, ManyClientThreadsCountTogether) {
  constexpr int kRanks = 8, kAdds = 50;
  auto server = startServer(kRanks);
  std::vector<std::string> everyone;
  for (int k = 0; k < kRanks; ++k)
    everyone.push_back("done/" + std::to_string(k));
  std::vector<int> failures(kRanks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto c = join(*server, r, kRanks);
      for (int i = 0; c && i < kAdds; ++i)
        failures[r] += !c->add("counter", 1).isOk();
      bool ok = c && c->set(everyone[r], "1") &&
                c->waitFor(everyone, Clock::now() + 5s).isOk() && c->leave();
      failures[r] += !ok;
    });
  for (auto &t : threads)
    t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(failures[r], 0) << "rank " << r;
  auto c = join(*server, 0, kRanks);
  EXPECT_EQ(**c->get("counter"), std::to_string(kRanks * kAdds));
  EXPECT_EQ(server->failure(), "");
}

TEST(Store, APortInUseIsAClearError) {
  auto first = startServer(1);
  EXPECT_TRUE(
      failsWith(StoreServer::start("127.0.0.1", first->port(), 1),
                "MASTER_PORT=" + std::to_string(first->port()) + " is in use"));
}

TEST(Store, NobodyListeningTimesOutNamingTheAddress) {
  // A port that was free a moment ago and has no listener now.
  int port = startServer(1)->port();
  StoreClient::Options o;
  o.connectTimeout = 200ms;
  auto start = Clock::now();
  EXPECT_TRUE(failsWith(StoreClient::connect("127.0.0.1", port, 1, 2, o),
                        "found no store at 127.0.0.1:" + std::to_string(port)));
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(Store, RefusesDuplicateRanksAndWorldSizeMismatches) {
  auto server = startServer(2);
  auto c0 = join(*server, 0, 2);
  auto joining = [&](int rank, int world) {
    return StoreClient::connect("127.0.0.1", server->port(), rank, world,
                                shortTimeouts());
  };
  EXPECT_TRUE(failsWith(joining(0, 2), "two processes joined as rank 0"));
  EXPECT_TRUE(failsWith(joining(1, 3),
                        "rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"));
  EXPECT_TRUE(failsWith(joining(5, 2), "RANK=5 is outside WORLD_SIZE=2"));
}

TEST(Store, AClosedConnectionWithoutGoodbyeIsALostRank) {
  auto server = startServer(3);
  auto c0 = join(*server, 0, 3);
  auto c1 = join(*server, 1, 3);
  auto c2 = join(*server, 2, 3);
  ASSERT_TRUE(c2->leave()); // a clean exit is not a failure
  c1.reset();               // as if killed
  std::string notice;
  for (auto until = Clock::now() + 2s; notice.empty() && Clock::now() < until;
       std::this_thread::sleep_for(5ms))
    notice = c0->failureNotice().value();
  EXPECT_TRUE(mentions(notice, "rank 1 is lost"));
  EXPECT_EQ(server->failure(), notice);
  // Waiting on the store now fails at once with the notice.
  EXPECT_EQ(c0->waitFor({"never"}, Clock::now() + 5s).status().message(),
            notice);
  // Rank 0 learned the notice: it has been delivered to everyone left.
  EXPECT_TRUE(server->waitForFailureDelivered(Clock::now() + 1s));
}

TEST(Store, TheFirstReportedFailureIsTheCause) {
  auto server = startServer(2);
  auto c0 = join(*server, 0, 2);
  auto c1 = join(*server, 1, 2);
  ASSERT_TRUE(c1->reportFailure("rank 1: out of memory"));
  ASSERT_TRUE(c0->reportFailure("rank 0: a consequence"));
  EXPECT_EQ(*c0->failureNotice(), "rank 1: out of memory");
}

TEST(Store, ClientsLearnWhenTheStoreHostIsGone) {
  auto server = startServer(2);
  auto c1 = join(*server, 1, 2);
  server.reset();
  EXPECT_TRUE(
      failsWith(c1->failureNotice(), "rank 0, which runs the store, is gone"));
}

TEST(Store, RanksLeavingLetsRankZeroStop) {
  auto server = startServer(2);
  auto c0 = join(*server, 0, 2);
  auto c1 = join(*server, 1, 2);
  EXPECT_FALSE(server->waitForRanksToLeave(Clock::now() + 50ms));
  ASSERT_TRUE(c0->leave());
  ASSERT_TRUE(c1->leave());
  EXPECT_TRUE(server->waitForRanksToLeave(Clock::now() + 1s));
  EXPECT_EQ(server->failure(), "");
}

} // namespace
