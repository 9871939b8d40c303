// The learning-rate schedule that graph.lr_schedule and the runtime's host
// share (tests/unit/interpreter/OptimizerTest.cpp runs it through the op).

#include "support/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace octet {
namespace {

TEST(LrSchedule, WarmupRisesLinearlyToThePeak) {
  LrSchedule s{3e-4, 10, 200, 0.1};
  EXPECT_DOUBLE_EQ(learningRateAt(s, 1), 3e-5);
  EXPECT_DOUBLE_EQ(learningRateAt(s, 5), 1.5e-4);
  EXPECT_DOUBLE_EQ(learningRateAt(s, 10), 3e-4);
}

TEST(LrSchedule, CosineFallsToTheFloorAndStaysThere) {
  LrSchedule s{1.0, 4, 12, 0.1};
  EXPECT_NEAR(learningRateAt(s, 8), 0.55, 1e-15); // halfway down
  EXPECT_DOUBLE_EQ(learningRateAt(s, 12), 0.1);
  // Past total_steps the progress is clamped: the floor, not a new cycle.
  EXPECT_DOUBLE_EQ(learningRateAt(s, 13), 0.1);
  EXPECT_DOUBLE_EQ(learningRateAt(s, 1000), 0.1);
  for (int64_t step = 5; step <= 12; ++step)
    EXPECT_LT(learningRateAt(s, step), learningRateAt(s, step - 1)) << step;
}

TEST(LrSchedule, WithoutWarmupStartsAtThePeak) {
  LrSchedule s{2.0, 0, 100, 0.0};
  EXPECT_DOUBLE_EQ(learningRateAt(s, 0), 2.0);
  // Before the first step the progress is clamped at 0: still the peak.
  EXPECT_DOUBLE_EQ(learningRateAt(s, -5), 2.0);
  EXPECT_NEAR(learningRateAt(s, 50), 1.0, 1e-15);
  // A negative warmup (never valid in a graph) counts as none.
  EXPECT_DOUBLE_EQ(learningRateAt({2.0, -3, 100, 0.0}, 50),
                   learningRateAt(s, 50));
}

TEST(LrSchedule, WarmupAsLongAsTheRunNeverDivides) {
  // total − warmup ≤ 0: the decay span is at least one step.
  LrSchedule s{1.0, 20, 20, 0.5};
  EXPECT_DOUBLE_EQ(learningRateAt(s, 20), 1.0);
  EXPECT_DOUBLE_EQ(learningRateAt(s, 21), 0.5);
}

} // namespace
} // namespace octet
