#ifndef OCTET_RUNTIME_COMM_NCCLLIBRARY_H
#define OCTET_RUNTIME_COMM_NCCLLIBRARY_H

// NCCL, loaded at run time. octet is built against the CUDA toolkit's
// nccl.h (the function types below come from it) but does not link
// libnccl: octet-run runs on one GPU, and prints its help, on a host
// without NCCL. The library is looked for in this order:
//   1. OCTET_NCCL=/path/to/libnccl.so.2, when set (nothing else is tried);
//   2. libnccl.so.2 on the dynamic linker's path (LD_LIBRARY_PATH, the
//      executable's RUNPATH, ldconfig);
//   3. the CUDA toolkit's and the distribution's usual places.
// Loading also sets NCCL_NVLS_ENABLE=0 in the process environment before
// NCCL reads it: NVLink multicast stays off, whoever started the rank.

#include "support/Status.h"

#include <nccl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace octet::comm {

// Oldest NCCL octet accepts: ncclCommSplit and non-blocking communicators.
constexpr int kMinNcclVersion = 21800;
// FP8 (e4m3, e5m2) reductions: NCCL 2.24 on sm_90 and newer.
constexpr int kNcclFp8Version = 22400;

// The NCCL entry points octet calls, typed from nccl.h.
struct NcclApi {
  decltype(&ncclGetVersion) getVersion = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) commInitRankConfig = nullptr;
  decltype(&ncclCommSplit) commSplit = nullptr;
  decltype(&ncclCommFinalize) commFinalize = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&ncclCommCount) commCount = nullptr;
  decltype(&ncclCommUserRank) commUserRank = nullptr;
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclGetLastError) getLastError = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
  // Optional (null where the library lacks them, before NCCL 2.19):
  // buffers NCCL reads and writes directly instead of copying them
  // through its own.
  decltype(&ncclMemAlloc) memAlloc = nullptr;
  decltype(&ncclMemFree) memFree = nullptr;
  decltype(&ncclCommRegister) commRegister = nullptr;
  decltype(&ncclCommDeregister) commDeregister = nullptr;
};

class NcclLibrary {
public:
  // Where to look: `override` is OCTET_NCCL's value.
  struct Search {
    std::optional<std::string> override;
    std::vector<std::string> candidates;
  };
  // OCTET_NCCL from the environment and the default candidates.
  static Search defaultSearch();

  // The process's NCCL, loaded on first use (later calls return the same
  // library, or the same error).
  static StatusOr<const NcclLibrary *> get();
  // Loads from `search` (tests; get() uses defaultSearch()).
  static StatusOr<std::unique_ptr<NcclLibrary>> open(const Search &search);
  // The library the error macro asks for messages (the last one opened).
  static const NcclLibrary *loaded();

  // The library stays mapped: NCCL's threads may outlive any owner.
  ~NcclLibrary() = default;

  const NcclApi &api() const { return api_; }
  const std::string &path() const { return path_; }
  // NCCL_VERSION_CODE of the loaded library (22809 for 2.28.9).
  int version() const { return version_; }
  std::string versionString() const;

private:
  NcclLibrary() = default;
  NcclApi api_;
  std::string path_;
  int version_ = 0;
};

// "2.28.9" for NCCL_VERSION_CODE 22809.
std::string ncclVersionString(int versionCode);

// "ncclRemoteError".
const char *ncclResultName(ncclResult_t result);

// The Status for a failed NCCL call: the call, file:line, NCCL's error name
// and text, and its last error message where it has one.
Status ncclError(ncclResult_t result, const char *expr, const char *file,
                 int line);

} // namespace octet::comm

// Returns a Status naming the call when an NCCL call (made through
// NcclLibrary::api()) fails. ncclInProgress is a failure here: non-blocking
// communicators go through Communicator, which waits for it.
#define OCTET_CHECK_NCCL(expr)                                                 \
  do {                                                                         \
    ncclResult_t octetNcclResult_ = (expr);                                    \
    if (octetNcclResult_ != ncclSuccess)                                       \
      return ::octet::comm::ncclError(octetNcclResult_, #expr, __FILE__,       \
                                      __LINE__);                               \
  } while (0)

#endif
