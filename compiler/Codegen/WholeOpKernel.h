//===- WholeOpKernel.h - Kernels for ops outside the row model --*- C++ -*-===//
//
// Embedding and its gradient, cross-entropy and its gradient, the global
// norm, and the step's scalars (counter, learning rate, clip coefficient,
// FP8 scale updates): each op a launch (or two) of its own over the
// kernel's buffers.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_WHOLEOPKERNEL_H
#define OCTET_COMPILER_CODEGEN_WHOLEOPKERNEL_H

#include "compiler/Codegen/Launches.h"

#include "llvm/ADT/DenseMap.h"

namespace octet::codegen {

// Whether `fused` holds an op of this family (the region is then built
// here, a launch per op).
bool hasWholeOps(kernel::FusedOp fused);

// Whether the kernels built for `fused` may write its results over the
// inputs its `overwrites` names: only a lone cross_entropy_grad over its
// logits, whose lowering reads a token's row whole before each thread
// writes the gradient of the elements it has just read. Fails, naming the
// kernel, for any other body.
mlir::LogicalResult checkOverwritesLowered(kernel::FusedOp fused);

// Builds the region's kernels into `mod` (named `sym`_0, `sym`_1, ...,
// `sym`_scalars) and records their launches in order. Returns the
// workspace bytes they need, and appends to `zeroResults` the results the
// runtime must zero before the launches (amaxes taken by atomic maxima);
// fails, naming the op, on anything it cannot lower.
mlir::FailureOr<int64_t>
buildWholeOpKernels(kernel::FusedOp fused, mlir::OpBuilder &b,
                    mlir::gpu::GPUModuleOp mod, llvm::StringRef sym,
                    LaunchList &launches,
                    llvm::SmallVectorImpl<int64_t> &zeroResults);

// The tile kernel after the row kernel of an RMSNorm whose result the
// region block-quantizes (octet-fuse-norm-quantize, blockwise): it
// evaluates the norm on 128 x 128 tiles from the norm's input and the
// rows' 1/rms that the row kernel stored at `inverseAt` in its workspace of
// `workspaceFloats` floats, and writes every quantization and transposed
// copy. Launched as the row kernel's programmatic dependent. Fails, naming
// the op, when a quantization does not fit the tiles.
mlir::LogicalResult
buildNormTileKernels(kernel::FusedOp fused, mlir::OpBuilder &b,
                     mlir::gpu::GPUModuleOp mod, llvm::StringRef sym,
                     LaunchList &launches,
                     const llvm::DenseMap<mlir::Value, int64_t> &inverseAt,
                     int64_t workspaceFloats);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_WHOLEOPKERNEL_H
