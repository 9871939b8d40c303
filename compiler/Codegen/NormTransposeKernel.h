//===- NormTransposeKernel.h - RMSNorm + FP8 + transpose, clustered -*- C++ -*-===//
//
// One launch for a region that normalizes rows (RMSNorm), quantizes them to
// FP8 with a tensorwise scale and also writes the transposed FP8 copy: the
// input norm of a Llama layer, whose two-launch form (row kernel, then a
// transpose launch that rereads the FP8 rows) cannot reach 80% of copy
// bandwidth. Blocks pair up in thread block clusters over 64-row bands and
// hand each other their FP8 bytes through distributed shared memory, so the
// transposed copy is written without reading anything back.
//
//===----------------------------------------------------------------------===//

#ifndef OCTET_COMPILER_CODEGEN_NORMTRANSPOSEKERNEL_H
#define OCTET_COMPILER_CODEGEN_NORMTRANSPOSEKERNEL_H

#include "dialects/kernel/KernelDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace octet::codegen {

// What the launch of the clustered kernel needs.
struct ClusterLaunch {
  int64_t grid = 0, block = 0, sharedBytes = 0, cluster = 1;
  // The kernel result that accumulates an amax (zeroed before the launch),
  // -1 where the region yields none.
  int64_t amaxResult = -1;
};

// Builds the kernel into `mod` as `name` when `fused` is
//   x → graph.rms_norm(x, w) → [graph.reshape] → fp8.quantize(·, s)
//     → fp8.transpose(·, s)
// with x bf16 [.., R, C], w f32 [C], s an f32 scalar, the quantized tensor,
// its amax and its transpose (and optionally the passed-through scale) the
// region's results, and R, C shapes the kernel takes (R a multiple of 64,
// C a multiple of 1024 that fits in shared memory). Returns nothing, and
// builds nothing, otherwise.
std::optional<ClusterLaunch> buildNormTranspose(mlir::OpBuilder &b,
                                                mlir::gpu::GPUModuleOp mod,
                                                llvm::StringRef name,
                                                kernel::FusedOp fused,
                                                int64_t numSMs);

} // namespace octet::codegen

#endif // OCTET_COMPILER_CODEGEN_NORMTRANSPOSEKERNEL_H
