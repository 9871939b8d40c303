#include "runtime/comm/NcclLibrary.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace octet::comm {

namespace {

std::atomic<const NcclLibrary *> lastOpened{nullptr};

const char *kHowToFix =
    "install NCCL 2.18 or newer (the CUDA toolkit's, or NVIDIA's libnccl2 "
    "package), or set OCTET_NCCL=/path/to/libnccl.so.2";

template <typename F>
bool resolve(void *handle, const char *name, F &slot, std::string &missing) {
  slot = reinterpret_cast<F>(::dlsym(handle, name));
  if (!slot)
    missing += std::string(missing.empty() ? "" : ", ") + name;
  return slot != nullptr;
}

} // namespace

NcclLibrary::Search NcclLibrary::defaultSearch() {
  Search s;
  if (const char *path = std::getenv("OCTET_NCCL"))
    s.override = std::string(path);
  s.candidates = {
      "libnccl.so.2",
      "/usr/local/cuda/lib64/libnccl.so.2",
      "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2",
      "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
  };
  return s;
}

StatusOr<const NcclLibrary *> NcclLibrary::get() {
  static std::once_flag once;
  static std::unique_ptr<NcclLibrary> library;
  static Status failure = Status::ok();
  std::call_once(once, [] {
    auto opened = open(defaultSearch());
    if (opened)
      library = std::move(*opened);
    else
      failure = opened.status();
  });
  if (!library)
    return failure;
  return static_cast<const NcclLibrary *>(library.get());
}

const NcclLibrary *NcclLibrary::loaded() { return lastOpened.load(); }

StatusOr<std::unique_ptr<NcclLibrary>> NcclLibrary::open(const Search &search) {
  // NCCL reads its environment when it first initializes: this must come
  // before any NCCL call.
  ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1);

  void *handle = nullptr;
  std::string path, tried;
  if (search.override) {
    path = *search.override;
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      return Status::error("OCTET_NCCL=" + path + " cannot be loaded (" +
                           (why ? why : "unknown error") +
                           "): point OCTET_NCCL at NCCL's libnccl.so.2, or "
                           "unset it to use the one on the library path");
    }
  } else {
    for (const std::string &candidate : search.candidates) {
      handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        path = candidate;
        break;
      }
      const char *why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + candidate + ": " +
               (why ? why : "not loadable");
    }
    if (!handle)
      return Status::error(
          "more than one rank needs NCCL, but no libnccl.so.2 could be "
          "loaded (tried " +
          tried + "): " + kHowToFix);
  }

  std::unique_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->path_ = path;
  NcclApi &a = lib->api_;
  std::string missing;
  resolve(handle, "ncclGetVersion", a.getVersion, missing);
  resolve(handle, "ncclGetUniqueId", a.getUniqueId, missing);
  resolve(handle, "ncclCommInitRankConfig", a.commInitRankConfig, missing);
  resolve(handle, "ncclCommSplit", a.commSplit, missing);
  resolve(handle, "ncclCommFinalize", a.commFinalize, missing);
  resolve(handle, "ncclCommDestroy", a.commDestroy, missing);
  resolve(handle, "ncclCommAbort", a.commAbort, missing);
  resolve(handle, "ncclCommGetAsyncError", a.commGetAsyncError, missing);
  resolve(handle, "ncclCommCount", a.commCount, missing);
  resolve(handle, "ncclCommUserRank", a.commUserRank, missing);
  resolve(handle, "ncclGetErrorString", a.getErrorString, missing);
  resolve(handle, "ncclGetLastError", a.getLastError, missing);
  resolve(handle, "ncclAllReduce", a.allReduce, missing);
  resolve(handle, "ncclReduceScatter", a.reduceScatter, missing);
  resolve(handle, "ncclAllGather", a.allGather, missing);
  resolve(handle, "ncclBroadcast", a.broadcast, missing);
  resolve(handle, "ncclSend", a.send, missing);
  resolve(handle, "ncclRecv", a.recv, missing);
  resolve(handle, "ncclGroupStart", a.groupStart, missing);
  resolve(handle, "ncclGroupEnd", a.groupEnd, missing);
  std::string optional;
  resolve(handle, "ncclMemAlloc", a.memAlloc, optional);
  resolve(handle, "ncclMemFree", a.memFree, optional);
  resolve(handle, "ncclCommRegister", a.commRegister, optional);
  resolve(handle, "ncclCommDeregister", a.commDeregister, optional);
  if (a.getVersion)
    a.getVersion(&lib->version_);
  if (!missing.empty() || lib->version_ < kMinNcclVersion)
    return Status::error(path + " is NCCL " + lib->versionString() +
                         (missing.empty() ? "" : " without " + missing) +
                         "; octet needs NCCL 2.18 or newer (built against " +
                         std::to_string(NCCL_MAJOR) + "." +
                         std::to_string(NCCL_MINOR) + "." +
                         std::to_string(NCCL_PATCH) + "): " + kHowToFix);
  lastOpened = lib.get();
  return lib;
}

std::string NcclLibrary::versionString() const {
  return ncclVersionString(version_);
}

std::string ncclVersionString(int versionCode) {
  if (versionCode <= 0)
    return "(version unknown)";
  // NCCL_VERSION(X,Y,Z): X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z
  // before.
  bool wide = versionCode >= 10000;
  int major = versionCode / (wide ? 10000 : 1000);
  int minor = versionCode / 100 % (wide ? 100 : 10);
  int patch = versionCode % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch);
}

const char *ncclResultName(ncclResult_t result) {
  // In ncclResult_t's order.
  static const char *const kNames[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress"};
  unsigned index = unsigned(result);
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index]
                                                    : "ncclResult";
}

Status ncclError(ncclResult_t result, const char *expr, const char *file,
                 int line) {
  std::string msg = std::string("NCCL error ") + ncclResultName(result);
  if (ncclResultName(result) == std::string("ncclResult"))
    msg += " " + std::to_string(int(result));
  const NcclLibrary *lib = NcclLibrary::loaded();
  if (lib) {
    msg += std::string(" (") + lib->api().getErrorString(result) + ")";
  }
  msg +=
      std::string(" in ") + expr + " at " + file + ":" + std::to_string(line);
  if (lib) {
    const char *last = lib->api().getLastError(nullptr);
    std::string text = last ? last : "";
    // One line: NCCL's message may end in a newline.
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    for (char &c : text)
      if (c == '\n')
        c = ' ';
    if (!text.empty())
      msg += ": " + text;
  }
  if (result == ncclRemoteError)
    msg += " (a peer rank failed or exited)";
  return Status::error(msg);
}

} // namespace octet::comm
