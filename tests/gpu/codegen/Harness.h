#ifndef OCTET_TESTS_GPU_CODEGEN_HARNESS_H
#define OCTET_TESTS_GPU_CODEGEN_HARNESS_H

// Loads what `octet-emit-ptx` wrote (kernels.json, cubins or PTX) with the
// CUDA driver API and launches kernel.fused kernels on device buffers. Used
// by the GPU tests and the bench; needs no MLIR.

#include <cuda.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace octet::gputest {

#define HARNESS_CHECK(call)                                                    \
  do {                                                                         \
    CUresult rc_ = (call);                                                     \
    if (rc_ != CUDA_SUCCESS) {                                                 \
      const char *msg_ = nullptr;                                              \
      cuGetErrorString(rc_, &msg_);                                            \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,       \
                   #call, msg_ ? msg_ : "?");                                  \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

struct BufferSpec {
  std::string name, role, dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

struct Launch {
  std::string kernel;
  unsigned grid = 0, block = 0;
  // Dynamic shared memory; blocks per thread block cluster (1: none).
  unsigned sharedBytes = 0, cluster = 1;
  // A programmatic dependent launch of the one before it.
  bool programmatic = false;
  CUfunction function = nullptr;
};

struct KernelSpec {
  std::string name, kind, module, ptx, cubin;
  std::vector<Launch> launches;
  std::vector<BufferSpec> args;
  std::vector<int> zeroResults; // result indices
  size_t workspaceBytes = 0;
  // The launches take a table of the input and result addresses instead.
  bool argTable = false;
  int numInputs() const {
    int n = 0;
    for (auto &a : args)
      n += a.role == "input";
    return n;
  }
};

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<KernelSpec> loadManifest(const std::string &dir) {
  auto j = nlohmann::json::parse(readFile(dir + "/kernels.json"));
  std::vector<KernelSpec> out;
  for (auto &k : j["kernels"]) {
    KernelSpec s;
    s.name = k["name"];
    s.kind = k["kind"];
    s.module = k["module"];
    s.ptx = dir + "/" + k["ptx"].get<std::string>();
    if (k.contains("cubin"))
      s.cubin = dir + "/" + k["cubin"].get<std::string>();
    for (auto &l : k["launches"])
      s.launches.push_back({l["kernel"], l["grid"], l["block"],
                            l.value("shared_bytes", 0u),
                            l.value("cluster", 1u),
                            l.value("programmatic", false)});
    for (auto &a : k["args"]) {
      BufferSpec b;
      b.name = a["name"];
      b.role = a["role"];
      b.dtype = a["dtype"];
      for (auto &d : a["shape"])
        b.shape.push_back(d);
      b.bytes = a["bytes"];
      s.args.push_back(b);
    }
    for (auto &z : k["zero_results"])
      s.zeroResults.push_back(z);
    s.workspaceBytes = k["workspace_bytes"];
    s.argTable = k.value("arg_table", false);
    out.push_back(s);
  }
  return out;
}

class Device {
public:
  Device() {
    HARNESS_CHECK(cuInit(0));
    HARNESS_CHECK(cuDeviceGet(&device_, 0));
    HARNESS_CHECK(cuDevicePrimaryCtxRetain(&ctx_, device_));
    HARNESS_CHECK(cuCtxSetCurrent(ctx_));
  }
  std::string name() const {
    char buf[256];
    cuDeviceGetName(buf, sizeof buf, device_);
    return buf;
  }
  // Loads the cubin (no JIT) when there is one, else the PTX.
  void load(KernelSpec &spec) {
    CUmodule mod;
    if (!spec.cubin.empty()) {
      std::string image = readFile(spec.cubin);
      HARNESS_CHECK(cuModuleLoadData(&mod, image.data()));
    } else {
      std::string image = readFile(spec.ptx);
      HARNESS_CHECK(cuModuleLoadData(&mod, image.c_str()));
    }
    for (Launch &l : spec.launches) {
      HARNESS_CHECK(cuModuleGetFunction(&l.function, mod, l.kernel.c_str()));
      if (l.sharedBytes > 48 * 1024)
        HARNESS_CHECK(cuFuncSetAttribute(
            l.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            l.sharedBytes));
    }
  }

private:
  CUdevice device_;
  CUcontext ctx_;
};

// Buffers in manifest order: inputs, results, workspace; and the argument
// table of a kernel that takes one.
struct Buffers {
  std::vector<CUdeviceptr> ptrs;
  CUdeviceptr table = 0;
  explicit Buffers(const KernelSpec &spec) {
    for (auto &a : spec.args) {
      CUdeviceptr p;
      HARNESS_CHECK(cuMemAlloc(&p, std::max<size_t>(a.bytes, 16)));
      ptrs.push_back(p);
    }
    if (spec.argTable) {
      std::vector<uint64_t> addresses(ptrs.begin(),
                                      ptrs.end() - (spec.workspaceBytes ? 1 : 0));
      HARNESS_CHECK(cuMemAlloc(&table, addresses.size() * 8));
      HARNESS_CHECK(
          cuMemcpyHtoD(table, addresses.data(), addresses.size() * 8));
    }
  }
  ~Buffers() {
    for (CUdeviceptr p : ptrs)
      cuMemFree(p);
    if (table)
      cuMemFree(table);
  }
};

// Zeroes the amax results (the kernels accumulate into them).
inline void zeroAccumulated(const KernelSpec &spec, Buffers &bufs,
                            CUstream stream) {
  int inputs = spec.numInputs();
  for (int r : spec.zeroResults)
    HARNESS_CHECK(cuMemsetD32Async(bufs.ptrs[inputs + r], 0, 1, stream));
}

// Runs launches [first, last) of the kernel in order.
inline void runLaunches(const KernelSpec &spec, Buffers &bufs, CUstream stream,
                        size_t first, size_t last) {
  std::vector<void *> params;
  if (spec.argTable) {
    params.push_back(&bufs.table);
    if (spec.workspaceBytes)
      params.push_back(&bufs.ptrs.back());
  } else {
    for (CUdeviceptr &p : bufs.ptrs)
      params.push_back(&p);
  }
  for (size_t i = first; i < last; ++i) {
    const Launch &l = spec.launches[i];
    CUlaunchConfig config = {};
    config.gridDimX = l.grid, config.gridDimY = 1, config.gridDimZ = 1;
    config.blockDimX = l.block, config.blockDimY = 1, config.blockDimZ = 1;
    config.sharedMemBytes = l.sharedBytes;
    config.hStream = stream;
    CUlaunchAttribute attrs[2] = {};
    config.attrs = attrs;
    if (l.cluster > 1) {
      CUlaunchAttribute &cluster = attrs[config.numAttrs++];
      cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      cluster.value.clusterDim.x = l.cluster;
      cluster.value.clusterDim.y = 1;
      cluster.value.clusterDim.z = 1;
    }
    if (l.programmatic) {
      CUlaunchAttribute &dependent = attrs[config.numAttrs++];
      dependent.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      dependent.value.programmaticStreamSerializationAllowed = 1;
    }
    HARNESS_CHECK(cuLaunchKernelEx(&config, l.function, params.data(), nullptr));
  }
}

// Zeroes the amax results, then runs every launch of the kernel in order.
inline void launch(const KernelSpec &spec, Buffers &bufs, CUstream stream) {
  zeroAccumulated(spec, bufs, stream);
  runLaunches(spec, bufs, stream, 0, spec.launches.size());
}

} // namespace octet::gputest

#endif
