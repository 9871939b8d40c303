#include "runtime/core/CudaCheck.h"

#include <string>

namespace octet {

Status cudaDriverError(CUresult result, const char *expr, const char *file,
                       int line) {
  const char *name = nullptr;
  const char *text = nullptr;
  cuGetErrorName(result, &name);
  cuGetErrorString(result, &text);
  std::string msg = std::string("CUDA driver error ") +
                    (name ? name : "CUDA_ERROR_" + std::to_string(int(result))) +
                    " (" + (text ? text : "unknown") + ") in " + expr + " at " +
                    file + ":" + std::to_string(line);
  if (result == CUDA_ERROR_NO_DEVICE || result == CUDA_ERROR_NOT_INITIALIZED)
    msg += ": no usable GPU; octet-run needs an NVIDIA Hopper GPU (H100/H200) "
           "and its driver (nvidia-smi should list it)";
  else if (result == CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER ||
           result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    msg += ": the NVIDIA driver is older than this CUDA build needs; "
           "update the driver";
  return Status::error(msg);
}

Status cublasError(cublasStatus_t status, const char *expr, const char *file,
                   int line) {
  return Status::error(std::string("cuBLASLt error ") +
                       cublasLtGetStatusName(status) + " (" +
                       cublasLtGetStatusString(status) + ") in " + expr +
                       " at " + file + ":" + std::to_string(line));
}

} // namespace octet
