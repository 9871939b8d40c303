#ifndef OCTET_RUNTIME_CORE_LAUNCH_H
#define OCTET_RUNTIME_CORE_LAUNCH_H

// Kernel launch from a launch record: grid, block, dynamic shared memory and
// the parameters as typed values (device pointers already resolved from plan
// slots).

#include "runtime/core/CudaCheck.h"

#include <cstdint>
#include <string>
#include <vector>

namespace octet {

struct KernelParam {
  enum class Kind { Pointer, I32, I64, U32, U64, F32, TensorMap };
  Kind kind = Kind::Pointer;
  // Storage for every kind; the launch passes the address of the member the
  // kind selects, as cuLaunchKernel expects.
  CUdeviceptr pointer = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  float f32 = 0;
  // Passed by value: the launch copies its 128 bytes into the parameter
  // space (a __grid_constant__ CUtensorMap, 64-byte aligned there as here).
  CUtensorMap tensorMap{};

  static KernelParam ptr(CUdeviceptr p) {
    KernelParam k;
    k.pointer = p;
    return k;
  }
  static KernelParam fromI32(int32_t v) {
    KernelParam k;
    k.kind = Kind::I32;
    k.i32 = v;
    return k;
  }
  static KernelParam fromI64(int64_t v) {
    KernelParam k;
    k.kind = Kind::I64;
    k.i64 = v;
    return k;
  }
  static KernelParam fromU32(uint32_t v) {
    KernelParam k;
    k.kind = Kind::U32;
    k.u32 = v;
    return k;
  }
  static KernelParam fromU64(uint64_t v) {
    KernelParam k;
    k.kind = Kind::U64;
    k.u64 = v;
    return k;
  }
  static KernelParam fromTensorMap(const CUtensorMap &map) {
    KernelParam k;
    k.kind = Kind::TensorMap;
    k.tensorMap = map;
    return k;
  }
  static KernelParam fromF32(float v) {
    KernelParam k;
    k.kind = Kind::F32;
    k.f32 = v;
    return k;
  }
};

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamicSharedBytes = 0;
  // Blocks per thread block cluster along x (sm_90): consecutive blocks that
  // run at once on one GPC and share their shared memory. 1: no cluster.
  unsigned cluster = 1;
  // A programmatic dependent launch (sm_90): it may begin while the stream's
  // previous kernel runs, and waits (griddepcontrol.wait) for its results.
  bool programmatic = false;
};

// Most blocks a cluster may have without opting in to non-portable sizes.
constexpr unsigned kMaxPortableCluster = 8;

// A prepared launch: the parameter array is built once, so replaying it (or
// capturing it into a CUDA graph) costs one cuLaunchKernel.
class PreparedLaunch {
public:
  // `label` names the launch in errors. Raises the function's dynamic shared
  // memory limit when the launch needs more than the default 48 KiB. A
  // cluster must divide the grid's x and be at most kMaxPortableCluster.
  static StatusOr<PreparedLaunch> prepare(CUfunction function,
                                          const LaunchConfig &config,
                                          std::vector<KernelParam> params,
                                          std::string label);
  Status launch(CUstream stream) const;
  const std::string &label() const { return label_; }

  PreparedLaunch(PreparedLaunch &&other) noexcept { *this = std::move(other); }
  PreparedLaunch &operator=(PreparedLaunch &&other) noexcept;
  PreparedLaunch(const PreparedLaunch &) = delete;
  PreparedLaunch &operator=(const PreparedLaunch &) = delete;

private:
  PreparedLaunch() = default;
  void bindPointers();
  CUfunction function_ = nullptr;
  LaunchConfig config_;
  std::vector<KernelParam> params_;
  std::vector<void *> pointers_;
  std::string label_;
};

} // namespace octet

#endif
