#ifndef OCTET_RUNTIME_EXEC_TRAINBACKEND_H
#define OCTET_RUNTIME_EXEC_TRAINBACKEND_H

// What the training loop needs of the machine that runs a bundle's
// programs. The GPU runtime is one implementation (RuntimeBackend); tests
// use one in host memory, so the loop's logic (feeding, accumulation,
// evaluation, checkpoints, resume) is tested without a GPU.
//
// Ordering: writes, program runs and reads are enqueued in call order on one
// queue. A host buffer handed to writeSlot or readSlot must stay valid, and
// a read's result is only there, after synchronize().

#include "bundle/bundle.pb.h"
#include "runtime/exec/PipelineExecutor.h"
#include "support/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace octet {


class HostBuffer {
public:
  virtual ~HostBuffer() = default;
  virtual void *data() = 0;
  virtual uint64_t bytes() const = 0;
};

struct DeviceMemory {
  // Bytes in use on the device (all processes); 0 when unknown.
  uint64_t used = 0;
  uint64_t total = 0;
  // The plan's arenas, and what the runtime holds besides them.
  uint64_t arenas = 0;
  uint64_t fixedCosts = 0;
};

// How a program runs.
struct RunMode {
  // Replay a captured graph (captured on first use) rather than launching
  // step by step.
  bool graph = false;
  // This run of TRAIN_MICROBATCH completes the step's gradient
  // accumulation: its collectives marked last_microbatch run.
  bool lastMicrobatch = true;
  // It starts the step: GEMMs marked first_microbatch_overwrites write
  // their gradient accumulators rather than add to them.
  bool firstMicrobatch = true;
};

class TrainBackend {
public:
  virtual ~TrainBackend() = default;
  virtual const bundle::Bundle &bundle() const = 0;
  // This rank's program of that kind, or null.
  virtual const bundle::Program *program(bundle::ProgramKind kind) const = 0;
  bool hasProgram(bundle::ProgramKind kind) const {
    return program(kind) != nullptr;
  }
  virtual Status run(bundle::ProgramKind kind, RunMode mode) = 0;
  // The whole slot, or `bytes` from its start.
  virtual Status writeSlot(uint32_t slot, const void *data, uint64_t bytes) = 0;
  virtual Status readSlot(uint32_t slot, void *data, uint64_t bytes) = 0;
  // Sets every byte of the slot to zero (enqueued like a write).
  virtual Status zeroSlot(uint32_t slot) = 0;
  virtual Status synchronize() = 0;
  // Host memory the device copies from and to without staging (pinned on a
  // GPU).
  virtual StatusOr<std::unique_ptr<HostBuffer>> hostBuffer(uint64_t bytes) = 0;
  virtual DeviceMemory memory() const = 0;
  // The device's name as its driver gives it ("NVIDIA H100 80GB HBM3").
  virtual std::string deviceName() const = 0;

  // A pipeline bundle's rank (runtime/exec/PipelineExecutor.h): its plan,
  // null where the bundle has no pipeline.
  virtual const PipelineRankPlan *pipelinePlan() const { return nullptr; }
  // Enqueues the rank's step: `plan`'s instruction list in order (the
  // rank's training plan, or its evaluation plan: planPipelineEvaluation),
  // `feed(work)` called before each compute instruction whose program takes
  // inputs, once the instruction's stash entry is free, to enqueue them
  // (writeSlotAt) ahead of the program.
  virtual Status
  runPipelineStep(const PipelineRankPlan &plan,
                  const std::function<Status(const PipeWork &)> &feed) {
    (void)plan, (void)feed;
    return Status::error("this backend runs no pipeline step");
  }
  // The last pipeline step's instruction times, by work index (after it
  // has finished); a backend that does not time its steps fails.
  virtual StatusOr<std::vector<PipeOpTiming>> pipelineTimings() {
    return Status::error("this backend does not time its pipeline steps");
  }
  // The device timeline of one training step (octet-run --timeline): the
  // programs run between the two calls are recorded; endTimeline is
  // called once the step has been synchronized.
  virtual Status beginTimeline() {
    return Status::error("this backend records no step timeline");
  }
  virtual Status endTimeline() {
    return Status::error("this backend records no step timeline");
  }
  // `bytes` at `offset` of the slot (a stash entry), enqueued like a write.
  virtual Status writeSlotAt(uint32_t slot, uint64_t offset, const void *data,
                             uint64_t bytes) {
    (void)slot, (void)offset, (void)data, (void)bytes;
    return Status::error("this backend writes whole slots only");
  }
};

} // namespace octet

#endif
