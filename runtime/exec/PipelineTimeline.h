#ifndef OCTET_RUNTIME_EXEC_PIPELINETIMELINE_H
#define OCTET_RUNTIME_EXEC_PIPELINETIMELINE_H

// The measured bubble of a pipeline job and the one its schedule predicts
// from the same run's op times (octet-run --pipeline-timeline).
//
// Each rank times every instruction of its step with CUDA events
// (Runtime::pipelineTimings) and adds the steps up here: per global stage
// and op kind the time and count of its compute instructions, per rank its
// busy time (compute instructions only), its span (from the step's start
// to its last compute instruction's end) and the shortest communication
// group of each step, the closest thing to a transfer that waited for
// nobody. The pipeline group sums the ranks' vectors (every rank fills
// only its own entries), and any rank then describes the job: the measured
// bubble, 1 - the ranks' busy time over P x the longest span, and the
// schedule's prediction, the simulator (support/PipelineSchedule.h) run
// with every stage's mean op times and that transfer. A gap between the
// two is time the runtime lost that the schedule does not explain: waits
// on communication, launch gaps, a rank starting late.

#include "runtime/exec/PipelineExecutor.h"
#include "support/PipelineSchedule.h"
#include "support/Status.h"

#include <string>
#include <vector>

namespace octet {

struct PipeTimelineSummary {
  int steps = 0;
  double measuredBubble = 0;
  double predictedBubble = 0;
  // Per rank, ms a step.
  std::vector<double> busy, span;
  // Per global stage, ms a microbatch; a fused BW is split evenly into
  // inputGradient and weightGradient.
  std::vector<PipeOpTimes> stageTimes;
  double transfer = 0;
};

class PipelineTimeline {
public:
  PipelineTimeline(int ranks, int virtualStages);
  // One step of this rank: `timings` by work index, as
  // Runtime::pipelineTimings gives them.
  Status add(const PipelineRankPlan &plan,
             const std::vector<PipeOpTiming> &timings);
  // What the pipeline group sums over its ranks.
  std::vector<double> &sums() { return sums_; }
  StatusOr<PipeTimelineSummary>
  summarize(const PipelineSchedule &schedule) const;

private:
  // Where a stage's (time, count) pair of an op kind, and a rank's field,
  // lie in sums_.
  size_t stageAt(int stage, int kind) const { return size_t(stage * 8 + 2 * kind); }
  size_t rankAt(int rank, int field) const {
    return size_t(stages_ * 8 + rank * 5 + field);
  }
  int ranks_, stages_;
  std::vector<double> sums_;
};

// "pipeline timeline: N steps, measured bubble X% (...), the schedule with
// these op times predicts Y% (...)".
std::string describeTimeline(const PipeTimelineSummary &summary);

} // namespace octet

#endif
