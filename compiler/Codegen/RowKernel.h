//===- RowKernel.h - Register-resident row kernels --------------*- C++ -*-===//
//
// The kernels of a planned kernel.fused region (KernelPlan.h): a block per
// row holding it in registers (norms, RoPE, activations, FP8 casts, AdamW
// over flattened slices), then, as launches of their own, the column sums
// of the weight gradients and the FP8 transposes of its results.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_ROWKERNEL_H
#define OCTET_COMPILER_CODEGEN_ROWKERNEL_H

#include "compiler/Codegen/Launches.h"

namespace octet::codegen {

struct KernelPlan;

// Builds the kernels of `fused` as `plan` lays it out into `mod` (named
// `sym`, `sym`_colsum, ...) and records their launches in order. Returns
// the results accumulated with atomics (amax), which the runtime zeroes
// before the first launch. Fails, naming the op, on a region that yields
// an operand unchanged.
mlir::FailureOr<llvm::SmallVector<int64_t>>
buildRowKernels(kernel::FusedOp fused, const KernelPlan &plan,
                mlir::OpBuilder &b, mlir::gpu::GPUModuleOp mod,
                llvm::StringRef sym, LaunchList &launches);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_ROWKERNEL_H
