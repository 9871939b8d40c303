#include "runtime/exec/RuntimeBackend.h"

namespace octet {

namespace {

class PinnedBuffer : public HostBuffer {
public:
  PinnedBuffer(void *p, uint64_t bytes) : p_(p), bytes_(bytes) {}
  ~PinnedBuffer() override { cuMemFreeHost(p_); }
  void *data() override { return p_; }
  uint64_t bytes() const override { return bytes_; }

private:
  void *p_;
  uint64_t bytes_;
};

} // namespace

StatusOr<std::unique_ptr<HostBuffer>>
RuntimeBackend::hostBuffer(uint64_t bytes) {
  void *p = nullptr;
  CUresult r = cuMemAllocHost(&p, bytes);
  if (r != CUDA_SUCCESS)
    return Status::error("cannot pin " + std::to_string(bytes) +
                         " bytes of host memory for the input staging "
                         "(cuMemAllocHost failed; check ulimit -l)");
  return std::unique_ptr<HostBuffer>(new PinnedBuffer(p, bytes));
}

Status RuntimeBackend::zeroSlot(uint32_t slot) {
  bundle::SlotRef ref;
  ref.set_slot(slot);
  auto p = rt_.slotAddress(ref);
  if (!p)
    return p.status();
  OCTET_CHECK_CUDA(cuMemsetD8Async(
      *p, 0, rt_.bundle().plan().slots(int(slot)).bytes(), rt_.mainStream()));
  return Status::ok();
}

DeviceMemory RuntimeBackend::memory() const {
  DeviceMemory m;
  size_t free = 0, total = 0;
  if (cuMemGetInfo(&free, &total) == CUDA_SUCCESS) {
    m.used = total - free;
    m.total = total;
  }
  m.arenas = rt_.arenaBytes();
  m.fixedCosts = rt_.fixedCostBytes();
  return m;
}

} // namespace octet
