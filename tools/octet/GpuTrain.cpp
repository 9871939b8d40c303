#include "tools/octet/GpuTrain.h"

#include "bundle/Bundle.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace octet {

namespace {

// The few driver entry points the probe needs, with the driver's ABI.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int *);
using CuDeviceGet = int (*)(int *, int);
using CuDeviceGetAttribute = int (*)(int *, int, int);
using CuDeviceGetName = int (*)(char *, int, int);
constexpr int kComputeCapabilityMajor = 75; // CU_DEVICE_ATTRIBUTE_...MAJOR
constexpr int kComputeCapabilityMinor = 76;

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool executable(const std::string &path) {
  return access(path.c_str(), X_OK) == 0;
}

// octet-run beside this binary (an install), in the build tree's
// tools/octet-run, or where OCTET_RUN says.
std::string findOctetRun() {
  if (const char *env = std::getenv("OCTET_RUN"))
    return env;
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string dir = directoryOf(std::string(buf, n > 0 ? size_t(n) : 0));
  for (const std::string &candidate :
       {dir + "/octet-run", dir + "/../octet-run/octet-run"})
    if (executable(candidate))
      return candidate;
  return "";
}

} // namespace

bool findHopperGpu(std::string &found) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    found = "no NVIDIA driver (libcuda.so.1 not found)";
    return false;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count =
      reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<CuDeviceGetAttribute>(
      dlsym(lib, "cuDeviceGetAttribute"));
  auto name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
  int devices = 0;
  if (!init || !count || !get || !attr || !name || init(0) != 0 ||
      count(&devices) != 0 || devices == 0) {
    found = "the NVIDIA driver sees no GPU";
    return false;
  }
  found.clear();
  for (int i = 0; i < devices; ++i) {
    int dev = 0, major = 0, minor = 0;
    char text[256] = {};
    if (get(&dev, i) != 0)
      continue;
    attr(&major, kComputeCapabilityMajor, dev);
    attr(&minor, kComputeCapabilityMinor, dev);
    name(text, sizeof text, dev);
    std::string what = std::string(text) + " (sm_" + std::to_string(major) +
                       std::to_string(minor) + ")";
    if (major == 9) {
      found = what;
      return true;
    }
    found += (found.empty() ? "" : ", ") + what;
  }
  found += "; octet's GPU kernels need sm_90 (H100/H200)";
  return false;
}

int trainOnGpu(const GpuTrainRequest &request, std::string &why) {
  std::string octetRun = findOctetRun();
  if (octetRun.empty()) {
    why = "octet-run is not beside octet (build the octet-run target, or "
          "set OCTET_RUN to its path)";
    return -1;
  }
  char pattern[] = "/tmp/octet-train-XXXXXX";
  if (!mkdtemp(pattern)) {
    why = "cannot create a temporary directory for the bundle";
    return -1;
  }
  std::string dir = pattern, bundlePath = dir + "/train.octet";
  std::string optionsPath = dir + "/octet-run.json";
  auto cleanup = [&] {
    std::remove(bundlePath.c_str());
    std::remove(optionsPath.c_str());
    rmdir(dir.c_str());
  };
  std::fflush(stdout);
  if (Status written = request.writeBundle(bundlePath); !written) {
    std::fprintf(stderr, "octet train: error: %s\n",
                 written.message().c_str());
    cleanup();
    return 1;
  }
  auto bundle = bundle::readBundle(bundlePath);
  Status runnable = bundle ? bundle::checkRunnable(*bundle) : bundle.status();
  if (!runnable) {
    why = runnable.message();
    cleanup();
    return -1;
  }
  RunArgs run = request.run;
  run.bundle = bundlePath;
  // A data-parallel bundle runs as its ranks: octet-run starts them on this
  // host, unless this process already is one (torchrun, octet launch).
  if (bundle->world_size() > 1 && !std::getenv("RANK"))
    run.gpus = int(bundle->world_size());
  if (Status st = writeRunOptionsFile(run, optionsPath); !st) {
    cleanup();
    why = st.message();
    return -1;
  }
  std::vector<std::string> args = {octetRun, "--options", optionsPath};
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t child = fork();
  if (child == 0) {
    std::vector<char *> cargs;
    for (std::string &a : args)
      cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    std::fprintf(stderr, "octet train: cannot run %s\n", cargs[0]);
    _exit(127);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) < 0) {
    cleanup();
    why = "cannot start " + octetRun;
    return -1;
  }
  cleanup();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

} // namespace octet
