#ifndef OCTET_DIALECTS_FP8_FP8DIALECT_H
#define OCTET_DIALECTS_FP8_FP8DIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/fp8/Fp8Dialect.h.inc"
#include "dialects/fp8/Fp8Enums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/fp8/Fp8Attrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/fp8/Fp8Ops.h.inc"

namespace octet::fp8 {

inline bool isFp8Type(mlir::Type t) {
  return llvm::isa<mlir::Float8E4M3FNType, mlir::Float8E5M2Type>(t);
}

// The largest finite value of an FP8 type: 448 (E4M3FN) or 57344 (E5M2).
float maxFinite(mlir::Type fp8Type);

// Scale shape of a [rows, cols] tensor cut into `block` tiles (edge tiles
// may be partial).
llvm::SmallVector<int64_t, 2> blockScaleShape(llvm::ArrayRef<int64_t> shape,
                                              llvm::ArrayRef<int64_t> block);

} // namespace octet::fp8

#endif
