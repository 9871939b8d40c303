#include "compiler/Interpreter/PipeChannels.h"

#include <gtest/gtest.h>

#include <thread>

using namespace octet::interp;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

PipeMessage message(int stage, int microbatch, float value) {
  return {stage, microbatch, {Tensor::fromFloats({1}, {value})}};
}

TEST(PipeChannels, DeliversInOrderPerChannelAndPairOfRanks) {
  PipeChannels channels;
  channels.send(0, 1, false, message(0, 0, 1.f));
  channels.send(0, 1, false, message(0, 1, 2.f));
  channels.send(0, 1, true, message(2, 0, 3.f)); // the gradient channel
  auto gradient = channels.receive(1, 0, true, 2, 0);
  ASSERT_TRUE(gradient.isOk()) << gradient.status().message();
  EXPECT_EQ((*gradient)[0].f()[0], 3.f);
  auto first = channels.receive(1, 0, false, 0, 0);
  auto second = channels.receive(1, 0, false, 0, 1);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_EQ((*first)[0].f()[0], 1.f);
  EXPECT_EQ((*second)[0].f()[0], 2.f);
}

TEST(PipeChannels, AReceiveWaitsForTheSend) {
  PipeChannels channels;
  std::thread sender([&] { channels.send(1, 0, true, message(1, 3, 7.f)); });
  auto got = channels.receive(0, 1, true, 1, 3);
  sender.join();
  ASSERT_TRUE(got.isOk()) << got.status().message();
  EXPECT_EQ((*got)[0].f()[0], 7.f);
}

// A schedule whose two sides disagree on the order is caught at the first
// receive, naming what was expected and what came.
TEST(PipeChannels, AnOutOfOrderMessageIsAnError) {
  PipeChannels channels;
  channels.send(0, 1, false, message(0, 1, 1.f));
  auto got = channels.receive(1, 0, false, 0, 0);
  ASSERT_FALSE(got.isOk());
  EXPECT_PRED2(contains, got.status().message(),
               std::string("rank 1 expected the activation of stage 0, "
                        "microbatch 0 from rank 0 but the channel delivers "
                        "stage 0, microbatch 1"));
}

TEST(PipeChannels, AbortReleasesAWaitingReceive) {
  PipeChannels channels;
  std::thread aborter([&] { channels.abort("rank 0 failed"); });
  auto got = channels.receive(1, 0, false, 0, 0);
  aborter.join();
  ASSERT_FALSE(got.isOk());
  EXPECT_PRED2(contains, got.status().message(),
               std::string("rank 1 waiting for the activation of stage 0, "
                        "microbatch 0 from rank 0: rank 0 failed"));
}

} // namespace
