#ifndef OCTET_COMPILER_CODEGEN_PIPELINE_H
#define OCTET_COMPILER_CODEGEN_PIPELINE_H

// From kernel.fused regions to PTX: the pass pipeline, and writing its
// output (PTX, cubins, a launch manifest) to a folder.

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace octet::codegen {

struct CodegenOptions {
  std::string chip = "sm_90a";
  // PTX ISA 8.1: kernel parameters past 4352 bytes (a multi-tensor AdamW or
  // scale update takes a pointer per tensor: 13 KB for GPT-2).
  std::string features = "+ptx81";
  unsigned optLevel = 3;
  // CUDA's libdevice, for exp/erf/tanh/sin/cos/pow. Empty: the build's
  // default (OCTET_LIBDEVICE), when that file exists.
  std::string libdevice;
  int64_t numSMs = 132;
  // Regions that cannot be lowered are reported and left without kernels
  // instead of failing the pipeline (so the rest can still be inspected).
  bool keepGoing = false;
  // Elementwise kernels over flattened tensors: blocks per multiprocessor
  // that loop over a tensor (0: a block per slice), in multi-tensor
  // kernels (AdamW) and in the others, and 8-element chunks per thread
  // (0: the pass's choice).
  int64_t multiTensorBlocksPerSM = 2;
  int64_t flatBlocksPerSM = 0;
  int64_t flatChunks = 0;
  // Row kernels: bytes of row inputs a thread loads at once (sizes the
  // chunks a thread holds, hence the block).
  int64_t rowBytesInFlight = 128;
  // Kernels with column sums (norm gradients): blocks per multiprocessor,
  // each looping over rows and writing a partial row.
  int64_t columnBlocksPerSM = 2;
  // Rows a block takes at a time to write the FP8 transposes of its
  // results itself (0: a transpose launch after the row kernel). Off: on an
  // H100 the 16-row tiles' 16-byte column stores, each half a sector 8 KB
  // from the next, ran the llama3-8b norm + quantize + transpose kernels
  // at 34-57% of copy bandwidth against 63-78% for the separate launch
  // (bench/results/h100/transpose-tiles.json).
  int64_t transposeTileRows = 0;
  // RMSNorm + FP8 quantize + transpose regions as one clustered launch
  // (NormTransposeKernel.h) where their shapes allow it.
  bool clusterNormTranspose = true;
};

// kernel.fused → gpu.func → NVVM → gpu.binary holding PTX for `chip`.
void buildFusedCodegenPipeline(mlir::OpPassManager &pm,
                               const CodegenOptions &options = {});

// The libdevice file the pipeline links, or "" when none is found.
std::string defaultLibdevice();

// Writes <module>.ptx for every gpu.binary of `module` (run the pipeline
// first), a <module>.cubin for each when ptxas is found (`ptxas` empty:
// PATH and CUDA_HOME are searched; "none": PTX only), and kernels.json, the
// launch manifest: per kernel.fused, its kernels, grid and block, argument
// buffers (inputs, results, workspace) and the results to zero first.
mlir::LogicalResult emitPtx(mlir::ModuleOp module, llvm::StringRef dir,
                            llvm::StringRef ptxas = "");

// Registers the `octet-codegen` pass pipeline with octet-opt.
void registerCodegenPipelines();

} // namespace octet::codegen

#endif
