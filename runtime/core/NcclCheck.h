#ifndef OCTET_RUNTIME_CORE_NCCLCHECK_H
#define OCTET_RUNTIME_CORE_NCCLCHECK_H

// OCTET_CHECK_NCCL: a failed NCCL call becomes a returned Status with the
// call, file, line, NCCL's error string and its last error detail.

#include "runtime/core/Status.h"

#include <nccl.h>

#include <string>

namespace octet {

inline Status ncclError(ncclResult_t result, ncclComm_t comm, const char *expr,
                        const char *file, int line) {
  std::string detail = ncclGetLastError(comm) ? ncclGetLastError(comm) : "";
  return Status::error(std::string("NCCL error ") + ncclGetErrorString(result) +
                       (detail.empty() ? "" : " (" + detail + ")") + " in " +
                       expr + " at " + file + ":" + std::to_string(line));
}

} // namespace octet

// `comm` may be nullptr when no communicator exists yet.
#define OCTET_CHECK_NCCL(expr, comm)                                           \
  do {                                                                         \
    ncclResult_t octetNcclResult_ = (expr);                                    \
    if (octetNcclResult_ != ncclSuccess &&                                     \
        octetNcclResult_ != ncclInProgress)                                    \
      return ::octet::ncclError(octetNcclResult_, (comm), #expr, __FILE__,     \
                                __LINE__);                                     \
  } while (0)

#endif
