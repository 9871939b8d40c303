#ifndef OCTET_COMPILER_TRANSFORMS_PRECISION_H
#define OCTET_COMPILER_TRANSFORMS_PRECISION_H

// The FP8 passes (octet-precision, octet-layout) and the per-layer precision
// report that `octet compile --precision-report` prints.

#include "dialects/fp8/Fp8Dialect.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

namespace octet {

#define GEN_PASS_DECL_OCTETPRECISION
#define GEN_PASS_DECL_OCTETLAYOUT
#include "compiler/Transforms/PrecisionPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/PrecisionPasses.h.inc"

// One line per (parameter, role) GEMM of the module: layer, parameter,
// role, the operand formats and the recipe (or why it stayed in its
// original precision). Reads the IR after octet-precision.
void printPrecisionReport(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace octet

#endif
