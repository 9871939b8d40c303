#include "runtime/exec/PipelineTimeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace octet {
namespace {

// Op kinds in the sums, each a (time, count) pair.
enum StageKind { kForward, kInputGradient, kWeightGradient, kFused };
// Per-rank fields.
enum RankField { kBusy, kSpan, kSteps, kTransfer, kTransferSteps };

int stageKindOf(bundle::PipeInstructionKind kind) {
  switch (kind) {
  case bundle::PIPE_FORWARD:
    return kForward;
  case bundle::PIPE_INPUT_GRADIENT:
    return kInputGradient;
  case bundle::PIPE_WEIGHT_GRADIENT:
    return kWeightGradient;
  case bundle::PIPE_BACKWARD:
    return kFused;
  default:
    return -1;
  }
}

} // namespace

PipelineTimeline::PipelineTimeline(int ranks, int virtualStages)
    : ranks_(ranks), stages_(ranks * virtualStages),
      sums_(size_t(stages_ * 8 + ranks * 5), 0) {}

Status PipelineTimeline::add(const PipelineRankPlan &plan,
                             const std::vector<PipeOpTiming> &timings) {
  if (timings.size() != plan.work.size())
    return Status::error("pipeline timeline: " +
                         std::to_string(timings.size()) + " timings for " +
                         std::to_string(plan.work.size()) + " instructions");
  if (plan.pipelineRank < 0 || plan.pipelineRank >= ranks_)
    return Status::error("pipeline timeline: rank " +
                         std::to_string(plan.pipelineRank) + " of " +
                         std::to_string(ranks_));
  double busy = 0, span = 0;
  double shortestGroup = std::numeric_limits<double>::infinity();
  for (const PipeWork &w : plan.work) {
    const PipeOpTiming &t = timings[w.index];
    double took = double(t.endMs) - double(t.beginMs);
    if (w.communicate()) {
      shortestGroup = std::min(shortestGroup, took);
      continue;
    }
    int kind = stageKindOf(w.instruction->kind());
    int stage = int(w.instruction->chunk()) * ranks_ + plan.pipelineRank;
    if (kind < 0 || stage >= stages_)
      return Status::error("pipeline timeline: instruction " +
                           std::to_string(w.index) +
                           " is no compute instruction of a known stage");
    sums_[stageAt(stage, kind)] += took;
    sums_[stageAt(stage, kind) + 1] += 1;
    busy += took;
    span = std::max(span, double(t.endMs));
  }
  int r = plan.pipelineRank;
  sums_[rankAt(r, kBusy)] += busy;
  sums_[rankAt(r, kSpan)] += span;
  sums_[rankAt(r, kSteps)] += 1;
  if (std::isfinite(shortestGroup)) {
    sums_[rankAt(r, kTransfer)] += shortestGroup;
    sums_[rankAt(r, kTransferSteps)] += 1;
  }
  return Status::ok();
}

StatusOr<PipeTimelineSummary>
PipelineTimeline::summarize(const PipelineSchedule &schedule) const {
  if (schedule.ranks != ranks_ || schedule.ranks * schedule.virtualStages != stages_)
    return Status::error("pipeline timeline: the schedule's shape is not the "
                         "timeline's");
  PipeTimelineSummary out;
  double longest = 0, busyTotal = 0, transfer = 0, transferSteps = 0;
  for (int r = 0; r < ranks_; ++r) {
    double steps = sums_[rankAt(r, kSteps)];
    if (steps <= 0)
      return Status::error("pipeline timeline: rank " + std::to_string(r) +
                           " timed no step");
    out.steps = int(steps);
    out.busy.push_back(sums_[rankAt(r, kBusy)] / steps);
    out.span.push_back(sums_[rankAt(r, kSpan)] / steps);
    busyTotal += out.busy.back();
    longest = std::max(longest, out.span.back());
    transfer += sums_[rankAt(r, kTransfer)];
    transferSteps += sums_[rankAt(r, kTransferSteps)];
  }
  out.transfer = transferSteps > 0 ? transfer / transferSteps : 0;
  out.measuredBubble = 1 - busyTotal / (double(ranks_) * longest);
  auto mean = [&](int stage, int kind) {
    double n = sums_[stageAt(stage, kind) + 1];
    return n > 0 ? sums_[stageAt(stage, kind)] / n : 0.0;
  };
  for (int s = 0; s < stages_; ++s) {
    PipeOpTimes t;
    t.forward = mean(s, kForward);
    t.inputGradient = mean(s, kInputGradient) + mean(s, kFused) / 2;
    t.weightGradient = mean(s, kWeightGradient) + mean(s, kFused) / 2;
    out.stageTimes.push_back(t);
  }
  auto run = simulatePipelineTimes(schedule, out.stageTimes, out.transfer);
  if (!run)
    return run.status().withContext("the pipeline timeline's prediction");
  out.predictedBubble = run->bubble;
  return out;
}

std::string describeTimeline(const PipeTimelineSummary &s) {
  char buffer[160];
  std::string ranks, stages;
  for (size_t r = 0; r < s.busy.size(); ++r) {
    std::snprintf(buffer, sizeof buffer, "%srank %zu busy %.1f of %.1f ms",
                  r ? ", " : "", r, s.busy[r], s.span[r]);
    ranks += buffer;
  }
  for (size_t i = 0; i < s.stageTimes.size(); ++i) {
    const PipeOpTimes &t = s.stageTimes[i];
    std::snprintf(buffer, sizeof buffer, "%sstage %zu F %.2f B %.2f W %.2f",
                  i ? ", " : "", i, t.forward, t.inputGradient,
                  t.weightGradient);
    stages += buffer;
  }
  std::snprintf(buffer, sizeof buffer,
                "pipeline timeline: %d steps, measured bubble %.1f%%, the "
                "schedule with these op times predicts %.1f%%",
                s.steps, s.measuredBubble * 100, s.predictedBubble * 100);
  std::string line = buffer;
  std::snprintf(buffer, sizeof buffer, "; transfer %.3f ms", s.transfer);
  return line + " (" + ranks + " a step; ms a microbatch: " + stages +
         buffer + ")";
}

} // namespace octet
