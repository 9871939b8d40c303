#ifndef OCTET_RUNTIME_CORE_DEVICE_H
#define OCTET_RUNTIME_CORE_DEVICE_H

// The GPU a rank runs on, through the CUDA driver API (the runtime uses no
// cudart, so one libcuda is all it needs from the driver).

#include "runtime/core/CudaCheck.h"
#include "support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace octet {

struct DeviceOptions {
  // -1: LOCAL_RANK from the environment (as torchrun sets it), else 0.
  int ordinal = -1;
  // octet's kernels are sm_90a: refuse anything but compute capability 9.x.
  bool requireHopper = true;
};

class Device {
public:
  // Initializes the driver, picks the device and makes its primary context
  // current on the calling thread.
  static StatusOr<std::unique_ptr<Device>> open(const DeviceOptions &options);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  // Makes the context current on the calling thread (other threads).
  Status makeCurrent() const;

  int ordinal() const { return ordinal_; }
  const std::string &name() const { return name_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  int multiprocessors() const { return sms_; }
  uint64_t totalMemory() const { return totalMemory_; }
  CUdevice handle() const { return device_; }
  CUcontext context() const { return context_; }
  // "device 0 (NVIDIA H100 80GB HBM3, sm_90)"
  std::string describe() const;
  StatusOr<uint64_t> freeMemory() const;

private:
  Device() = default;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  int ordinal_ = 0;
  int major_ = 0, minor_ = 0, sms_ = 0;
  uint64_t totalMemory_ = 0;
  std::string name_;
};

// Non-blocking stream, destroyed with its owner.
class Stream {
public:
  static StatusOr<std::unique_ptr<Stream>> create(int priority = 0);
  ~Stream();
  CUstream handle() const { return stream_; }
  Status synchronize() const;

private:
  CUstream stream_ = nullptr;
};

class Event {
public:
  static StatusOr<std::unique_ptr<Event>> create(bool timing = true);
  ~Event();
  CUevent handle() const { return event_; }
  Status record(CUstream stream) const;
  Status synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  StatusOr<float> elapsedSince(const Event &start) const;

private:
  CUevent event_ = nullptr;
};

} // namespace octet

#endif
