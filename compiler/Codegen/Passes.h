#ifndef OCTET_COMPILER_CODEGEN_PASSES_H
#define OCTET_COMPILER_CODEGEN_PASSES_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace arith {
class ArithDialect;
}
namespace math {
class MathDialect;
}
namespace memref {
class MemRefDialect;
}
namespace scf {
class SCFDialect;
}
namespace vector {
class VectorDialect;
}
} // namespace mlir

namespace octet::codegen {

#define GEN_PASS_DECL
#include "compiler/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Codegen/Passes.h.inc"

// arith.truncf / arith.extf with FP8 element types → NVVM conversions.
void populateLowerFp8CastsPatterns(mlir::RewritePatternSet &patterns);

// Writes <module>.ptx for every gpu.binary of `module` (run the codegen
// pipeline first), a <module>.cubin for each when ptxas is found (`ptxas`
// empty: PATH and CUDA_HOME are searched; "none": PTX only), and
// kernels.json, the launch manifest: per kernel.fused, its kernels, grid and
// block, argument buffers (inputs, results, workspace) and the results to
// zero first. What octet-emit-ptx runs.
mlir::LogicalResult emitPtx(mlir::ModuleOp module, llvm::StringRef dir,
                            llvm::StringRef ptxas = "");

} // namespace octet::codegen

#endif
