#ifndef OCTET_RUNTIME_CORE_MODULE_H
#define OCTET_RUNTIME_CORE_MODULE_H

// A loaded GPU module: the cubin when it was built for this device, else the
// PTX compiled by the driver's JIT (whose log goes into the error message).

#include "runtime/core/Device.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace octet {

class Module {
public:
  // `cubinArch` is e.g. "sm_90a"; an empty cubin or one for another arch
  // falls back to `ptx`. `name` appears in errors.
  static StatusOr<std::unique_ptr<Module>>
  load(const Device &device, const std::string &name, std::string_view cubin,
       const std::string &cubinArch, std::string_view ptx);
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  StatusOr<CUfunction> function(const std::string &symbol);
  bool fromCubin() const { return fromCubin_; }
  const std::string &name() const { return name_; }

private:
  Module() = default;
  CUmodule module_ = nullptr;
  bool fromCubin_ = false;
  std::string name_;
  std::map<std::string, CUfunction> functions_;
};

// True when a cubin for `arch` ("sm_90a", "sm_90") runs on `device`.
bool cubinMatches(const Device &device, const std::string &arch);

} // namespace octet

#endif
