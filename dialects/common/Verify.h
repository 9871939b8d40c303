#ifndef OCTET_DIALECTS_COMMON_VERIFY_H
#define OCTET_DIALECTS_COMMON_VERIFY_H

// Shape and type checks shared by the verifiers of all octet dialects, so
// every op reports "expected X, got Y" in the same words.

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace octet {

inline bool sameDim(int64_t a, int64_t b) {
  return a == b || mlir::ShapedType::isDynamic(a) ||
         mlir::ShapedType::isDynamic(b);
}

std::string formatShape(llvm::ArrayRef<int64_t> shape);

mlir::LogicalResult expectShape(mlir::Operation *op, llvm::StringRef what,
                                mlir::ShapedType type,
                                llvm::ArrayRef<int64_t> expected);
mlir::LogicalResult expectRank(mlir::Operation *op, llvm::StringRef what,
                               mlir::ShapedType type, int64_t rank);
mlir::LogicalResult expectMinRank(mlir::Operation *op, llvm::StringRef what,
                                  mlir::ShapedType type, int64_t rank);
mlir::LogicalResult expectSameElementType(mlir::Operation *op,
                                          llvm::StringRef what,
                                          mlir::ShapedType type,
                                          llvm::StringRef otherWhat,
                                          mlir::ShapedType other);

// For op(a) [M, K] · op(b) [K, N] with a, b rank 2: checks that the K of
// both sides agree and returns {M, N}.
mlir::FailureOr<std::pair<int64_t, int64_t>>
verifyMatmulShapes(mlir::Operation *op, mlir::ShapedType a, mlir::ShapedType b,
                   bool transposeA, bool transposeB);

// A GEMM's `role`, where set, is fprop, dgrad or wgrad.
mlir::LogicalResult verifyGemmRole(mlir::Operation *op,
                                   std::optional<llvm::StringRef> role);

} // namespace octet

#endif
