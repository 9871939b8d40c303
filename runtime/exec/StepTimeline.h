#ifndef OCTET_RUNTIME_EXEC_STEPTIMELINE_H
#define OCTET_RUNTIME_EXEC_STEPTIMELINE_H

// One training step as the device ran it (octet-run --timeline FILE): every
// step of every program the training step ran, each an interval on the
// stream it ran on, in ms from the start of the step's first program. The
// runtime records them with CUDA events (runtime/exec/TimelineRecorder.h);
// here they become a Chrome trace (chrome://tracing, Perfetto) and a short
// summary of how much of the communication the compute hid. No CUDA here,
// so that both are tested on the host.

#include "bundle/bundle.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

enum class TimelineKind {
  Launch,
  Gemm,
  Memset,
  Copy,
  Collective,
  // The stream stood still until another stream's step (or, at a
  // program's end, every side stream) had finished.
  Wait,
  // A program run as a whole, on the compute stream: from the compute
  // stream reaching it to the end of its join of the side streams.
  Program,
};

const char *timelineKindName(TimelineKind kind);

struct TimelineRecord {
  TimelineKind kind = TimelineKind::Launch;
  // 0: the compute stream; > 0: a communication stream.
  int stream = 0;
  // The bundle step's label; a wait names what it waits for.
  std::string label;
  double beginMs = 0, endMs = 0;
  // The program run the record belongs to: its index among the training
  // step's runs (a step runs TRAIN_MICROBATCH once a microbatch, then
  // OPTIMIZER_STEP), and its program's kind.
  int run = 0;
  bundle::ProgramKind program = bundle::ProgramKind();
  // The step's index in its program; -1 for a program's own record and
  // its closing join.
  int step = -1;
  // A GEMM's shape.
  int64_t m = 0, n = 0, k = 0;
  // A collective's operation ("all_reduce"), element type, elements and
  // the bundle group it runs over; `ncclGroup` is the number of
  // collectives issued with it as one NCCL group (they share its times).
  std::string op, dtype, group;
  uint64_t count = 0;
  int ncclGroup = 1;
};

// One program run, or the whole step (run -1).
struct TimelineRunSummary {
  int run = -1;
  bundle::ProgramKind program = bundle::ProgramKind();
  // From the earliest begin to the latest end of its records.
  double spanMs = 0;
  // By stream: how long it had a step on the device (launches, GEMMs,
  // memsets, copies, collectives; not its waits), overlapping steps
  // counted once.
  std::vector<double> busyMs;
  // How long a collective ran on a communication stream, and how much of
  // that the compute stream spent running work of its own other than
  // collectives: the communication the compute hid.
  double sideCollectiveMs = 0;
  double overlappedMs = 0;
};

struct StepTimelineSummary {
  std::vector<TimelineRunSummary> runs;
  TimelineRunSummary step;
};

StepTimelineSummary summarizeStepTimeline(
    const std::vector<TimelineRecord> &records);

// The summary as a block of lines for the log: the step, then a line per
// program run.
std::string describeStepTimeline(const StepTimelineSummary &summary,
                                 int64_t trainingStep, int rank);

// The records as a Chrome trace (JSON, {"traceEvents": [...]}): a complete
// ("X") event each, ts and dur in µs, pid the rank, tid the stream, args
// the program, run, step index and the GEMM's shape or the collective's
// operation; metadata events name the rank and its streams.
std::string stepTimelineTrace(const std::vector<TimelineRecord> &records,
                              int rank, int64_t trainingStep);

// A collective's op, dtype, count and group name into `record`.
void describeCollective(const bundle::Collective &collective,
                        const bundle::Bundle &bundle, TimelineRecord &record);

// The events a recorder marks in one training step of `rank` (each run of
// TRAIN_MICROBATCH, once a microbatch, and of OPTIMIZER_STEP): two around
// each step and two more around its waits, two for the program's span and
// its join.
size_t timelineMarksPerStep(const bundle::Bundle &bundle, int rank);

// The length of the union of [begin, end) intervals, and of the
// intersection of two such unions.
double unionMs(std::vector<std::pair<double, double>> intervals);
double overlapMs(std::vector<std::pair<double, double>> a,
                 std::vector<std::pair<double, double>> b);

} // namespace octet

#endif
