#ifndef OCTET_RUNTIME_EXEC_RUNTIMEBACKEND_H
#define OCTET_RUNTIME_EXEC_RUNTIMEBACKEND_H

// The training loop's backend on the GPU: programs, slot copies on the
// runtime's main stream, pinned staging buffers, device memory in use.

#include "runtime/exec/Runtime.h"
#include "runtime/exec/TrainBackend.h"

namespace octet {

class RuntimeBackend : public TrainBackend {
public:
  explicit RuntimeBackend(Runtime &runtime) : rt_(runtime) {}

  const bundle::Bundle &bundle() const override { return rt_.bundle(); }
  const bundle::Program *program(bundle::ProgramKind kind) const override {
    return rt_.program(kind);
  }
  Status run(bundle::ProgramKind kind, RunMode mode) override {
    return mode.graph
               ? rt_.runGraph(kind, mode.lastMicrobatch, mode.firstMicrobatch)
               : rt_.run(kind, mode.lastMicrobatch, mode.firstMicrobatch);
  }
  Status writeSlot(uint32_t slot, const void *data, uint64_t bytes) override {
    return rt_.writeSlotAsync(slot, data, bytes);
  }
  Status readSlot(uint32_t slot, void *data, uint64_t bytes) override {
    return rt_.readSlotAsync(slot, data, bytes);
  }
  Status zeroSlot(uint32_t slot) override;
  Status synchronize() override { return rt_.synchronize(); }
  StatusOr<std::unique_ptr<HostBuffer>> hostBuffer(uint64_t bytes) override;
  DeviceMemory memory() const override;
  std::string deviceName() const override { return rt_.device().name(); }
  const PipelineRankPlan *pipelinePlan() const override {
    return rt_.pipelinePlan();
  }
  Status runPipelineStep(
      const PipelineRankPlan &plan,
      const std::function<Status(const PipeWork &)> &feed) override {
    return rt_.runPipelineStep(plan, feed);
  }
  StatusOr<std::vector<PipeOpTiming>> pipelineTimings() override {
    return rt_.pipelineTimings();
  }
  Status beginTimeline() override { return rt_.beginTimeline(); }
  Status endTimeline() override { return rt_.endTimeline(); }
  Status writeSlotAt(uint32_t slot, uint64_t offset, const void *data,
                     uint64_t bytes) override {
    return rt_.writeSlotAtAsync(slot, offset, data, bytes);
  }

private:
  Runtime &rt_;
};

} // namespace octet

#endif
