#include "runtime/core/Launch.h"

namespace octet {

StatusOr<PreparedLaunch> PreparedLaunch::prepare(CUfunction function,
                                                 const LaunchConfig &config,
                                                 std::vector<KernelParam> params,
                                                 std::string label) {
  if (config.cluster == 0 || config.cluster > kMaxPortableCluster ||
      config.grid[0] % config.cluster != 0)
    return Status::error(
        "launching " + label + ": a cluster of " +
        std::to_string(config.cluster) + " blocks for a grid of " +
        std::to_string(config.grid[0]) + " along x; a cluster must be 1 to " +
        std::to_string(kMaxPortableCluster) +
        " blocks and divide the grid (fix the launch's `cluster` or `grid`)");
  PreparedLaunch p;
  p.function_ = function;
  p.config_ = config;
  p.params_ = std::move(params);
  p.label_ = std::move(label);
  if (config.dynamicSharedBytes > 48 * 1024)
    OCTET_CHECK_CUDA(cuFuncSetAttribute(
        function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        int(config.dynamicSharedBytes)));
  p.bindPointers();
  return p;
}

PreparedLaunch &PreparedLaunch::operator=(PreparedLaunch &&other) noexcept {
  function_ = other.function_;
  config_ = other.config_;
  params_ = std::move(other.params_);
  label_ = std::move(other.label_);
  // The pointer array points into params_, whose storage moved with it, but
  // rebinding keeps this independent of vector move semantics.
  bindPointers();
  return *this;
}

void PreparedLaunch::bindPointers() {
  pointers_.clear();
  for (KernelParam &k : params_) {
    switch (k.kind) {
    case KernelParam::Kind::Pointer:
      pointers_.push_back(&k.pointer);
      break;
    case KernelParam::Kind::I32:
      pointers_.push_back(&k.i32);
      break;
    case KernelParam::Kind::I64:
      pointers_.push_back(&k.i64);
      break;
    case KernelParam::Kind::U32:
      pointers_.push_back(&k.u32);
      break;
    case KernelParam::Kind::U64:
      pointers_.push_back(&k.u64);
      break;
    case KernelParam::Kind::F32:
      pointers_.push_back(&k.f32);
      break;
    case KernelParam::Kind::TensorMap:
      pointers_.push_back(&k.tensorMap);
      break;
    }
  }
}

Status PreparedLaunch::launch(CUstream stream) const {
  if (config_.cluster > 1 || config_.programmatic) {
    CUlaunchAttribute attrs[2]{};
    unsigned numAttrs = 0;
    if (config_.cluster > 1) {
      CUlaunchAttribute &cluster = attrs[numAttrs++];
      cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      cluster.value.clusterDim.x = config_.cluster;
      cluster.value.clusterDim.y = 1;
      cluster.value.clusterDim.z = 1;
    }
    if (config_.programmatic) {
      CUlaunchAttribute &dependent = attrs[numAttrs++];
      dependent.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      dependent.value.programmaticStreamSerializationAllowed = 1;
    }
    CUlaunchConfig cfg{};
    cfg.gridDimX = config_.grid[0], cfg.gridDimY = config_.grid[1];
    cfg.gridDimZ = config_.grid[2];
    cfg.blockDimX = config_.block[0], cfg.blockDimY = config_.block[1];
    cfg.blockDimZ = config_.block[2];
    cfg.sharedMemBytes = config_.dynamicSharedBytes;
    cfg.hStream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = numAttrs;
    CUresult r = cuLaunchKernelEx(&cfg, function_,
                                  const_cast<void **>(pointers_.data()),
                                  nullptr);
    if (r != CUDA_SUCCESS)
      return cudaDriverError(r, "cuLaunchKernelEx", __FILE__, __LINE__)
          .withContext("launching " + label_);
    return Status::ok();
  }
  CUresult r = cuLaunchKernel(
      function_, config_.grid[0], config_.grid[1], config_.grid[2],
      config_.block[0], config_.block[1], config_.block[2],
      config_.dynamicSharedBytes, stream,
      const_cast<void **>(pointers_.data()), nullptr);
  if (r != CUDA_SUCCESS)
    return cudaDriverError(r, "cuLaunchKernel", __FILE__, __LINE__)
        .withContext("launching " + label_);
  return Status::ok();
}

} // namespace octet
