#ifndef OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONREPORT_H
#define OCTET_COMPILER_TRANSFORMS_FUSION_FUSIONREPORT_H

// What each kernel costs (bytes moved, FLOPs) and the report of
// `octet compile --fusion-report`.

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace octet::fusion {

struct KernelCost {
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;
  int64_t flops = 0;
};

// Bytes of the distinct tensors a kernel op reads and of those it writes,
// and its floating-point operations (GEMM and attention exactly, fused
// kernels by a per-element count of each op). Zero for non-kernel ops.
KernelCost kernelCost(mlir::Operation *op);

struct KernelInfo {
  std::string section; // forward, backward, optimizer
  int64_t layer = -1;
  std::string kind;    // gemm, attention_fwd, attention_bwd, fused, copy, collective
  std::string name;
  std::string ops;     // what it computes, e.g. "graph.add+graph.rms_norm"
  KernelCost cost;
  // A fused kernel with GEMMs in its body (the chunked LM head).
  bool hasGemm = false;
  // Bandwidth-bound: fused kernels without GEMMs, and copies.
  bool memoryBound() const {
    return (kind == "fused" && !hasGemm) || kind == "copy";
  }
};

// The kernels of @train_microbatch and @optimizer_step, in program order.
std::vector<KernelInfo> collectKernels(mlir::ModuleOp module);

// Per-kernel table after fusion, per-layer and per-section totals before
// and after, and the per-layer maxima that CI checks.
void printFusionReport(const std::vector<KernelInfo> &before,
                       const std::vector<KernelInfo> &after,
                       llvm::raw_ostream &os);

} // namespace octet::fusion

#endif
