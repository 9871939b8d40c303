#ifndef OCTET_RUNTIME_EXEC_PROGRAMTIMES_H
#define OCTET_RUNTIME_EXEC_PROGRAMTIMES_H

// Device time of each program run (RuntimeOptions.programTimes), and its
// summary for octet-run's --json: where a data-parallel step loses time to
// communication its compute did not hide. No CUDA here, so that the summary
// is tested on the host.

#include "bundle/bundle.pb.h"

#include <cstdint>
#include <vector>

namespace octet {

// One program run: from the main stream reaching it to the end of its join
// of the side streams, and the part of that after the main stream's own
// last step, spent waiting for the communication stream (0 for a program
// without side streams); and the time the main stream spent in its own
// collectives (from before their waits to their end: a collective issued
// on the compute stream waits for the ones issued before it on the same
// communicator).
struct ProgramTime {
  bundle::ProgramKind kind = bundle::ProgramKind();
  double ms = 0;
  double joinWaitMs = 0;
  double mainCollectiveMs = 0;
};

// A kind's runs of the timed steps: the medians of both times.
struct ProgramTimeSummary {
  bundle::ProgramKind kind = bundle::ProgramKind();
  int64_t runs = 0;
  double medianMs = 0;
  double medianJoinWaitMs = 0;
  double medianMainCollectiveMs = 0;
};

// `runs` are every timed run of `steps` training steps in order, the last
// `timedSteps` of which are summarized: of each kind that ran the same
// number of times in every step (the train microbatch, the optimizer
// step), its last timedSteps × (its runs / steps) runs; each time's own
// median. A kind whose runs
// do not divide by the steps (an evaluation every few steps, the
// initialization) is left out. In the order the kinds first ran.
std::vector<ProgramTimeSummary>
summarizeProgramTimes(const std::vector<ProgramTime> &runs, int64_t steps,
                      int64_t timedSteps);

} // namespace octet

#endif
