// The summary of the program times octet-run's --json prints.

#include "runtime/exec/ProgramTimes.h"

#include <gtest/gtest.h>

using namespace octet;
using bundle::ProgramKind;

namespace {

ProgramTime run(ProgramKind kind, double ms, double wait = 0,
                double collectives = 0) {
  ProgramTime t;
  t.kind = kind;
  t.ms = ms;
  t.joinWaitMs = wait;
  t.mainCollectiveMs = collectives;
  return t;
}

} // namespace

TEST(ProgramTimes, TakesTheTimedStepsRunsOfEachKind) {
  // Initialization, then 4 steps of two microbatches and an optimizer
  // step; the first two steps are warm-up (slow), the last two timed.
  std::vector<ProgramTime> runs = {run(bundle::INIT, 500)};
  double train[4][2] = {{90, 91}, {80, 81}, {10, 12}, {11, 13}};
  double opt[4] = {70, 60, 5, 7};
  for (int s = 0; s < 4; ++s) {
    runs.push_back(run(bundle::TRAIN_MICROBATCH, train[s][0], 1, 4 - s));
    runs.push_back(run(bundle::TRAIN_MICROBATCH, train[s][1], 2, 8 - s));
    runs.push_back(run(bundle::OPTIMIZER_STEP, opt[s], s >= 2 ? 3 : 40));
  }
  auto summary = summarizeProgramTimes(runs, 4, 2);
  ASSERT_EQ(summary.size(), 2u) << "the single initialization run is left "
                                   "out: it is no step's";
  EXPECT_EQ(summary[0].kind, bundle::TRAIN_MICROBATCH);
  EXPECT_EQ(summary[0].runs, 4);
  // 10, 11, 12, 13: the upper median.
  EXPECT_DOUBLE_EQ(summary[0].medianMs, 12);
  EXPECT_DOUBLE_EQ(summary[0].medianJoinWaitMs, 2);
  // 2, 6, 1, 5.
  EXPECT_DOUBLE_EQ(summary[0].medianMainCollectiveMs, 5);
  EXPECT_EQ(summary[1].kind, bundle::OPTIMIZER_STEP);
  EXPECT_EQ(summary[1].runs, 2);
  EXPECT_DOUBLE_EQ(summary[1].medianMs, 7);
  EXPECT_DOUBLE_EQ(summary[1].medianJoinWaitMs, 3);
}

TEST(ProgramTimes, NothingWithoutTimedSteps) {
  std::vector<ProgramTime> runs = {run(bundle::TRAIN_MICROBATCH, 1)};
  EXPECT_TRUE(summarizeProgramTimes(runs, 1, 0).empty());
  EXPECT_TRUE(summarizeProgramTimes(runs, 0, 1).empty());
  EXPECT_TRUE(summarizeProgramTimes({}, 3, 2).empty());
}

TEST(ProgramTimes, MoreTimedStepsThanStepsTakesEveryRun) {
  std::vector<ProgramTime> runs = {run(bundle::OPTIMIZER_STEP, 4),
                                   run(bundle::OPTIMIZER_STEP, 6)};
  auto summary = summarizeProgramTimes(runs, 2, 5);
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].runs, 2);
  EXPECT_DOUBLE_EQ(summary[0].medianMs, 6);
}
