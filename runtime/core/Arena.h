#ifndef OCTET_RUNTIME_CORE_ARENA_H
#define OCTET_RUNTIME_CORE_ARENA_H

// The device memory of a memory plan: one allocation per arena, made once
// at load; slots are offsets into it. Nothing allocates after that, so the
// peak is known before step 1.

#include "runtime/core/Device.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace octet {

// What the OOM message needs to know of a plan slot.
struct ArenaSlot {
  std::string name;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// Where an arena's bytes come from when not from cuMemAlloc: NCCL's
// allocator, whose memory NCCL can register for its collectives.
struct DeviceAllocator {
  std::string name; // for messages: "ncclMemAlloc"
  // Null result and ok on out-of-memory, which Arena explains itself.
  std::function<StatusOr<CUdeviceptr>(uint64_t bytes)> allocate;
  std::function<void(CUdeviceptr)> release;
};

class Arena {
public:
  // Allocates `bytes` (rounded up to 2 MiB). On failure the message names the
  // arena, the bytes asked for, what the device has free, and the largest
  // slots, which are what to shrink.
  static StatusOr<std::unique_ptr<Arena>>
  create(const Device &device, const std::string &name, uint64_t bytes,
         std::vector<ArenaSlot> slots,
         const DeviceAllocator *allocator = nullptr);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  CUdeviceptr base() const { return base_; }
  uint64_t bytes() const { return bytes_; }
  const std::string &name() const { return name_; }
  // base + offset; the offset must be inside the arena.
  StatusOr<CUdeviceptr> at(uint64_t offset, uint64_t bytes) const;
  const std::vector<ArenaSlot> &slots() const { return slots_; }

private:
  Arena() = default;
  CUdeviceptr base_ = 0;
  uint64_t bytes_ = 0;
  std::string name_;
  std::vector<ArenaSlot> slots_;
  std::function<void(CUdeviceptr)> release_;
};

} // namespace octet

#endif
