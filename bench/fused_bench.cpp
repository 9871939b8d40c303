// Times every fused kernel of one llama3-8b layer (bench/llama3-8b-layer.mlir,
// compiled by octet-codegen + octet-emit-ptx) against a device-to-device copy
// measured in the same run. Bytes counted per kernel: every input read once
// and every result written once (the fewest a kernel can move); a copy moves
// its size twice (read + write).
//
// usage: octet-fused-bench KERNEL_DIR OUT.json [NAME_PREFIX]
//
// With NAME_PREFIX only the regions whose name starts with it are timed
// (e.g. "layers.0." on the kernels `octet compile SPEC --emit-ptx DIR`
// writes for a whole train step: one layer's kernels as the compiler
// generates them). Attention kernels are left to their own bench.

#include "tests/gpu/codegen/Harness.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>

using namespace octet::gputest;

namespace {

constexpr int kWarmup = 3;
constexpr int kRepeats = 20;

// Before every timed repeat a 256 MiB memset evicts the 50 MB L2 (no kernel
// starts on inputs a previous repeat left in cache) and keeps the GPU busy
// while the host enqueues the start event and the launches, so that the
// time between the events is the device's, not the host's launch latency.
// An idle GPU would record the start event at once and then wait for each
// launch to arrive: several microseconds, a tenth of a 40 us kernel.
struct Timer {
  static constexpr size_t kFlushBytes = size_t(256) << 20;
  CUdeviceptr flush = 0;
  CUevent start, stop;
  Timer() {
    HARNESS_CHECK(cuMemAlloc(&flush, kFlushBytes));
    HARNESS_CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    HARNESS_CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  }
  ~Timer() {
    cuEventDestroy(start);
    cuEventDestroy(stop);
    cuMemFree(flush);
  }
  // Median milliseconds of `timed` over kRepeats; `before` runs untimed
  // after the flush (e.g. the amax zeroing, or the launches a timed one
  // depends on).
  template <typename B, typename F> double medianMs(B before, F timed) {
    for (int i = 0; i < kWarmup; ++i) {
      before();
      timed();
    }
    std::vector<double> ms;
    for (int i = 0; i < kRepeats; ++i) {
      HARNESS_CHECK(cuMemsetD32Async(flush, i, kFlushBytes / 4, nullptr));
      before();
      HARNESS_CHECK(cuEventRecord(start, nullptr));
      timed();
      HARNESS_CHECK(cuEventRecord(stop, nullptr));
      HARNESS_CHECK(cuEventSynchronize(stop));
      float t;
      HARNESS_CHECK(cuEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  template <typename F> double medianMs(F timed) {
    return medianMs([] {}, timed);
  }
};

// Random bits of the right kind: N(0,1)-like bf16 / f32, small ints for
// positions, so that no kernel runs on zeros.
void fillRandom(const BufferSpec &a, CUdeviceptr p, std::mt19937_64 &gen) {
  size_t n = a.elements();
  std::vector<uint8_t> host(a.bytes);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // A pool of random values repeated over the buffer keeps host time low.
  const size_t pool = 1 << 20;
  if (a.dtype == "bf16" || a.dtype == "f32") {
    std::vector<float> vals(pool);
    for (float &v : vals)
      v = normal(gen);
    if (a.shape.empty())
      vals[0] = 1.0f;
    for (size_t i = 0; i < n; ++i) {
      float v = vals[(i * 7919) % pool];
      if (a.dtype == "f32") {
        std::memcpy(&host[4 * i], &v, 4);
      } else {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        uint16_t h = u >> 16;
        std::memcpy(&host[2 * i], &h, 2);
      }
    }
  } else if (a.dtype == "i32") {
    for (size_t i = 0; i < n; ++i) {
      int32_t v = (int32_t)(i % 8192);
      std::memcpy(&host[4 * i], &v, 4);
    }
  } else if (a.dtype == "i64") {
    int64_t v = 10;
    std::memcpy(host.data(), &v, 8);
  }
  HARNESS_CHECK(cuMemcpyHtoD(p, host.data(), host.size()));
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s KERNEL_DIR OUT.json [NAME_PREFIX]\n",
                 argv[0]);
    return 2;
  }
  std::string prefix = argc == 4 ? argv[3] : "";
  Device dev;
  auto kernels = loadManifest(argv[1]);
  std::mt19937_64 gen(1234);

  // The copy ceiling: 2 GiB device to device.
  size_t copyBytes = size_t(2) << 30;
  CUdeviceptr a, b;
  HARNESS_CHECK(cuMemAlloc(&a, copyBytes));
  HARNESS_CHECK(cuMemAlloc(&b, copyBytes));
  HARNESS_CHECK(cuMemsetD32(a, 0x3f800000, copyBytes / 4));
  Timer timer;
  double copyMs = timer.medianMs(
      [&] { HARNESS_CHECK(cuMemcpyDtoDAsync(b, a, copyBytes, nullptr)); });
  double copyGBs = 2.0 * copyBytes / (copyMs * 1e6);
  cuMemFree(a);
  cuMemFree(b);
  std::printf("device %s\ncopy: %.3f ms for 2 GiB, %.0f GB/s (read + write)\n",
              dev.name().c_str(), copyMs, copyGBs);

  nlohmann::json out;
  out["device"] = dev.name();
  out["copy_GBps"] = copyGBs;
  out["repeats"] = kRepeats;
  double logSum = 0;
  int counted = 0;
  std::printf("%-24s %10s %10s %10s %8s\n", "kernel", "MB", "ms", "GB/s",
              "of copy");
  std::set<std::string> timedModules;
  for (KernelSpec &k : kernels) {
    if (k.name.rfind(prefix, 0) != 0 || k.kind.rfind("attention", 0) == 0)
      continue;
    // Regions computing the same thing share a module (the evaluation
    // forward and the training forward): timed once.
    if (!timedModules.insert(k.module).second)
      continue;
    dev.load(k);
    Buffers bufs(k);
    size_t bytes = 0;
    for (size_t i = 0; i < k.args.size(); ++i) {
      const BufferSpec &s = k.args[i];
      if (s.role == "input")
        fillRandom(s, bufs.ptrs[i], gen);
      if (s.role != "workspace")
        bytes += s.bytes;
    }
    // The kernel: its launches, with the amax zeroing before them untimed
    // (memsets of 4 bytes each; with them: ms_with_amax_zeroing).
    double ms = timer.medianMs([&] { zeroAccumulated(k, bufs, nullptr); },
                               [&] {
                                 runLaunches(k, bufs, nullptr, 0,
                                             k.launches.size());
                               });
    double withZeroMs = timer.medianMs([&] { launch(k, bufs, nullptr); });
    HARNESS_CHECK(cuCtxSynchronize());
    double gbs = bytes / (ms * 1e6);
    double share = gbs / copyGBs;
    logSum += std::log(share);
    ++counted;
    std::printf("%-24s %10.1f %10.4f %10.0f %7.1f%%  (with amax zeroing %.4f ms)\n",
                k.name.c_str(), bytes / 1e6, ms, gbs, 100 * share, withZeroMs);
    // Each launch alone, the ones before it run untimed (a trailing
    // transpose reads what the row kernel wrote; the flush is before both,
    // so what the row kernel left in L2 stays there as in the step).
    nlohmann::json launches = nlohmann::json::array();
    for (size_t i = 0; i < k.launches.size(); ++i) {
      const Launch &l = k.launches[i];
      double launchMs = k.launches.size() == 1
                            ? ms
                            : timer.medianMs(
                                  [&] {
                                    zeroAccumulated(k, bufs, nullptr);
                                    runLaunches(k, bufs, nullptr, 0, i);
                                  },
                                  [&] { runLaunches(k, bufs, nullptr, i, i + 1); });
      if (k.launches.size() > 1)
        std::printf("    %-36s grid %6d block %4d %10.4f ms\n", l.kernel.c_str(),
                    l.grid, l.block, launchMs);
      launches.push_back({{"kernel", l.kernel},
                          {"grid", l.grid},
                          {"block", l.block},
                          {"cluster", l.cluster},
                          {"programmatic", l.programmatic},
                          {"shared_bytes", l.sharedBytes},
                          {"ms", launchMs}});
    }
    out["kernels"].push_back({{"name", k.name},
                              {"bytes", bytes},
                              {"ms", ms},
                              {"ms_with_amax_zeroing", withZeroMs},
                              {"GBps", gbs},
                              {"share_of_copy", share},
                              {"launches", launches}});
  }
  double geomean = std::exp(logSum / std::max(counted, 1));
  out["geomean_share_of_copy"] = geomean;
  std::printf("geomean share of copy bandwidth: %.1f%%\n", 100 * geomean);
  std::ofstream(argv[2]) << out.dump(2) << "\n";
  return 0;
}
