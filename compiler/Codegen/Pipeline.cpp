#include "compiler/Codegen/Pipeline.h"

#include "compiler/Codegen/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"

namespace octet::codegen {

std::string defaultLibdevice() {
  if (const char *home = std::getenv("CUDA_HOME")) {
    std::string path = std::string(home) + "/nvvm/libdevice/libdevice.10.bc";
    if (llvm::sys::fs::exists(path))
      return path;
  }
#ifdef OCTET_LIBDEVICE
  if (llvm::sys::fs::exists(OCTET_LIBDEVICE))
    return OCTET_LIBDEVICE;
#endif
  return "";
}

void buildFusedCodegenPipeline(mlir::OpPassManager &pm,
                               const CodegenOptions &options) {
  FusedToGpuOptions fused;
  fused.numSMs = options.numSMs;
  fused.keepGoing = options.keepGoing;
  fused.multiTensorBlocksPerSM = options.multiTensorBlocksPerSM;
  fused.flatBlocksPerSM = options.flatBlocksPerSM;
  fused.flatChunks = options.flatChunks;
  fused.rowBytesInFlight = options.rowBytesInFlight;
  fused.columnBlocksPerSM = options.columnBlocksPerSM;
  fused.transposeTileRows = options.transposeTileRows;
  fused.clusterNormTranspose = options.clusterNormTranspose;
  pm.addPass(createFusedToGpu(fused));
  AttentionToGpuOptions attention;
  attention.keepGoing = options.keepGoing;
  pm.addPass(createAttentionToGpu(attention));
  mlir::GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = options.optLevel;
  std::string libdevice =
      options.libdevice.empty() ? defaultLibdevice() : options.libdevice;
  // Without libdevice the math calls stay unresolved and only ptxas
  // complains; PTX is still written so that the IR can be inspected.
  if (!libdevice.empty())
    target.linkLibs.push_back(libdevice);
  pm.addPass(mlir::createGpuNVVMAttachTarget(target));
  mlir::OpPassManager &gpu = pm.nest<mlir::gpu::GPUModuleOp>();
  gpu.addPass(createLowerFp8Casts());
  gpu.addPass(mlir::createSCFToControlFlowPass());
  mlir::ConvertGpuOpsToNVVMOpsOptions nvvm;
  // Static shapes: a bare pointer per buffer instead of a memref descriptor.
  nvvm.useBarePtrCallConv = true;
  gpu.addPass(mlir::createConvertGpuOpsToNVVMOps(nvvm));
  gpu.addPass(mlir::createCanonicalizerPass());
  gpu.addPass(mlir::createCSEPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  mlir::GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(mlir::createGpuModuleToBinaryPass(binary));
}

namespace {
// The knobs worth trying from octet-opt; the rest keep their defaults.
struct CodegenPipelineOptions
    : mlir::PassPipelineOptions<CodegenPipelineOptions> {
  Option<int64_t> multiTensorBlocksPerSM{
      *this, "multi-tensor-blocks-per-sm",
      llvm::cl::desc("multi-tensor kernels: blocks per multiprocessor "
                     "looping over a tensor (0: one per slice)"),
      llvm::cl::init(CodegenOptions().multiTensorBlocksPerSM)};
  Option<int64_t> flatBlocksPerSM{
      *this, "flat-blocks-per-sm",
      llvm::cl::desc("other elementwise kernels over flattened tensors: "
                     "blocks per multiprocessor looping over a tensor"),
      llvm::cl::init(CodegenOptions().flatBlocksPerSM)};
  Option<int64_t> flatChunks{
      *this, "flat-chunks",
      llvm::cl::desc("8-element chunks a thread holds per flattened slice "
                     "(0: the pass's choice)"),
      llvm::cl::init(CodegenOptions().flatChunks)};
  Option<int64_t> rowBytesInFlight{
      *this, "row-bytes-in-flight",
      llvm::cl::desc("row kernels: bytes of row inputs a thread loads at "
                     "once"),
      llvm::cl::init(CodegenOptions().rowBytesInFlight)};
  Option<int64_t> columnBlocksPerSM{
      *this, "column-blocks-per-sm",
      llvm::cl::desc("kernels with column sums: blocks per multiprocessor "
                     "looping over rows"),
      llvm::cl::init(CodegenOptions().columnBlocksPerSM)};
  Option<int64_t> numSMs{
      *this, "num-sms",
      llvm::cl::desc("multiprocessors of the target GPU (sizes the grids "
                     "that loop over rows)"),
      llvm::cl::init(CodegenOptions().numSMs)};
  Option<int64_t> transposeTileRows{
      *this, "transpose-tile-rows",
      llvm::cl::desc("rows a block takes at a time to write the FP8 "
                     "transposes of its results (0: a launch of their own)"),
      llvm::cl::init(CodegenOptions().transposeTileRows)};
  Option<bool> clusterNormTranspose{
      *this, "cluster-norm-transpose",
      llvm::cl::desc("RMSNorm + FP8 quantize + transpose regions as one "
                     "clustered launch (false: row kernel + transpose)"),
      llvm::cl::init(CodegenOptions().clusterNormTranspose)};
};
} // namespace

void registerCodegenPipelines() {
  mlir::PassPipelineRegistration<CodegenPipelineOptions>(
      "octet-codegen",
      "kernel.fused regions to PTX for sm_90a (gpu.binary ops)",
      [](mlir::OpPassManager &pm, const CodegenPipelineOptions &o) {
        CodegenOptions options;
        options.multiTensorBlocksPerSM = o.multiTensorBlocksPerSM;
        options.flatBlocksPerSM = o.flatBlocksPerSM;
        options.flatChunks = o.flatChunks;
        options.rowBytesInFlight = o.rowBytesInFlight;
        options.columnBlocksPerSM = o.columnBlocksPerSM;
        options.numSMs = o.numSMs;
        options.transposeTileRows = o.transposeTileRows;
        options.clusterNormTranspose = o.clusterNormTranspose;
        buildFusedCodegenPipeline(pm, options);
      });
}

} // namespace octet::codegen
