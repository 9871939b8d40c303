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

} // namespace octet

#endif
