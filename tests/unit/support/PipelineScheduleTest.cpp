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

// Per-stage costs: a heavier stage is where the time goes, and the
// schedules still complete with every transfer in order.
TEST(PipelineSchedule, GridPassesWithPerStageCosts) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; m += p)
      for (auto [kind, v] : {std::pair{PipelineScheduleKind::OneFOneB, 1},
                             std::pair{PipelineScheduleKind::Interleaved, 2},
                             std::pair{PipelineScheduleKind::ZeroBubbleH1, 1}}) {
        SCOPED_TRACE(std::string(pipelineScheduleName(kind)) + " P" +
                     std::to_string(p) + " M" + std::to_string(m));
        PipeCosts costs;
        for (int s = 0; s < p * v; ++s)
          costs.perStage.push_back({2 + s % 3, 2 + s % 2, 1 + s % 3});
        PipeSimulation sim = simulate(make(kind, p, v, m), costs);
        EXPECT_GT(sim.totalTime, 0);
      }
}

TEST(PipelineSchedule, PerStageCostsMustListEveryStage) {
  PipeCosts costs;
  costs.perStage.resize(3);
  auto result =
      simulatePipeline(make(PipelineScheduleKind::OneFOneB, 2, 1, 4), costs);
  ASSERT_FALSE(result.isOk());
  EXPECT_NE(result.status().message().find("3 stages, the schedule has 2"),
            std::string::npos)
      << result.status().message();
}

// Equal chunks predict the closed form (P − 1)/(M·V + P − 1) and a step of
// one rank's over P, stretched by the bubble.
TEST(PipelineSchedule, PredictionOfEqualChunksIsTheClosedForm) {
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; m += p)
      for (int v : {1, 2}) {
        SCOPED_TRACE("P" + std::to_string(p) + " M" + std::to_string(m) +
                     " V" + std::to_string(v));
        PipelineSchedule schedule =
            make(v == 1 ? PipelineScheduleKind::OneFOneB
                        : PipelineScheduleKind::Interleaved,
                 p, v, m);
        auto prediction =
            predictPipeline(schedule, std::vector<double>(p * v, 3.5e12));
        ASSERT_TRUE(prediction.isOk()) << prediction.status().message();
        double closed = double(p - 1) / double(m * v + p - 1);
        EXPECT_NEAR(prediction->bubble, closed, 1e-12);
        EXPECT_NEAR(prediction->stepOverOneRank, 1 / (p * (1 - closed)),
                    1e-12);
        for (double share : prediction->stageShare)
          EXPECT_NEAR(share, 1.0 / (p * v), 1e-12);
      }
}

// 1F1B over two stages, the second k times the first: the heavy rank works
// 3kM and idles only while the first forward and the last backward run on
// the light one (F + 2F), so the step is 3(kM + 1) of the light stage's
// forwards against 3M(1 + k) of work.
TEST(PipelineSchedule, PredictionOfAHeavyLastStage) {
  for (int m : {4, 8, 16})
    for (double k : {1.0, 1.5, 2.2}) {
      PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, m);
      auto prediction = predictPipeline(schedule, {1, k});
      ASSERT_TRUE(prediction.isOk()) << prediction.status().message();
      double step = 3 * (k * m + 1), work = 3 * m * (1 + k);
      EXPECT_NEAR(prediction->stepOverOneRank, step / work, 2e-3)
          << "M" << m << " k" << k;
      EXPECT_NEAR(prediction->bubble, 1 - work / (2 * step), 2e-3)
          << "M" << m << " k" << k;
      EXPECT_NEAR(prediction->stageShare[1], k / (1 + k), 1e-12);
    }
  auto wrong = predictPipeline(make(PipelineScheduleKind::OneFOneB, 2, 1, 4),
                               {1, 1, 1});
  ASSERT_FALSE(wrong.isOk());
  EXPECT_NE(wrong.status().message().find("3 stage costs for 2 stages"),
            std::string::npos)
      << wrong.status().message();
}

TEST(PipelineSchedule, PredictionIsDescribed) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  auto prediction = predictPipeline(schedule, {1, 1});
  ASSERT_TRUE(prediction.isOk());
  std::string text = describePrediction(schedule, *prediction);
  EXPECT_NE(text.find("predicted bubble 20.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("predicted step 0.625 of one rank's: 1.600x its "
                      "tokens/s, 0.800 per rank"),
            std::string::npos)
      << text;
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

// Times: two equal stages (forward 1, backward 2) take 1F1B's 3(M + 1);
// the optimizer runs after the schedule, the slowest rank's setting the
// step, while one rank runs the whole of it after 6M of work; so the
// bubble is 1 - (6M + 0.75) / (2 (3(M + 1) + 0.5)).
TEST(PipelineSchedule, PredictionWithOptimizerAndTransfers) {
  PipelineSchedule schedule = make(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  std::vector<PipeStageTime> stages{{1, 2}, {1, 2}};
  auto plain = predictPipelineTimes(schedule, stages, 0, {0.5, 0.25}, 0.75);
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  double step = 3 * 5 + 0.5, oneRank = 6 * 4 + 0.75;
  EXPECT_NEAR(plain->stepOverOneRank, step / oneRank, 1e-9);
  EXPECT_NEAR(plain->bubble, 1 - oneRank / (2 * step), 1e-9);
  EXPECT_NEAR(plain->stageShare[0], 0.5, 1e-12);
  // A transfer a microbatch on the critical path lengthens the step and
  // counts as bubble; one rank never pays it.
  auto sent = predictPipelineTimes(schedule, stages, 0.1, {0.5, 0.25}, 0.75);
  ASSERT_TRUE(sent.isOk()) << sent.status().message();
  EXPECT_GE(sent->stepOverOneRank, plain->stepOverOneRank + 0.1 / oneRank - 1e-9);
  EXPECT_GT(sent->bubble, plain->bubble);
  // predictPipeline is the same with backward 2x forward and nothing else.
  auto flops = predictPipeline(schedule, {1, 1});
  auto times = predictPipelineTimes(schedule, stages, 0, {0, 0}, 0);
  ASSERT_TRUE(flops.isOk() && times.isOk());
  EXPECT_NEAR(flops->bubble, times->bubble, 1e-12);
  auto tails = predictPipelineTimes(schedule, stages, 0, {0.5}, 0.75);
  ASSERT_FALSE(tails.isOk());
  EXPECT_NE(tails.status().message().find("1 optimizer times for 2 ranks"),
            std::string::npos)
      << tails.status().message();
  auto negative = predictPipelineTimes(schedule, stages, -1, {0, 0}, 0);
  ASSERT_FALSE(negative.isOk());
}

// The weight gradient's share of the backward: 1F1B runs B and W fused, so
// it changes nothing there; ZB-H1 fills its drain with the deferred W, so a
// smaller W leaves more of the bubble (the measured W of a decoder layer is
// about 0.6 of its B, not the even split).
TEST(PipelineSchedule, PredictionSplitsTheBackwardByItsWeightGradientShare) {
  PipelineSchedule oneF = make(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  PipelineSchedule zb = make(PipelineScheduleKind::ZeroBubbleH1, 2, 1, 4);
  std::vector<PipeStageTime> even{{1, 2}, {1, 2}};
  std::vector<PipeStageTime> smallW{{1, 2, 0.375}, {1, 2, 0.375}};
  auto oneFEven = predictPipelineTimes(oneF, even, 0, {0, 0}, 0);
  auto oneFSmallW = predictPipelineTimes(oneF, smallW, 0, {0, 0}, 0);
  auto zbEven = predictPipelineTimes(zb, even, 0, {0, 0}, 0);
  auto zbSmallW = predictPipelineTimes(zb, smallW, 0, {0, 0}, 0);
  ASSERT_TRUE(oneFEven.isOk() && oneFSmallW.isOk() && zbEven.isOk() &&
              zbSmallW.isOk());
  EXPECT_NEAR(oneFEven->bubble, oneFSmallW->bubble, 1e-9);
  EXPECT_GT(zbSmallW->bubble, zbEven->bubble + 0.01);
  EXPECT_LT(zbSmallW->bubble, oneFEven->bubble);
  auto whole = predictPipelineTimes(zb, {{1, 2, 1}, {1, 2, 1}}, 0, {0, 0}, 0);
  ASSERT_FALSE(whole.isOk());
  EXPECT_NE(whole.status().message().find("share of its backward"),
            std::string::npos)
      << whole.status().message();
}

// Separate B and W times: 1F1B runs them fused, so only their sum matters
// there, and two equal stages idle (P - 1)/(M + P - 1) of the time; a
// zero-bubble schedule fills the drain with the deferred W.
TEST(PipelineSchedule, SimulatesOpTimes) {
  PipelineSchedule oneF = make(PipelineScheduleKind::OneFOneB, 2, 1, 4);
  auto even = simulatePipelineTimes(oneF, {{1, 1, 1}, {1, 1, 1}}, 0);
  ASSERT_TRUE(even.isOk()) << even.status().message();
  EXPECT_NEAR(even->bubble, 1.0 / 5, 1e-9);
  EXPECT_NEAR(even->length, 3 * 5, 1e-9);
  auto shifted = simulatePipelineTimes(oneF, {{1, 1.5, 0.5}, {1, 1.5, 0.5}}, 0);
  ASSERT_TRUE(shifted.isOk());
  EXPECT_NEAR(shifted->bubble, even->bubble, 1e-9);
  PipelineSchedule zb = make(PipelineScheduleKind::ZeroBubbleH1, 2, 1, 4);
  auto zero = simulatePipelineTimes(zb, {{1, 1, 1}, {1, 1, 1}}, 0);
  ASSERT_TRUE(zero.isOk()) << zero.status().message();
  EXPECT_LT(zero->bubble, even->bubble);
  auto wrong = simulatePipelineTimes(oneF, {{1, 1, 1}}, 0);
  ASSERT_FALSE(wrong.isOk());
  EXPECT_NE(wrong.status().message().find("1 stage costs for 2 stages"),
            std::string::npos)
      << wrong.status().message();
  auto noForward = simulatePipelineTimes(oneF, {{0, 1, 1}, {1, 1, 1}}, 0);
  ASSERT_FALSE(noForward.isOk());
  EXPECT_NE(noForward.status().message().find("stage 0"), std::string::npos);
}

} // namespace
} // namespace octet
