#include "dialects/fp8/Fp8Dialect.h"

#include "dialects/common/Verify.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace octet;
using namespace octet::fp8;

#include "dialects/fp8/Fp8Dialect.cpp.inc"

void Fp8Dialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/fp8/Fp8Ops.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/fp8/Fp8Ops.cpp.inc"

LogicalResult QuantizeOp::verify() {
  return expectShape(*this, "result",
                     cast<ShapedType>(getResult().getType()),
                     cast<ShapedType>(getInput().getType()).getShape());
}

LogicalResult DequantizeOp::verify() {
  return expectShape(*this, "result",
                     cast<ShapedType>(getResult().getType()),
                     cast<ShapedType>(getInput().getType()).getShape());
}
