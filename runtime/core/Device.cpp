#include "runtime/core/Device.h"

#include "runtime/core/CudaDriver.h"

#include <cstdlib>

namespace octet {

StatusOr<std::unique_ptr<Device>> Device::open(const DeviceOptions &options) {
  OCTET_RETURN_IF_ERROR(loadCudaDriver());
  CUresult init = cuInit(0);
  if (init == CUDA_ERROR_NO_DEVICE)
    return Status::error(
        "no CUDA GPU found: octet-run needs an NVIDIA Hopper GPU (H100/H200); "
        "nvidia-smi should list one (check CUDA_VISIBLE_DEVICES)");
  OCTET_CHECK_CUDA(init);
  int count = 0;
  OCTET_CHECK_CUDA(cuDeviceGetCount(&count));
  if (count == 0)
    return Status::error("no CUDA GPU found: octet-run needs an NVIDIA Hopper "
                         "GPU (H100/H200); check CUDA_VISIBLE_DEVICES");
  int ordinal = options.ordinal;
  if (ordinal < 0) {
    ordinal = 0;
    if (const char *lr = std::getenv("LOCAL_RANK")) {
      char *end = nullptr;
      long v = std::strtol(lr, &end, 10);
      if (*lr == 0 || *end != 0 || v < 0)
        return Status::error(std::string("LOCAL_RANK='") + lr +
                             "' is not a rank number: unset it or set it to "
                             "0.." + std::to_string(count - 1));
      ordinal = int(v);
    }
  }
  if (ordinal >= count) {
    const char *vis = std::getenv("CUDA_VISIBLE_DEVICES");
    return Status::error(
        "rank wants GPU " + std::to_string(ordinal) + " (LOCAL_RANK) but only " +
        std::to_string(count) + " GPU(s) are visible" +
        (vis ? std::string(" (CUDA_VISIBLE_DEVICES=") + vis + ")" : "") +
        ": start at most one rank per GPU");
  }
  std::unique_ptr<Device> d(new Device());
  d->ordinal_ = ordinal;
  OCTET_CHECK_CUDA(cuDeviceGet(&d->device_, ordinal));
  char name[256] = {};
  OCTET_CHECK_CUDA(cuDeviceGetName(name, sizeof name, d->device_));
  d->name_ = name;
  OCTET_CHECK_CUDA(cuDeviceGetAttribute(
      &d->major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->device_));
  OCTET_CHECK_CUDA(cuDeviceGetAttribute(
      &d->minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->device_));
  OCTET_CHECK_CUDA(cuDeviceGetAttribute(
      &d->sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->device_));
  size_t total = 0;
  OCTET_CHECK_CUDA(cuDeviceTotalMem(&total, d->device_));
  d->totalMemory_ = total;
  if (options.requireHopper && d->major_ != 9)
    return Status::error(d->describe() +
                         " is not a Hopper GPU: octet's kernels and FP8 "
                         "GEMMs are built for sm_90a (H100/H200); run on one, "
                         "or select it with CUDA_VISIBLE_DEVICES");
  OCTET_CHECK_CUDA(cuDevicePrimaryCtxRetain(&d->context_, d->device_));
  OCTET_CHECK_CUDA(cuCtxSetCurrent(d->context_));
  return d;
}

Device::~Device() {
  if (context_)
    cuDevicePrimaryCtxRelease(device_);
}

Status Device::makeCurrent() const {
  OCTET_CHECK_CUDA(cuCtxSetCurrent(context_));
  return Status::ok();
}

std::string Device::describe() const {
  return "device " + std::to_string(ordinal_) + " (" + name_ + ", sm_" +
         std::to_string(major_) + std::to_string(minor_) + ")";
}

StatusOr<uint64_t> Device::freeMemory() const {
  size_t free = 0, total = 0;
  OCTET_CHECK_CUDA(cuMemGetInfo(&free, &total));
  return uint64_t(free);
}

StatusOr<std::unique_ptr<Stream>> Stream::create(int priority) {
  std::unique_ptr<Stream> s(new Stream());
  OCTET_CHECK_CUDA(
      cuStreamCreateWithPriority(&s->stream_, CU_STREAM_NON_BLOCKING, priority));
  return s;
}

Stream::~Stream() {
  if (stream_)
    cuStreamDestroy(stream_);
}

Status Stream::synchronize() const {
  OCTET_CHECK_CUDA(cuStreamSynchronize(stream_));
  return Status::ok();
}

StatusOr<std::unique_ptr<Event>> Event::create(bool timing) {
  std::unique_ptr<Event> e(new Event());
  OCTET_CHECK_CUDA(
      cuEventCreate(&e->event_, timing ? CU_EVENT_DEFAULT
                                       : CU_EVENT_DISABLE_TIMING));
  return e;
}

Event::~Event() {
  if (event_)
    cuEventDestroy(event_);
}

Status Event::record(CUstream stream) const {
  OCTET_CHECK_CUDA(cuEventRecord(event_, stream));
  return Status::ok();
}

Status Event::synchronize() const {
  OCTET_CHECK_CUDA(cuEventSynchronize(event_));
  return Status::ok();
}

StatusOr<float> Event::elapsedSince(const Event &start) const {
  float ms = 0;
  OCTET_CHECK_CUDA(cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

} // namespace octet
