#include "runtime/metrics/StepMetrics.h"

#include "support/Bytes.h"

#include <cstdio>

namespace octet::metrics {

namespace {
bool contains(const std::string &s, const char *part) {
  return s.find(part) != std::string::npos;
}
} // namespace

std::optional<GpuPeak> gpuPeak(const std::string &deviceName) {
  if (contains(deviceName, "H200") || contains(deviceName, "GH200"))
    return GpuPeak{"H200", 989.4, 1978.9};
  if (contains(deviceName, "H100")) {
    if (contains(deviceName, "PCIe"))
      return GpuPeak{"H100 PCIe", 756.5, 1513.0};
    if (contains(deviceName, "NVL"))
      return GpuPeak{"H100 NVL", 835.5, 1670.5};
    return GpuPeak{"H100 SXM", 989.4, 1978.9};
  }
  return std::nullopt;
}

std::string formatStepLine(const StepMetrics &m,
                           const std::optional<GpuPeak> &peak) {
  char buf[512];
  double tflops = m.modelTflops();
  int n = std::snprintf(
      buf, sizeof buf,
      "step %lld/%lld  loss %.4f  grad_norm %.4f  lr %.3e  tokens/s %.0f  "
      "TFLOP/s %.1f",
      (long long)m.step, (long long)m.steps, m.loss, m.gradNorm, m.lr,
      m.tokensPerSecond(), tflops);
  std::string line(buf, size_t(n));
  if (m.gpus > 1) {
    // The per-GPU figure goes right after the job's.
    size_t at = line.find("  TFLOP/s");
    std::snprintf(buf, sizeof buf, " (%.0f per GPU)", m.tokensPerSecondPerGpu());
    line.insert(at, buf);
  }
  if (peak) {
    std::snprintf(buf, sizeof buf, "  MFU bf16 %.1f%% fp8 %.1f%%",
                  100.0 * tflops / peak->bf16Tflops,
                  100.0 * tflops / peak->fp8Tflops);
    line += buf;
  }
  if (m.deviceBytesUsed)
    line += "  memory " + humanBytes(m.deviceBytesUsed);
  return line;
}

} // namespace octet::metrics
