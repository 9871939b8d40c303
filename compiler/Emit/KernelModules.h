#ifndef OCTET_COMPILER_EMIT_KERNELMODULES_H
#define OCTET_COMPILER_EMIT_KERNELMODULES_H

// The GPU code of a bundle: codegen run on the kernel-dialect step, the
// small kernels the bundle adds around cuBLASLt calls, and the gpu.binary
// PTX assembled into cubins.

#include "bundle/bundle.pb.h"
#include "compiler/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace octet::emit {

// Adds the kernels below when some kernel.gemm is block-scaled. Tensorwise
// FP8 GEMMs need none: their scales_inv operands are what cuBLASLt's A and
// B scale pointers read.
void addGemmBlockFactorKernels(mlir::ModuleOp module);

// The module of the kernels that turn a block-scaled GEMM's quantize scales
// (the fp8 dialect's [R/br, K/bc], row-major) into cuBLASLt's
// dequantization factors (1 / scale, in bundle.proto's GemmScaleMode
// layout), both operands' in one launch: one kernel per pair of operand
// shapes, gemmBlockFactorKernel names it, gemmBlockFactorThreads is its
// thread count (one per scale), kGemmBlockFactorThreads a block's.
inline constexpr llvm::StringLiteral kGemmBlockFactorModule =
    "gemm_block_factors";
std::string gemmBlockFactorKernel(mlir::Operation *gemm);
int64_t gemmBlockFactorThreads(mlir::Operation *gemm);
inline constexpr int64_t kGemmBlockFactorThreads = 256;

struct CodegenOutcome {
  // Why an op got no kernels, by op: the codegen's diagnostics at its
  // location, joined.
  llvm::DenseMap<mlir::Operation *, std::string> reasons;
};

// Runs the codegen pipeline (keep-going: an op that cannot be lowered gets
// no `launch` and its diagnostics are kept in the outcome rather than
// printed). Fails, printing the diagnostics, when the pipeline itself fails.
mlir::FailureOr<CodegenOutcome>
runCodegen(mlir::ModuleOp module, const CodegenPipelineOptions &options);

struct KernelModules {
  std::vector<bundle::Module> modules;
  llvm::StringMap<uint32_t> index;
  // "ptxas <version>" when cubins were assembled, else "none".
  std::string assembler;
};

// One bundle Module per gpu.binary, in module order: its PTX, and a cubin
// when ptxas is found (`ptxas` empty: CUDA_HOME, PATH, /usr/local/cuda;
// "none": PTX only). ptxas output depends only on the PTX and its version,
// so the bytes are reproducible.
mlir::FailureOr<KernelModules> collectModules(mlir::ModuleOp module,
                                              llvm::StringRef ptxas);

} // namespace octet::emit

#endif
