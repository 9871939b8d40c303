#ifndef OCTET_RUNTIME_CORE_CUDACHECK_H
#define OCTET_RUNTIME_CORE_CUDACHECK_H

// OCTET_CHECK_CUDA / OCTET_CHECK_CUBLAS turn a failed library call into a
// returned Status naming the call, the file and line, and the library's own
// error name and message. They return from the enclosing function, which
// must return Status or StatusOr<T>.

#include "support/Status.h"

#include <cublasLt.h>
#include <cuda.h>

namespace octet {

Status cudaDriverError(CUresult result, const char *expr, const char *file,
                       int line);
Status cublasError(cublasStatus_t status, const char *expr, const char *file,
                   int line);

} // namespace octet

#define OCTET_CHECK_CUDA(expr)                                                 \
  do {                                                                         \
    CUresult octetCudaResult_ = (expr);                                        \
    if (octetCudaResult_ != CUDA_SUCCESS)                                      \
      return ::octet::cudaDriverError(octetCudaResult_, #expr, __FILE__,       \
                                      __LINE__);                               \
  } while (0)

#define OCTET_CHECK_CUBLAS(expr)                                               \
  do {                                                                         \
    cublasStatus_t octetCublasStatus_ = (expr);                                \
    if (octetCublasStatus_ != CUBLAS_STATUS_SUCCESS)                           \
      return ::octet::cublasError(octetCublasStatus_, #expr, __FILE__,         \
                                  __LINE__);                                   \
  } while (0)

#endif
