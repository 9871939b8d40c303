// octet-lower-fp8-casts: FP8 casts to NVVM conversion instructions.

#include "compiler/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace octet::codegen {
#define GEN_PASS_DEF_LOWERFP8CASTS
#include "compiler/Codegen/Passes.h.inc"
} // namespace octet::codegen

using namespace mlir;

namespace octet::codegen {
namespace {

bool isFp8(Type t) { return isa<Float8E4M3FNType, Float8E5M2Type>(t); }

// Elements of a scalar or 1-D vector value, as scalars.
SmallVector<Value> unpack(OpBuilder &b, Location loc, Value v) {
  auto vec = dyn_cast<VectorType>(v.getType());
  if (!vec)
    return {v};
  SmallVector<Value> out;
  for (int64_t i = 0; i < vec.getNumElements(); ++i)
    out.push_back(vector::ExtractOp::create(b, loc, v, i));
  return out;
}

Value pack(OpBuilder &b, Location loc, Type type, ArrayRef<Value> elems) {
  auto vec = dyn_cast<VectorType>(type);
  if (!vec)
    return elems.front();
  Value out = arith::ConstantOp::create(b, loc, vec, b.getZeroAttr(vec));
  for (auto [i, e] : llvm::enumerate(elems))
    out = vector::InsertOp::create(b, loc, e, out, i);
  return out;
}

Type withElement(Type shaped, Type element) {
  if (auto vec = dyn_cast<VectorType>(shaped))
    return vec.clone(element);
  return element;
}

// f32 (or any narrower float, widened first) → FP8 with round-to-nearest-even
// and satfinite, two elements per cvt. The GPU's satfinite is what the fp8
// dialect's quantize promises: overflow clamps to ±max instead of NaN.
struct TruncToFp8 : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type dstElem = getElementTypeOrSelf(op.getType());
    if (!isFp8(dstElem))
      return failure();
    Location loc = op.getLoc();
    Value in = op.getIn();
    Type f32 = rewriter.getF32Type();
    if (!getElementTypeOrSelf(in.getType()).isF32())
      in = arith::ExtFOp::create(rewriter, loc, withElement(in.getType(), f32),
                                 in);
    SmallVector<Value> elems = unpack(rewriter, loc, in);
    Value zero = arith::ConstantOp::create(rewriter, loc, f32,
                                           rewriter.getF32FloatAttr(0.0f));
    auto pairType = VectorType::get({2}, rewriter.getI8Type());
    SmallVector<Value> bytes;
    for (size_t i = 0; i < elems.size(); i += 2) {
      Value lo = elems[i];
      Value hi = i + 1 < elems.size() ? elems[i + 1] : zero;
      // The packed result holds operand `a` in the high byte, `b` in the low
      // one; element 0 of the i8 pair is the low byte.
      Value pair = NVVM::ConvertF32x2ToF8x2Op::create(
          rewriter, loc, pairType, hi, lo, NVVM::FPRoundingMode::RN,
          NVVM::SaturationMode::SATFINITE, /*relu=*/false, dstElem);
      bytes.push_back(vector::ExtractOp::create(rewriter, loc, pair, 0));
      if (i + 1 < elems.size())
        bytes.push_back(vector::ExtractOp::create(rewriter, loc, pair, 1));
    }
    Type i8Type = withElement(op.getType(), rewriter.getI8Type());
    Value packed = pack(rewriter, loc, i8Type, bytes);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), packed);
    return success();
  }
};

// FP8 → f32 through the exact f8x2 → f16x2 conversion.
struct ExtFromFp8 : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElem = getElementTypeOrSelf(op.getIn().getType());
    if (!isFp8(srcElem))
      return failure();
    Location loc = op.getLoc();
    Type i8 = rewriter.getI8Type();
    Value bits = arith::BitcastOp::create(
        rewriter, loc, withElement(op.getIn().getType(), i8), op.getIn());
    SmallVector<Value> bytes = unpack(rewriter, loc, bits);
    Value zero = arith::ConstantOp::create(rewriter, loc, i8,
                                           rewriter.getI8IntegerAttr(0));
    auto pairType = VectorType::get({2}, i8);
    auto halfPair = VectorType::get({2}, rewriter.getF16Type());
    Type dstElem = getElementTypeOrSelf(op.getType());
    SmallVector<Value> out;
    for (size_t i = 0; i < bytes.size(); i += 2) {
      Value hi = i + 1 < bytes.size() ? bytes[i + 1] : zero;
      Value pair = pack(rewriter, loc, pairType, {bytes[i], hi});
      Value halves = NVVM::ConvertF8x2ToF16x2Op::create(
          rewriter, loc, halfPair, pair, /*relu=*/false, srcElem);
      for (int64_t k = 0; k < 2 && i + k < bytes.size(); ++k) {
        Value h = vector::ExtractOp::create(rewriter, loc, halves, k);
        out.push_back(arith::ExtFOp::create(rewriter, loc, dstElem, h));
      }
    }
    rewriter.replaceOp(op, pack(rewriter, loc, op.getType(), out));
    return success();
  }
};

struct LowerFp8CastsPass
    : impl::LowerFp8CastsBase<LowerFp8CastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateLowerFp8CastsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void populateLowerFp8CastsPatterns(RewritePatternSet &patterns) {
  patterns.add<TruncToFp8, ExtFromFp8>(patterns.getContext());
}

} // namespace octet::codegen
