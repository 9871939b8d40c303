#include "runtime/core/CudaDriver.h"

#include <cuda.h>
#include <dlfcn.h>

#include <string>

namespace octet {
namespace {

constexpr const char *kDriverLibrary = "libcuda.so.1";

struct Driver {
  void *handle = nullptr;
  std::string error;
};

const Driver &driver() {
  static const Driver loaded = [] {
    Driver d;
    d.handle = ::dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!d.handle) {
      const char *why = ::dlerror();
      d.error = std::string("cannot load the CUDA driver (") +
                (why ? why : kDriverLibrary) +
                "): octet-run needs an NVIDIA GPU and its driver "
                "(nvidia-smi should list the GPU); on a machine without "
                "one, `octet train --cpu` trains on the CPU";
    }
    return d;
  }();
  return loaded;
}

void *driverSymbol(const char *name) {
  const Driver &d = driver();
  return d.handle ? ::dlsym(d.handle, name) : nullptr;
}

} // namespace

Status loadCudaDriver() {
  const Driver &d = driver();
  return d.handle ? Status::ok() : Status::error(d.error);
}

} // namespace octet

// cuda.h maps most names onto versioned symbols (cuMemAlloc is
// cuMemAlloc_v2); OCTET_SYMBOL expands the macro first, so that each
// definition below and the symbol it looks up are the ones callers link
// against.
#define OCTET_SYMBOL_TEXT(name) #name
#define OCTET_SYMBOL(name) OCTET_SYMBOL_TEXT(name)

// A symbol the driver lacks (one older than the toolkit) is reported as
// CUDA_ERROR_NOT_FOUND by the call that needs it.
#define OCTET_DRIVER_CALL(name, params, args)                                  \
  CUresult CUDAAPI name params {                                               \
    using Entry = CUresult(CUDAAPI *) params;                                  \
    static const Entry entry =                                                 \
        reinterpret_cast<Entry>(octet::driverSymbol(OCTET_SYMBOL(name)));      \
    if (!entry)                                                                \
      return octet::loadCudaDriver() ? CUDA_ERROR_NOT_FOUND                    \
                                     : CUDA_ERROR_NOT_INITIALIZED;             \
    return entry args;                                                         \
  }

extern "C" {

OCTET_DRIVER_CALL(cuGetErrorName, (CUresult error, const char **pStr),
                  (error, pStr))
OCTET_DRIVER_CALL(cuGetErrorString, (CUresult error, const char **pStr),
                  (error, pStr))
OCTET_DRIVER_CALL(cuCtxGetStreamPriorityRange,
                  (int *leastPriority, int *greatestPriority),
                  (leastPriority, greatestPriority))
OCTET_DRIVER_CALL(cuCtxSetCurrent, (CUcontext ctx), (ctx))
OCTET_DRIVER_CALL(cuCtxSynchronize, (void), ())
OCTET_DRIVER_CALL(cuDeviceGet, (CUdevice * device, int ordinal),
                  (device, ordinal))
OCTET_DRIVER_CALL(cuDeviceGetAttribute,
                  (int *pi, CUdevice_attribute attrib, CUdevice dev),
                  (pi, attrib, dev))
OCTET_DRIVER_CALL(cuDeviceGetCount, (int *count), (count))
OCTET_DRIVER_CALL(cuDeviceGetName, (char *name, int len, CUdevice dev),
                  (name, len, dev))
OCTET_DRIVER_CALL(cuDevicePrimaryCtxRelease, (CUdevice dev), (dev))
OCTET_DRIVER_CALL(cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev),
                  (pctx, dev))
OCTET_DRIVER_CALL(cuDeviceTotalMem, (size_t * bytes, CUdevice dev),
                  (bytes, dev))
OCTET_DRIVER_CALL(cuEventCreate, (CUevent * phEvent, unsigned int Flags),
                  (phEvent, Flags))
OCTET_DRIVER_CALL(cuEventDestroy, (CUevent hEvent), (hEvent))
OCTET_DRIVER_CALL(cuEventElapsedTime,
                  (float *pMilliseconds, CUevent hStart, CUevent hEnd),
                  (pMilliseconds, hStart, hEnd))
OCTET_DRIVER_CALL(cuEventRecord, (CUevent hEvent, CUstream hStream),
                  (hEvent, hStream))
OCTET_DRIVER_CALL(cuEventSynchronize, (CUevent hEvent), (hEvent))
OCTET_DRIVER_CALL(cuFuncLoad, (CUfunction function), (function))
OCTET_DRIVER_CALL(cuFuncSetAttribute,
                  (CUfunction hfunc, CUfunction_attribute attrib, int value),
                  (hfunc, attrib, value))
OCTET_DRIVER_CALL(cuGraphDestroy, (CUgraph hGraph), (hGraph))
OCTET_DRIVER_CALL(cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec))
OCTET_DRIVER_CALL(cuGraphGetNodes,
                  (CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes),
                  (hGraph, nodes, numNodes))
OCTET_DRIVER_CALL(cuGraphInstantiate,
                  (CUgraphExec * phGraphExec, CUgraph hGraph,
                   unsigned long long flags),
                  (phGraphExec, hGraph, flags))
OCTET_DRIVER_CALL(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),
                  (hGraphExec, hStream))
OCTET_DRIVER_CALL(cuInit, (unsigned int Flags), (Flags))
OCTET_DRIVER_CALL(cuLaunchKernel,
                  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                   unsigned int gridDimZ, unsigned int blockDimX,
                   unsigned int blockDimY, unsigned int blockDimZ,
                   unsigned int sharedMemBytes, CUstream hStream,
                   void **kernelParams, void **extra),
                  (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                   blockDimZ, sharedMemBytes, hStream, kernelParams, extra))
OCTET_DRIVER_CALL(cuLaunchKernelEx,
                  (const CUlaunchConfig *config, CUfunction f,
                   void **kernelParams, void **extra),
                  (config, f, kernelParams, extra))
OCTET_DRIVER_CALL(cuMemAlloc, (CUdeviceptr * dptr, size_t bytesize),
                  (dptr, bytesize))
OCTET_DRIVER_CALL(cuMemAllocHost, (void **pp, size_t bytesize), (pp, bytesize))
OCTET_DRIVER_CALL(cuMemFree, (CUdeviceptr dptr), (dptr))
OCTET_DRIVER_CALL(cuMemFreeHost, (void *p), (p))
OCTET_DRIVER_CALL(cuMemGetInfo, (size_t * free, size_t *total), (free, total))
OCTET_DRIVER_CALL(cuMemcpyDtoDAsync,
                  (CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                   size_t ByteCount, CUstream hStream),
                  (dstDevice, srcDevice, ByteCount, hStream))
OCTET_DRIVER_CALL(cuMemcpyDtoH,
                  (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
                  (dstHost, srcDevice, ByteCount))
OCTET_DRIVER_CALL(cuMemcpyDtoHAsync,
                  (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                   CUstream hStream),
                  (dstHost, srcDevice, ByteCount, hStream))
OCTET_DRIVER_CALL(cuMemcpyHtoD,
                  (CUdeviceptr dstDevice, const void *srcHost,
                   size_t ByteCount),
                  (dstDevice, srcHost, ByteCount))
OCTET_DRIVER_CALL(cuMemcpyHtoDAsync,
                  (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                   CUstream hStream),
                  (dstDevice, srcHost, ByteCount, hStream))
OCTET_DRIVER_CALL(cuMemsetD32,
                  (CUdeviceptr dstDevice, unsigned int ui, size_t N),
                  (dstDevice, ui, N))
OCTET_DRIVER_CALL(cuMemsetD32Async,
                  (CUdeviceptr dstDevice, unsigned int ui, size_t N,
                   CUstream hStream),
                  (dstDevice, ui, N, hStream))
OCTET_DRIVER_CALL(cuMemsetD8,
                  (CUdeviceptr dstDevice, unsigned char uc, size_t N),
                  (dstDevice, uc, N))
OCTET_DRIVER_CALL(cuMemsetD8Async,
                  (CUdeviceptr dstDevice, unsigned char uc, size_t N,
                   CUstream hStream),
                  (dstDevice, uc, N, hStream))
OCTET_DRIVER_CALL(cuModuleGetFunction,
                  (CUfunction * hfunc, CUmodule hmod, const char *name),
                  (hfunc, hmod, name))
OCTET_DRIVER_CALL(cuModuleLoadData, (CUmodule * module, const void *image),
                  (module, image))
OCTET_DRIVER_CALL(cuModuleLoadDataEx,
                  (CUmodule * module, const void *image,
                   unsigned int numOptions, CUjit_option *options,
                   void **optionValues),
                  (module, image, numOptions, options, optionValues))
OCTET_DRIVER_CALL(cuModuleUnload, (CUmodule hmod), (hmod))
OCTET_DRIVER_CALL(cuTensorMapEncodeTiled,
                  (CUtensorMap * tensorMap, CUtensorMapDataType tensorDataType,
                   cuuint32_t tensorRank, void *globalAddress,
                   const cuuint64_t *globalDim,
                   const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                   const cuuint32_t *elementStrides,
                   CUtensorMapInterleave interleave,
                   CUtensorMapSwizzle swizzle,
                   CUtensorMapL2promotion l2Promotion,
                   CUtensorMapFloatOOBfill oobFill),
                  (tensorMap, tensorDataType, tensorRank, globalAddress,
                   globalDim, globalStrides, boxDim, elementStrides,
                   interleave, swizzle, l2Promotion, oobFill))
OCTET_DRIVER_CALL(cuStreamBeginCapture,
                  (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
OCTET_DRIVER_CALL(cuStreamCreateWithPriority,
                  (CUstream * phStream, unsigned int flags, int priority),
                  (phStream, flags, priority))
OCTET_DRIVER_CALL(cuStreamDestroy, (CUstream hStream), (hStream))
OCTET_DRIVER_CALL(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),
                  (hStream, phGraph))
OCTET_DRIVER_CALL(cuStreamSynchronize, (CUstream hStream), (hStream))
OCTET_DRIVER_CALL(cuStreamWaitEvent,
                  (CUstream hStream, CUevent hEvent, unsigned int Flags),
                  (hStream, hEvent, Flags))

} // extern "C"
