#include "dialects/fp8/Fp8Dialect.h"

#include "dialects/common/Verify.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace octet;
using namespace octet::fp8;

#include "dialects/fp8/Fp8Dialect.cpp.inc"
#include "dialects/fp8/Fp8Enums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/fp8/Fp8Attrs.cpp.inc"

void Fp8Dialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/fp8/Fp8Attrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/fp8/Fp8Ops.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/fp8/Fp8Ops.cpp.inc"

namespace octet::fp8 {

float maxFinite(Type fp8Type) {
  return isa<Float8E5M2Type>(fp8Type) ? 57344.0f : 448.0f;
}

SmallVector<int64_t, 2> blockScaleShape(ArrayRef<int64_t> shape,
                                        ArrayRef<int64_t> block) {
  SmallVector<int64_t, 2> out;
  for (size_t i = 0; i < shape.size() && i < block.size(); ++i)
    out.push_back(ShapedType::isDynamic(shape[i])
                      ? ShapedType::kDynamic
                      : (shape[i] + block[i] - 1) / block[i]);
  return out;
}

} // namespace octet::fp8

//===----------------------------------------------------------------------===//
// Recipe
//===----------------------------------------------------------------------===//

LogicalResult
RecipeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                   RecipeKind kind, FormatKind, int64_t historyLen,
                   AmaxAlgorithm, int64_t margin, bool powerOfTwo) {
  if (historyLen < 1)
    return emitError() << "amax_history_len must be at least 1, got "
                       << historyLen;
  if (margin < 0)
    return emitError() << "margin must be non-negative, got " << margin;
  if (powerOfTwo && kind != RecipeKind::blockwise)
    return emitError() << "power_of_two_scales applies to the blockwise "
                          "recipe only";
  return success();
}

Type RecipeAttr::activationType(MLIRContext *ctx) const {
  return Float8E4M3FNType::get(ctx);
}
Type RecipeAttr::weightType(MLIRContext *ctx) const {
  return Float8E4M3FNType::get(ctx);
}
Type RecipeAttr::gradientType(MLIRContext *ctx) const {
  if (getFormat() == FormatKind::hybrid)
    return Float8E5M2Type::get(ctx);
  return Float8E4M3FNType::get(ctx);
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

static LogicalResult verifyAmaxReduce(Operation *op,
                                      std::optional<ArrayAttr> groups) {
  if (!groups)
    return success();
  for (Attribute g : *groups) {
    StringRef name = cast<StringAttr>(g).getValue();
    if (name != "data" && name != "tensor")
      return op->emitOpError("amax_reduce groups are \"data\" and "
                             "\"tensor\"; got '")
             << name << "'";
  }
  return success();
}

static LogicalResult verifyBlock(Operation *op, ArrayRef<int64_t> block,
                                 ShapedType data, ShapedType scales,
                                 StringRef what) {
  if (block.size() != 2)
    return op->emitOpError("block must have 2 entries, got ")
           << block.size();
  if (block[0] < 1 || block[1] < 1)
    return op->emitOpError("block sizes must be positive");
  if (failed(expectRank(op, what, data, 2)))
    return failure();
  return expectShape(op, "scales", scales,
                     blockScaleShape(data.getShape(), block));
}

LogicalResult QuantizeOp::verify() {
  if (failed(verifyAmaxReduce(*this, getAmaxReduce())))
    return failure();
  return expectShape(*this, "result",
                     cast<ShapedType>(getResult().getType()),
                     cast<ShapedType>(getInput().getType()).getShape());
}

LogicalResult DequantizeOp::verify() {
  return expectShape(*this, "result",
                     cast<ShapedType>(getResult().getType()),
                     cast<ShapedType>(getInput().getType()).getShape());
}

LogicalResult AmaxOp::verify() {
  return verifyAmaxReduce(*this, getAmaxReduce());
}

LogicalResult ComputeScaleOp::verify() {
  if (getMargin() < 0)
    return emitOpError("margin must be non-negative, got ") << getMargin();
  if (!(getEps().convertToFloat() > 0.0f))
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult ScaleUpdateOp::verify() {
  RecipeAttr recipe = getRecipe();
  if (recipe.getKind() != RecipeKind::delayed)
    return emitOpError("scale_update belongs to the delayed recipe; got "
                       "recipe kind '")
           << stringifyRecipeKind(recipe.getKind()) << "'";
  auto history = cast<ShapedType>(getAmaxHistory().getType());
  if (failed(expectShape(*this, "amax_history", history,
                         {recipe.getAmaxHistoryLen()})))
    return failure();
  if (getNewHistory().getType() != history)
    return emitOpError("new_history must have the history's type ")
           << history << ", got " << getNewHistory().getType();
  if (!(getEps().convertToFloat() > 0.0f))
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult BlockQuantizeOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getResult().getType());
  if (out.getElementType() != getDtype())
    return emitOpError("result element type ")
           << out.getElementType() << " differs from dtype " << getDtype();
  if (failed(verifyAmaxReduce(*this, getAmaxReduce())) ||
      failed(expectShape(*this, "result", out, in.getShape())))
    return failure();
  return verifyBlock(*this, getBlock(), in,
                     cast<ShapedType>(getScales().getType()), "input");
}

int64_t BlockFactorsOp::factorStride(int64_t rows, int64_t cols,
                                     ArrayRef<int64_t> block) {
  return block[0] == 1 ? rows : (cols + 3) / 4 * 4;
}

int64_t BlockFactorsOp::factorCount(int64_t rows, int64_t cols,
                                    ArrayRef<int64_t> block) {
  return (block[0] == 1 ? cols : rows) * factorStride(rows, cols, block);
}

LogicalResult BlockFactorsOp::verify() {
  ArrayRef<int64_t> block = getBlock();
  if (block.size() != 2 || !((block[0] == 1 && block[1] == 128) ||
                             (block[0] == 128 && block[1] == 128)))
    return emitOpError("block must be [1, 128] (VEC128) or [128, 128] "
                       "(BLK128x128), the layouts cuBLASLt reads on sm_90");
  auto scales = cast<ShapedType>(getScales().getType());
  if (failed(expectRank(*this, "scales", scales, 2)) ||
      !scales.hasStaticShape())
    return emitOpError("scales must be a static 2-D tensor");
  int64_t count = factorCount(scales.getDimSize(0), scales.getDimSize(1),
                              block);
  return expectShape(*this, "factors",
                     cast<ShapedType>(getFactors().getType()), {count});
}

LogicalResult BlockDequantizeOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  if (failed(expectShape(*this, "result",
                         cast<ShapedType>(getResult().getType()),
                         in.getShape())))
    return failure();
  return verifyBlock(*this, getBlock(), in,
                     cast<ShapedType>(getScales().getType()), "input");
}

static LogicalResult verifyOperandScale(Operation *op, StringRef what,
                                        ShapedType data, ShapedType scale,
                                        std::optional<ArrayRef<int64_t>> block) {
  if (!block)
    return expectRank(op, Twine(what + " scale").str(), scale, 0);
  return verifyBlock(op, *block, data, scale, what);
}

LogicalResult MatmulOp::verify() {
  auto a = cast<RankedTensorType>(getA().getType());
  auto b = cast<RankedTensorType>(getB().getType());
  auto d = cast<RankedTensorType>(getResult().getType());
  if (failed(expectRank(*this, "a", a, 2)) ||
      failed(expectRank(*this, "b", b, 2)) ||
      failed(expectRank(*this, "result", d, 2)))
    return failure();
  if (failed(verifyOperandScale(*this, "a", a,
                                cast<ShapedType>(getAScale().getType()),
                                getABlock())) ||
      failed(verifyOperandScale(*this, "b", b,
                                cast<ShapedType>(getBScale().getType()),
                                getBBlock())))
    return failure();
  if (getInverseScales() && (getABlock() || getBBlock()))
    return emitOpError("inverse_scales is for tensorwise scales; block "
                       "scales are the quantize scales of their blocks");
  if (isa<Float8E5M2Type>(a.getElementType()) &&
      isa<Float8E5M2Type>(b.getElementType()))
    return emitOpError("E5M2 x E5M2 has no FP8 GEMM on Hopper: one operand "
                       "must be E4M3");
  auto mn = verifyMatmulShapes(*this, a, b, getTransposeA(), getTransposeB());
  if (failed(mn))
    return failure();
  auto [m, n] = *mn;
  if (getBias() &&
      failed(expectShape(*this, "bias", cast<ShapedType>(getBias().getType()),
                         {n})))
    return failure();
  if (failed(verifyGemmRole(*this, getRole())))
    return failure();
  return expectShape(*this, "result", d, {m, n});
}

LogicalResult TransposeOp::verify() {
  auto in = cast<ShapedType>(getInput().getType());
  auto out = cast<ShapedType>(getResult().getType());
  auto scale = cast<ShapedType>(getScale().getType());
  auto outScale = cast<ShapedType>(getResultScale().getType());
  if (failed(expectSameElementType(*this, "result", out, "input", in)) ||
      failed(expectRank(*this, "input", in, 2)) ||
      failed(expectShape(*this, "result", out,
                         {in.getDimSize(1), in.getDimSize(0)})))
    return failure();
  if (failed(verifyOperandScale(*this, "input", in, scale, getBlock())))
    return failure();
  if (!getBlock())
    return expectRank(*this, "result scale", outScale, 0);
  return expectShape(*this, "result scale", outScale,
                     {scale.getDimSize(1), scale.getDimSize(0)});
}
