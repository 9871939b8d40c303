#ifndef OCTET_SUPPORT_PIPELINESCHEDULE_H
#define OCTET_SUPPORT_PIPELINESCHEDULE_H

// Static pipeline-parallel schedules and the simulator that proves them.
//
// A pipeline of P ranks holds P×V chunks of the model; global stage s lives on
// rank s % P as its local chunk s / P, so activations flow s → s+1 (wrapping
// from the last rank back to rank 0 when V > 1) and their gradients s+1 → s.
// A schedule is, per rank, the list of instructions that rank issues in order:
// compute (F, B = input gradient, W = weight gradient, or BW fused) and
// communication groups (the sends and receives of one step, issued together
// like one ncclGroupStart/End). Nothing is decided at run time.
//
// The simulator steps every rank together: compute takes its configured cost,
// a group completes once each of its transfers has met the peer's matching
// one. It fails, naming the rank and the instruction, on a deadlock, a
// transfer matched against the wrong tensor, an op run before its input
// exists, or an F/B/W run twice or never.

#include "support/Status.h"

#include <string>
#include <vector>

namespace octet {

enum class PipelineScheduleKind { OneFOneB, Interleaved, ZeroBubbleH1 };

// "1f1b", "interleaved", "zb-h1".
const char *pipelineScheduleName(PipelineScheduleKind kind);

enum class PipeOpKind { F, B, W, BW, Comm };

// One transfer of a group. Activations and gradients travel on separate
// channels (one communicator each), each FIFO per ordered pair of ranks.
struct PipeTransfer {
  bool send = false;
  bool gradient = false; // false: an activation
  int peer = 0;
  int producerStage = 0; // global stage whose output this is
  int microbatch = 0;
};

struct PipeOp {
  PipeOpKind kind = PipeOpKind::F;
  int chunk = 0; // local chunk, for compute ops
  int microbatch = 0;
  std::vector<PipeTransfer> transfers; // for Comm
};

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  int ranks = 0;
  int virtualStages = 1;
  int microbatches = 0;
  // Forwards alone (evaluation): the simulator then holds every F to once
  // and refuses any B or W.
  bool forwardOnly = false;
  std::vector<std::vector<PipeOp>> perRank;
};

// Errors name the argument and the constraint: 1F1B and ZB-H1 need V = 1,
// interleaved needs V ≥ 2 and microbatches a multiple of the ranks.
StatusOr<PipelineSchedule> makePipelineSchedule(PipelineScheduleKind kind,
                                                int ranks, int virtualStages,
                                                int microbatches);

struct PipeStageCosts {
  int forward = 1;
  int inputGradient = 1;
  int weightGradient = 1;
};

// Time units of each op: every stage's forward, inputGradient and
// weightGradient, unless `perStage` lists one entry per global stage (in
// stage order), as when the chunks hold unequal work.
struct PipeCosts {
  int forward = 1;
  int inputGradient = 1;
  int weightGradient = 1;
  std::vector<PipeStageCosts> perStage;
};

struct PipeRankReport {
  int busy = 0;
  // (chunk, microbatch) pairs held: F done and W not yet (what the memory
  // plan must hold), and of those the ones whose B has not run either (the
  // full activations; W needs only the layer inputs and output gradients).
  int peakStash = 0;
  int peakAwaitingB = 0;
};

struct PipeSimulation {
  int totalTime = 0;
  double bubble = 0; // idle time over ranks × totalTime
  std::vector<PipeRankReport> perRank;
  // One row per rank, one character per time unit: F, B, W (BW shows as B
  // then W), '.' idle.
  std::vector<std::string> timeline;
};

StatusOr<PipeSimulation> simulatePipeline(const PipelineSchedule &schedule,
                                          const PipeCosts &costs = {});

// The step a schedule predicts when global stage s's forward costs
// stageForward[s] (any unit, e.g. FLOPs a microbatch) and its input- and
// weight-gradient halves as much each (a backward about twice the forward):
// predictPipelineTimes with that backward, no transfer and no optimizer.
struct PipePrediction {
  double bubble = 0;
  double stepOverOneRank = 0;
  // Each stage's share of the work (forward and backward), in stage order.
  std::vector<double> stageShare;
};
StatusOr<PipePrediction> predictPipeline(const PipelineSchedule &schedule,
                                         const std::vector<double> &stageForward);

// A stage's forward and backward of one microbatch, in seconds (or any one
// unit), and the share of the backward its weight gradient (W) takes where
// a schedule runs it apart (ZB-H1); fused schedules run the sum.
struct PipeStageTime {
  double forward = 0;
  double backward = 0;
  double weightGradientShare = 0.5;
};

// The step a schedule predicts from each global stage's times: the
// simulator runs it with the times scaled to integer units (the largest op
// 2000), the backward split into input- and weight-gradient parts by each
// stage's weightGradientShare,
// and `transfer` (an activation or its gradient between two ranks) added to
// every op whose input comes from another rank, since each step's send and
// receive block together. Rank r then runs rankTail[r] (its optimizer step)
// after the last rank's schedule ends (the gradient norm spans the
// stages); one rank would run every op one after another and then
// `oneRankTail`. The step over one rank's is T2 / T1 and the bubble
// 1 - T1 / (P T2): what 1 - tokens/s / (P x one GPU's) measures, transfers
// and the optimizer's unevenness counted as bubble.
StatusOr<PipePrediction> predictPipelineTimes(
    const PipelineSchedule &schedule, const std::vector<PipeStageTime> &stages,
    double transfer, const std::vector<double> &rankTail, double oneRankTail);

// One global stage's op times: forward, input gradient (B) and weight
// gradient (W), in seconds (or any one unit). A fused BW takes the sum.
struct PipeOpTimes {
  double forward = 0;
  double inputGradient = 0;
  double weightGradient = 0;
};

// The schedule run with those times: each op of global stage s takes
// stages[s]'s time of its kind, plus `transfer` where its input comes from
// another rank (an activation into F, a gradient into B or BW), scaled to
// integer units for the simulator (the largest op 2000). `length` is the
// time from the first op to the last rank's end; `bubble` the ranks' idle
// time over ranks x length.
struct PipeTimedRun {
  double length = 0;
  double bubble = 0;
};
StatusOr<PipeTimedRun> simulatePipelineTimes(const PipelineSchedule &schedule,
                                             const std::vector<PipeOpTimes> &stages,
                                             double transfer);

// "predicted bubble X% (BASIS)" and "predicted step ..." lines of a
// prediction.
std::string describePrediction(const PipelineSchedule &schedule,
                               const PipePrediction &prediction,
                               const std::string &basis = "backward 2x forward");

// "rank 0 | FF.BWB..." lines, then the totals.
std::string drawPipeline(const PipelineSchedule &schedule,
                         const PipeSimulation &simulation);

// "F(c1,m3)" or "COMM{send act s2 m3 ->r1, ...}", for messages.
std::string describePipeOp(const PipeOp &op);

} // namespace octet

#endif
