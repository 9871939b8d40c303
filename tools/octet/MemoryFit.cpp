#include "tools/octet/MemoryFit.h"

#include "support/Bytes.h"

#include <algorithm>
#include <cctype>

namespace octet {

namespace {

// Device memory as the driver reports it (cuMemGetInfo's total). H100:
// measured by octet-run on an H100 80GB HBM3 (79.18 GiB). H200: its
// nvidia-smi total (143771 MiB) less what the H100's driver total lacks of
// its nvidia-smi total (81559 MiB - 79.18 GiB, about 479 MiB).
constexpr uint64_t kH100Bytes = 81080ull << 20; // 79.18 GiB
constexpr uint64_t kH200Bytes = (143771ull - (81559ull - 81080ull)) << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string withMicroBatch(int64_t microBatch, const FitKnobs &k) {
  int64_t accumulation = k.globalBatch / (microBatch * k.dataRanks);
  return "train.micro_batch_size: " + std::to_string(microBatch) + " (" +
         std::to_string(accumulation) + " microbatch(es) of gradient "
         "accumulation per step, the same global batch)";
}

} // namespace

GpuTarget defaultGpuTarget() { return {"H100 80GB", kH100Bytes}; }

StatusOr<GpuTarget> parseGpuTarget(const std::string &text) {
  std::string name = lower(text);
  if (name == "h100" || name == "h100-80gb")
    return defaultGpuTarget();
  if (name == "h200" || name == "h200-141gb")
    return GpuTarget{"H200 141GB", kH200Bytes};
  uint64_t bytes = 0;
  if (!parseByteSize(text, bytes))
    return Status::error("--gpu-memory takes h100, h200 or a size such as "
                         "80GB, 141GB or 79GiB; got '" + text + "'");
  return GpuTarget{"GPU of " + text, bytes};
}

bool fits(const PlanFootprint &plan, const GpuTarget &gpu) {
  return plan.deviceBytes() <= gpu.bytes;
}

void printPlanSummary(const PlanSummary &plan, std::ostream &os) {
  os << "  arena " << humanBytes(plan.arenaBytes()) << " = persistent "
     << humanBytes(plan.persistentBytes)
     << " (parameters, gradients, optimizer and FP8 state, weight caches: "
        "live for the whole run)\n"
     << "    + activation region " << humanBytes(plan.activationBytes)
     << " (the largest program's activations packed by liveness: "
     << plan.regionProgram << ", peak live "
     << humanBytes(plan.regionPeakLiveBytes) << ")\n";
  if (plan.stashBytes)
    os << "    + stash " << humanBytes(plan.stashBytes)
       << " (every pipeline rank's Stash slots: the inputs, edges and "
          "stashes of the microbatches it holds in flight)\n";
  os << "  activation slots: " << plan.activationSlots
     << " over every program, summing to "
     << humanBytes(plan.activationSlotBytes)
     << "; not memory: slots live at different steps share the region's "
        "bytes\n";
}

void printFitVerdict(const PlanFootprint &plan, const GpuTarget &gpu,
                     std::ostream &os, const char *indent) {
  uint64_t need = plan.deviceBytes();
  os << indent << (fits(plan, gpu) ? "fits" : "does not fit") << " one " << gpu.name
     << " (" << humanBytes(gpu.bytes) << "): needs " << humanBytes(need)
     << " (arena " << humanBytes(plan.arenaBytes()) << " + "
     << humanBytes(kRuntimeFixedBytes) << " runtime fixed costs), ";
  if (need <= gpu.bytes)
    os << humanBytes(gpu.bytes - need) << " to spare\n";
  else
    os << humanBytes(need - gpu.bytes) << " more than it has\n";
}

Status suggestFit(const PlanFootprint &plan, const GpuTarget &gpu,
                  const FitKnobs &knobs, const Replan &replan,
                  std::ostream &os) {
  const std::string notYet =
      "the compiler shards only the AdamW moments across data-parallel "
      "ranks (train.parallel.shard_optimizer), cannot yet split the "
      "model across GPUs (tensor, pipeline) or recompute activations, and "
      "each data-parallel rank holds the rest of the plan";
  // Micro batches that keep the global batch: they divide its share per
  // rank. Tried from the largest below the spec's.
  int64_t perRank = knobs.globalBatch / std::max<int64_t>(1, knobs.dataRanks);
  const int64_t smallest = 1; // divides every batch
  if (plan.persistentBytes + kRuntimeFixedBytes < gpu.bytes)
    for (int64_t m = knobs.microBatch - 1; m >= 1; --m) {
      if (perRank % m)
        continue;
      StatusOr<PlanFootprint> p = replan(m, knobs.numLayers);
      if (!p)
        return p.status();
      if (fits(*p, gpu)) {
        os << "  fits with " << withMicroBatch(m, knobs) << ": needs "
           << humanBytes(p->deviceBytes()) << ", activation region "
           << humanBytes(p->activationBytes) << "\n";
        return Status::ok();
      }
    }
  if (plan.persistentBytes + kRuntimeFixedBytes >= gpu.bytes)
    os << "  no micro batch fits: the persistent region alone ("
       << humanBytes(plan.persistentBytes) << ") with the runtime's fixed "
       << "costs exceeds the GPU; " << notYet << "\n";
  else
    os << "  no micro batch fits: at train.micro_batch_size " << smallest
       << " the plan still needs more than the GPU; " << notYet << "\n";
  // What would fit of this architecture: fewer layers at the smallest micro
  // batch (a smaller model, not a layout), found by bisection.
  int64_t lo = 0, hi = knobs.numLayers; // fits(lo) (or lo = 0), !fits(hi)
  PlanFootprint best;
  while (hi - lo > 1) {
    int64_t mid = (lo + hi) / 2;
    StatusOr<PlanFootprint> p = replan(smallest, mid);
    if (!p)
      return p.status();
    if (fits(*p, gpu)) {
      lo = mid;
      best = *p;
    } else {
      hi = mid;
    }
  }
  if (lo == 0)
    os << "  not even one layer of this model fits at micro batch "
       << smallest << "\n";
  else
    os << "  this architecture with model.num_layers: " << lo << " (of "
       << knobs.numLayers << ") and train.micro_batch_size: " << smallest
       << " would fit: needs " << humanBytes(best.deviceBytes()) << "\n";
  return Status::ok();
}

} // namespace octet
