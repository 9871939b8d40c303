// The pipeline schedules and the simulator that proves them: the grid every
// schedule must pass, the bubbles they predict, and broken schedules the
// simulator must reject.

#include "support/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace octet {
namespace {

PipelineSchedule make(PipelineScheduleKind kind, int ranks, int chunks,
                      int microbatches) {
  auto schedule = makePipelineSchedule(kind, ranks, chunks, microbatches);
  EXPECT_TRUE(schedule.isOk()) << schedule.status().message();
  return schedule.isOk() ? *schedule : PipelineSchedule{};
}

PipeSimulation simulate(const PipelineSchedule &schedule,
                        const PipeCosts &costs = {}) {
  auto result = simulatePipeline(schedule, costs);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  return result.isOk() ? *result : PipeSimulation{};
}

std::string failure(const PipelineSchedule &schedule) {
  auto result = simulatePipeline(schedule);
  EXPECT_FALSE(result.isOk()) << drawPipeline(schedule, *result);
  return result.isOk() ? "" : result.status().message();
}

// Pipeline 2–8, V 1–2, microbatches P to 4P: every schedule that takes the
// shape runs to the end with every check passing.
TEST(PipelineSchedule, GridPassesTheSimulator) {
  int simulated = 0;
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; ++m) {
      for (auto kind : {PipelineScheduleKind::OneFOneB,
                        PipelineScheduleKind::ZeroBubbleH1}) {
        SCOPED_TRACE(std::string(pipelineScheduleName(kind)) + " P" +
                     std::to_string(p) + " M" + std::to_string(m));
        PipeSimulation sim = simulate(make(kind, p, 1, m));
        EXPECT_GT(sim.totalTime, 0);
        ++simulated;
      }
      if (m % p == 0) {
        SCOPED_TRACE("interleaved P" + std::to_string(p) + " M" +
                     std::to_string(m));
        PipeSimulation sim =
            simulate(make(PipelineScheduleKind::Interleaved, p, 2, m));
        EXPECT_GT(sim.totalTime, 0);
        ++simulated;
      }
    }
  EXPECT_EQ(simulated, 2 * 112 + 28);
}

// The groups are placed for unit costs; other costs change the timing but
// must never deadlock or reorder a transfer.
TEST(PipelineSchedule, GridPassesWithUnequalCosts) {
  for (PipeCosts costs : {PipeCosts{3, 5, 2}, PipeCosts{2, 1, 1}})
    for (int p = 2; p <= 8; ++p)
      for (int m = p; m <= 4 * p; m += p) {
        SCOPED_TRACE("P" + std::to_string(p) + " M" + std::to_string(m) +
                     " F" + std::to_string(costs.forward));
        double plain =
            simulate(make(PipelineScheduleKind::OneFOneB, p, 1, m), costs)
                .bubble;
        EXPECT_NEAR(plain, double(p - 1) / double(m + p - 1), 1e-12);
        EXPECT_LT(simulate(make(PipelineScheduleKind::ZeroBubbleH1, p, 1, m),
                           costs)
                      .bubble,
                  plain);
        EXPECT_LT(simulate(make(PipelineScheduleKind::Interleaved, p, 2, m),
                           costs)
                      .bubble,
                  plain);
      }
}

TEST(PipelineSchedule, OneFOneBBubbleIsTheTextbookOne) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; ++m) {
      PipeSimulation sim = simulate(make(PipelineScheduleKind::OneFOneB, p, 1, m));
      EXPECT_NEAR(sim.bubble, double(p - 1) / double(m + p - 1), 1e-12)
          << "P" << p << " M" << m;
      EXPECT_EQ(sim.totalTime, 3 * (m + p - 1)) << "P" << p << " M" << m;
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(sim.perRank[r].peakStash, std::min(m, p - r))
            << "P" << p << " M" << m << " rank " << r;
    }
}

TEST(PipelineSchedule, ZeroBubbleAndInterleavedBeatOneFOneB) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; m += p) {
      double plain =
          simulate(make(PipelineScheduleKind::OneFOneB, p, 1, m)).bubble;
      double zeroBubble =
          simulate(make(PipelineScheduleKind::ZeroBubbleH1, p, 1, m)).bubble;
      double interleaved =
          simulate(make(PipelineScheduleKind::Interleaved, p, 2, m)).bubble;
      EXPECT_LT(zeroBubble, plain) << "P" << p << " M" << m;
      EXPECT_LT(interleaved, plain) << "P" << p << " M" << m;
    }
}

// With unit costs ZB-H1's only idle time is the P − 1 steps of the first F
// reaching the last rank and of the last B coming back (the zero-bubble
// paper's (P − 1)(T_F + T_B − T_W)), and it never holds more activations
// awaiting B than 1F1B does.
TEST(PipelineSchedule, ZeroBubbleIdlesOnlyThePipelineDepth) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; ++m) {
      PipeSimulation sim =
          simulate(make(PipelineScheduleKind::ZeroBubbleH1, p, 1, m));
      EXPECT_EQ(sim.totalTime, 3 * m + p - 1) << "P" << p << " M" << m;
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(sim.perRank[r].peakAwaitingB, std::min(m, p - r))
            << "P" << p << " M" << m << " rank " << r;
        EXPECT_LE(sim.perRank[r].peakStash, std::min(m, 2 * p - 1))
            << "P" << p << " M" << m << " rank " << r;
      }
    }
}

// Megatron's interleaving divides 1F1B's idle time by V: with unit costs per
// chunk op, 3(P − 1) chunk steps against 3·M·V of work.
TEST(PipelineSchedule, InterleavingDividesTheIdleTimeByV) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; m += p) {
      PipeSimulation sim =
          simulate(make(PipelineScheduleKind::Interleaved, p, 2, m));
      EXPECT_EQ(sim.totalTime, 3 * m * 2 + 3 * (p - 1))
          << "P" << p << " M" << m;
    }
}

TEST(PipelineSchedule, CostsShapeTheTimeline) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 2);
  PipeSimulation sim = simulate(schedule, PipeCosts{1, 2, 1});
  // Rank 1 runs F(0), then B(0) for two units and W(0) for one.
  EXPECT_EQ(sim.timeline[1].substr(1, 4), "FBBW");
  EXPECT_EQ(sim.totalTime, 4 * 3);
  std::string drawing = drawPipeline(schedule, sim);
  EXPECT_NE(drawing.find("rank 0 | F"), std::string::npos) << drawing;
}

TEST(PipelineSchedule, ShapesTheScheduleCannotTakeAreRefused) {
  auto v1 = makePipelineSchedule(PipelineScheduleKind::Interleaved, 4, 1, 8);
  ASSERT_FALSE(v1.isOk());
  EXPECT_NE(v1.status().message().find("virtual_stages"), std::string::npos);
  auto ragged =
      makePipelineSchedule(PipelineScheduleKind::Interleaved, 4, 2, 6);
  ASSERT_FALSE(ragged.isOk());
  EXPECT_NE(ragged.status().message().find("multiple"), std::string::npos);
  auto zbV2 = makePipelineSchedule(PipelineScheduleKind::ZeroBubbleH1, 4, 2, 8);
  ASSERT_FALSE(zbV2.isOk());
}

// Index of the first op on a rank matching a predicate.
template <typename Pred>
size_t findOp(const std::vector<PipeOp> &ops, Pred pred) {
  auto it = std::find_if(ops.begin(), ops.end(), pred);
  EXPECT_NE(it, ops.end());
  return size_t(it - ops.begin());
}

// Splits each rank's first group of a send and a receive into the send, then
// the receive: blocking sends on both sides.
void splitSendFirst(std::vector<PipeOp> &ops) {
  size_t g = findOp(ops, [](const PipeOp &op) {
    return op.kind == PipeOpKind::Comm && op.transfers.size() == 2;
  });
  PipeOp sendOnly = ops[g], recvOnly = ops[g];
  sendOnly.transfers.resize(1);
  recvOnly.transfers.erase(recvOnly.transfers.begin());
  ASSERT_TRUE(sendOnly.transfers[0].send);
  ASSERT_FALSE(recvOnly.transfers[0].send);
  ops[g] = sendOnly;
  ops.insert(ops.begin() + g + 1, recvOnly);
}

TEST(PipelineSchedule, SplittingGroupsDeadlocks) {
  // Rank 0 sends m1's activation while rank 1 sends m0's gradient: each
  // waits for the other to receive.
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 2);
  splitSendFirst(schedule.perRank[1]);
  simulate(schedule); // one side split alone still completes
  splitSendFirst(schedule.perRank[0]);
  std::string message = failure(schedule);
  EXPECT_NE(message.find("deadlock"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0 op 3 COMM{send act s0 m1 ->r1} waits"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("rank 1 op 3 COMM{send grad s1 m0 ->r0} waits"),
            std::string::npos)
      << message;
}

TEST(PipelineSchedule, ADroppedReceiveIsNamed) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 3, 1, 3);
  auto &ops = schedule.perRank[2];
  ops.erase(ops.begin()); // the receive of m0's activation
  std::string message = failure(schedule);
  EXPECT_NE(message.find("rank 2 op 0 F(c0,m0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("before its input"), std::string::npos) << message;
}

TEST(PipelineSchedule, SwappedReceivesAreOutOfOrder) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  auto &ops = schedule.perRank[1];
  // Make rank 1 expect m1's activation where rank 0 sends m0's.
  size_t g = findOp(ops, [](const PipeOp &op) {
    return op.kind == PipeOpKind::Comm && !op.transfers[0].send;
  });
  ops[g].transfers[0].microbatch = 1;
  std::string message = failure(schedule);
  EXPECT_NE(message.find("rank 1 op 0"), std::string::npos) << message;
  EXPECT_NE(message.find("out of order"), std::string::npos) << message;
}

TEST(PipelineSchedule, AMissingOrRepeatedWeightGradientIsNamed) {
  PipelineSchedule schedule =
      make(PipelineScheduleKind::ZeroBubbleH1, 2, 1, 2);
  auto &ops = schedule.perRank[0];
  size_t w = findOp(ops, [](const PipeOp &op) { return op.kind == PipeOpKind::W; });
  PipeOp dropped = ops[w];
  ops.erase(ops.begin() + w);
  std::string missing = failure(schedule);
  EXPECT_NE(missing.find("rank 0 never runs W(c0,m" +
                         std::to_string(dropped.microbatch) + ")"),
            std::string::npos)
      << missing;
  ops.push_back(ops.back().kind == PipeOpKind::W ? ops.back() : dropped);
  ops.push_back(ops.back());
  std::string twice = failure(schedule);
  EXPECT_NE(twice.find("W runs a second time"), std::string::npos) << twice;
}

TEST(PipelineSchedule, BeforeItsForwardIsRefused) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 2);
  auto &ops = schedule.perRank[1];
  // Rank 1 is the last stage: its first compute ops are F(m0) then BW(m0).
  size_t f = findOp(ops, [](const PipeOp &op) { return op.kind == PipeOpKind::F; });
  std::swap(ops[f], ops[f + 1]);
  std::string message = failure(schedule);
  EXPECT_NE(message.find("rank 1 op " + std::to_string(f) + " BW(c0,m0)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("before its F"), std::string::npos) << message;
}

} // namespace
} // namespace octet
