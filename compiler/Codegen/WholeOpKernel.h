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
// workspace bytes they need; fails, naming the op, on anything it cannot
// lower.
mlir::FailureOr<int64_t> buildWholeOpKernels(kernel::FusedOp fused,
                                             mlir::OpBuilder &b,
                                             mlir::gpu::GPUModuleOp mod,
                                             llvm::StringRef sym,
                                             LaunchList &launches);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_WHOLEOPKERNEL_H
