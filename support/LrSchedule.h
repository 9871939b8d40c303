#ifndef OCTET_SUPPORT_LRSCHEDULE_H
#define OCTET_SUPPORT_LRSCHEDULE_H

// The learning-rate schedule of a training run, written once: graph.lr_schedule
// computes it in the compiled step (the reference interpreter calls this, the
// GPU kernel lowers the same formula in float32), and the runtime's host
// uses it where a bundle takes or reports the rate without that op.

#include <cstdint>

namespace octet {

struct LrSchedule {
  double lr = 0;           // the peak rate
  int64_t warmupSteps = 0; // negative counts as 0
  int64_t totalSteps = 1;
  double minLrRatio = 0; // the floor, as a fraction of lr
};

// The rate at 1-based `step`: lr · step / warmup while step ≤ warmup, then
// lr · (r + (1 − r) · (1 + cos(π · p)) / 2) with r = minLrRatio and
// p = (step − warmup) / max(1, total − warmup) clamped to [0, 1], so steps
// past totalSteps stay at the floor.
double learningRateAt(const LrSchedule &schedule, int64_t step);

} // namespace octet

#endif
