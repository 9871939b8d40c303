#include "runtime/core/Arena.h"

#include "support/Bytes.h"

#include <algorithm>

namespace octet {

StatusOr<std::unique_ptr<Arena>> Arena::create(const Device &device,
                                               const std::string &name,
                                               uint64_t bytes,
                                               std::vector<ArenaSlot> slots,
                                               const DeviceAllocator *allocator) {
  constexpr uint64_t kGranule = uint64_t(2) << 20;
  uint64_t rounded = (std::max<uint64_t>(bytes, 1) + kGranule - 1) /
                     kGranule * kGranule;
  std::unique_ptr<Arena> a(new Arena());
  a->name_ = name;
  a->bytes_ = rounded;
  a->slots_ = std::move(slots);
  if (allocator) {
    auto base = allocator->allocate(rounded);
    if (!base)
      return base.status().withContext("arena '" + name + "' (" +
                                       allocator->name + ")");
    if (*base) {
      a->base_ = *base;
      a->release_ = allocator->release;
      return a;
    }
  } else {
    CUresult r = cuMemAlloc(&a->base_, rounded);
    if (r == CUDA_SUCCESS)
      return a;
    if (r != CUDA_ERROR_OUT_OF_MEMORY)
      OCTET_CHECK_CUDA(r);
  }
  a->base_ = 0;
  size_t freeBytes = 0, total = 0;
  cuMemGetInfo(&freeBytes, &total);
  std::vector<ArenaSlot> largest = a->slots_;
  std::sort(largest.begin(), largest.end(),
            [](const ArenaSlot &x, const ArenaSlot &y) {
              return x.bytes > y.bytes;
            });
  std::string msg = "out of memory: the memory plan's arena '" + name +
                    "' needs " + humanBytes(bytes) + " (" +
                    std::to_string(bytes) + " bytes) but " +
                    device.describe() + " has " +
                    humanBytes(freeBytes) + " free of " +
                    humanBytes(total);
  if (!largest.empty()) {
    msg += "; its largest slots are";
    for (size_t i = 0; i < std::min<size_t>(3, largest.size()); ++i)
      msg += std::string(i ? "," : "") + " '" + largest[i].name + "' (" +
             humanBytes(largest[i].bytes) + ", " +
             std::to_string(largest[i].bytes) + " bytes)";
  }
  msg += ": lower micro_batch_size or seq_len in the spec, or free the GPU "
         "of other processes (nvidia-smi)";
  return Status::error(msg);
}

Arena::~Arena() {
  if (base_ && release_)
    release_(base_);
  else if (base_)
    cuMemFree(base_);
}

StatusOr<CUdeviceptr> Arena::at(uint64_t offset, uint64_t bytes) const {
  if (offset + bytes > bytes_)
    return Status::error("range [" + std::to_string(offset) + ", " +
                         std::to_string(offset + bytes) + ") is outside arena '" +
                         name_ + "' of " + std::to_string(bytes_) + " bytes");
  return base_ + offset;
}

} // namespace octet
