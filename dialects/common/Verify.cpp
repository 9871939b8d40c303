#include "dialects/common/Verify.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace octet {

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      os << ", ";
    if (ShapedType::isDynamic(shape[i]))
      os << "?";
    else
      os << shape[i];
  }
  os << "]";
  return text;
}

LogicalResult expectShape(Operation *op, StringRef what, ShapedType type,
                          llvm::ArrayRef<int64_t> expected) {
  auto shape = type.getShape();
  bool ok = shape.size() == expected.size();
  for (size_t i = 0; ok && i < shape.size(); ++i)
    ok = sameDim(shape[i], expected[i]);
  if (ok)
    return success();
  return op->emitOpError("expected ")
         << what << " of shape " << formatShape(expected) << ", got "
         << formatShape(shape);
}

LogicalResult expectRank(Operation *op, StringRef what, ShapedType type,
                         int64_t rank) {
  if (type.getRank() == rank)
    return success();
  return op->emitOpError("expected ")
         << what << " of rank " << rank << ", got rank " << type.getRank()
         << " " << formatShape(type.getShape());
}

LogicalResult expectMinRank(Operation *op, StringRef what, ShapedType type,
                            int64_t rank) {
  if (type.getRank() >= rank)
    return success();
  return op->emitOpError("expected ")
         << what << " of rank at least " << rank << ", got rank "
         << type.getRank();
}

LogicalResult expectSameElementType(Operation *op, StringRef what,
                                    ShapedType type, StringRef otherWhat,
                                    ShapedType other) {
  if (type.getElementType() == other.getElementType())
    return success();
  return op->emitOpError("expected ")
         << what << " element type " << other.getElementType()
         << " (that of " << otherWhat << "), got " << type.getElementType();
}

FailureOr<std::pair<int64_t, int64_t>>
verifyMatmulShapes(Operation *op, ShapedType a, ShapedType b, bool transposeA,
                   bool transposeB) {
  int64_t m = transposeA ? a.getDimSize(1) : a.getDimSize(0);
  int64_t ka = transposeA ? a.getDimSize(0) : a.getDimSize(1);
  int64_t kb = transposeB ? b.getDimSize(1) : b.getDimSize(0);
  int64_t n = transposeB ? b.getDimSize(0) : b.getDimSize(1);
  if (!sameDim(ka, kb))
    return op->emitOpError("contraction dimensions differ: a gives K = ")
           << ka << ", b gives K = " << kb;
  return std::make_pair(m, n);
}

LogicalResult verifyGemmRole(Operation *op, std::optional<StringRef> role) {
  if (!role || *role == "fprop" || *role == "dgrad" || *role == "wgrad")
    return success();
  return op->emitOpError("role must be fprop, dgrad or wgrad; got '")
         << *role << "'";
}

} // namespace octet
