#ifndef OCTET_RUNTIME_METRICS_STEPMETRICS_H
#define OCTET_RUNTIME_METRICS_STEPMETRICS_H

// The per-step line of a training run and the peaks its MFU is measured
// against.

#include <cstdint>
#include <optional>
#include <string>

namespace octet::metrics {

// Dense (no sparsity) tensor-core peaks of a GPU, TFLOP/s.
struct GpuPeak {
  std::string model; // "H100 SXM"
  double bf16Tflops = 0;
  double fp8Tflops = 0;
};

// The peak of the GPU that the driver names `deviceName` ("NVIDIA H100 80GB
// HBM3", "NVIDIA H200"), or nothing for a GPU the table does not know (the
// step line then prints no MFU). From NVIDIA's data sheets, dense:
//   H100 SXM (HBM3), H200, GH200: 989.4 BF16, 1978.9 FP8
//   H100 PCIe:                    756.5 BF16, 1513.0 FP8
//   H100 NVL:                     835.5 BF16, 1670.5 FP8
std::optional<GpuPeak> gpuPeak(const std::string &deviceName);

struct StepMetrics {
  int64_t step = 0, steps = 0;
  double loss = 0, gradNorm = 0, lr = 0;
  double seconds = 0;
  // Tokens of the global batch (every rank's).
  int64_t tokens = 0;
  // GPUs that trained them: TFLOP/s and MFU are per GPU.
  int gpus = 1;
  double flopsPerToken = 0;
  // Device memory in use after the step (the arenas are allocated once, so
  // this is the run's peak so far); 0 when unknown.
  uint64_t deviceBytesUsed = 0;

  double tokensPerSecond() const { return seconds > 0 ? tokens / seconds : 0; }
  double tokensPerSecondPerGpu() const { return tokensPerSecond() / gpus; }
  // Per GPU.
  double modelTflops() const {
    return tokensPerSecondPerGpu() * flopsPerToken / 1e12;
  }
};

// "step 10/100  loss 2.3456  grad_norm 1.234  lr 3.000e-04  tokens/s 12345
//  TFLOP/s 123.4  MFU bf16 12.5% fp8 6.2%  memory 12.34 GiB"; with several
// GPUs, "tokens/s 24690 (12345 per GPU)" and TFLOP/s, MFU and memory per
// GPU.
std::string formatStepLine(const StepMetrics &m,
                           const std::optional<GpuPeak> &peak);

} // namespace octet::metrics

#endif
