#ifndef OCTET_TOOLS_OCTET_MEMORYFIT_H
#define OCTET_TOOLS_OCTET_MEMORYFIT_H

// Whether a bundle's memory plan fits a GPU, and, when it does not, which
// change that the compiler honours today would make it fit, found by
// planning the changed spec (not by scaling numbers).
//
// What a run needs on the device: the plan's arena (persistent region +
// activation region) plus the runtime's fixed costs (CUDA context,
// cuBLASLt workspace, kernel modules), which octet-run measured at
// 530.8 MiB on an H100 (bench/results/h100/*.log, "runtime fixed costs").

#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace octet {

struct GpuTarget {
  std::string name; // "H100 80GB", or "GPU of " and the size as given
  uint64_t bytes = 0; // device memory the driver reports
};

// The runtime's fixed costs beside the arena, rounded up from the measured
// 530.8 MiB.
constexpr uint64_t kRuntimeFixedBytes = 531ull << 20;

// The default target: an H100 80GB, 79.18 GiB as the driver reports it.
GpuTarget defaultGpuTarget();

// "h100", "h200", or a size: "80GB" (10^9), "141GiB" (2^30), "81559MiB".
// The error names --gpu-memory and what it takes.
StatusOr<GpuTarget> parseGpuTarget(const std::string &text);

// A memory plan's two regions.
struct PlanFootprint {
  uint64_t persistentBytes = 0;
  uint64_t activationBytes = 0;
  // A pipeline's Stash slots (edges, stashes and inputs of the microbatches
  // in flight), after the activation region.
  uint64_t stashBytes = 0;
  uint64_t arenaBytes() const {
    return persistentBytes + activationBytes + stashBytes;
  }
  uint64_t deviceBytes() const { return arenaBytes() + kRuntimeFixedBytes; }
};

bool fits(const PlanFootprint &plan, const GpuTarget &gpu);

// What `octet compile --memory-plan` and `octet inspect` both print of a
// plan, in the same words, so that their numbers can be compared: the
// arena as persistent + activation region, the program that sets the
// region (its peak live bytes; the rest is fragmentation), and the sum of
// every program's activation slots, which is larger than the region because
// slots live at different steps share bytes.
struct PlanSummary : PlanFootprint {
  std::string regionProgram;
  uint64_t regionPeakLiveBytes = 0;
  uint64_t activationSlotBytes = 0; // summed over every program's slots
  uint64_t activationSlots = 0;
};
void printPlanSummary(const PlanSummary &plan, std::ostream &os);

// One line: "fits an H100 80GB (79.18 GiB): needs ..., ... to spare" or
// "does not fit ...: needs ..., ... more than it has".
void printFitVerdict(const PlanFootprint &plan, const GpuTarget &gpu,
                     std::ostream &os, const char *indent = "  ");

// The spec's sizes that the search may change, and a planner for them.
struct FitKnobs {
  int64_t microBatch = 1;
  int64_t globalBatch = 1;
  int64_t dataRanks = 1;
  int64_t numLayers = 1;
};
// Plans the spec with `microBatch` and `numLayers` set: the footprint, or
// an error (which the search reports and stops at).
using Replan = std::function<StatusOr<PlanFootprint>(int64_t microBatch,
                                                     int64_t numLayers)>;

// For a plan that does not fit: the largest micro batch (dividing the
// global batch per rank, so the global batch stays) whose plan fits; when
// the persistent region alone is too large, or no micro batch fits, says so
// and which layer count would fit at the smallest micro batch, as the
// compiler shards only the AdamW moments and cannot yet split layers across
// GPUs or recompute activations. Prints its findings, a line each.
Status suggestFit(const PlanFootprint &plan, const GpuTarget &gpu,
                  const FitKnobs &knobs, const Replan &replan,
                  std::ostream &os);

} // namespace octet

#endif
