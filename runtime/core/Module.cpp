#include "runtime/core/Module.h"

#include <vector>

namespace octet {

bool cubinMatches(const Device &device, const std::string &arch) {
  std::string want = "sm_" + std::to_string(device.major()) +
                     std::to_string(device.minor());
  return arch == want || arch == want + "a";
}

StatusOr<std::unique_ptr<Module>> Module::load(const Device &device,
                                               const std::string &name,
                                               std::string_view cubin,
                                               const std::string &cubinArch,
                                               std::string_view ptx) {
  std::unique_ptr<Module> m(new Module());
  m->name_ = name;
  if (!cubin.empty() && cubinMatches(device, cubinArch)) {
    CUresult r = cuModuleLoadData(&m->module_, cubin.data());
    if (r == CUDA_SUCCESS) {
      m->fromCubin_ = true;
      return m;
    }
    if (ptx.empty())
      OCTET_CHECK_CUDA(r);
  }
  if (ptx.empty())
    return Status::error("module '" + name + "' has a cubin for " +
                         cubinArch + " but " + device.describe() +
                         " cannot run it and there is no PTX to JIT: "
                         "recompile the bundle for this GPU");
  // The driver wants NUL-terminated PTX.
  std::string text(ptx);
  std::vector<char> errorLog(16384, 0), infoLog(4096, 0);
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_INFO_LOG_BUFFER,
                         CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {errorLog.data(),
                  reinterpret_cast<void *>(uintptr_t(errorLog.size())),
                  infoLog.data(),
                  reinterpret_cast<void *>(uintptr_t(infoLog.size()))};
  CUresult r = cuModuleLoadDataEx(&m->module_, text.c_str(), 4, opts, vals);
  if (r != CUDA_SUCCESS) {
    const char *errName = nullptr;
    cuGetErrorName(r, &errName);
    return Status::error("the driver could not JIT-compile the PTX of module '" +
                         name + "' for " + device.describe() + " (" +
                         (errName ? errName : "?") + "): " +
                         std::string(errorLog.data()));
  }
  return m;
}

Module::~Module() {
  if (module_)
    cuModuleUnload(module_);
}

StatusOr<CUfunction> Module::function(const std::string &symbol) {
  auto it = functions_.find(symbol);
  if (it != functions_.end())
    return it->second;
  CUfunction f = nullptr;
  CUresult r = cuModuleGetFunction(&f, module_, symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    return Status::error("module '" + name_ + "' has no kernel '" + symbol +
                         "': the bundle's kernel table and its PTX disagree; "
                         "recompile the bundle");
  OCTET_CHECK_CUDA(r);
  functions_[symbol] = f;
  return f;
}

} // namespace octet
