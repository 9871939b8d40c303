#include "dialects/graph/GraphDialect.h"

#include "dialects/common/Verify.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace octet;
using namespace octet::graph;

#include "dialects/graph/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/graph/GraphOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/graph/GraphOps.cpp.inc"

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  StringRef kind = getKind();
  if (kind != "weight" && kind != "bias" && kind != "norm" &&
      kind != "embedding" && kind != "state")
    return emitOpError("kind must be one of weight, bias, norm, embedding, "
                       "state; got '")
           << kind << "'";
  StringRef init = getInit();
  if (init != "normal" && init != "zeros" && init != "ones")
    return emitOpError("init must be one of normal, zeros, ones; got '")
           << init << "'";
  if (init == "normal" && !getInitStd())
    return emitOpError("init = \"normal\" needs init_std");
  if (getInitStd() && getInitStd()->convertToDouble() < 0)
    return emitOpError("init_std must be non-negative");
  if (!getTensorType().hasStaticShape())
    return emitOpError("variables need a static shape");
  return success();
}

static LogicalResult verifyVariableUse(Operation *op, FlatSymbolRefAttr name,
                                       Type valueType,
                                       SymbolTableCollection &symbolTable) {
  auto variable = symbolTable.lookupNearestSymbolFrom<VariableOp>(op, name);
  if (!variable)
    return op->emitOpError("'") << name.getValue()
                                << "' is not a graph.variable";
  if (variable.getType() != valueType)
    return op->emitOpError("type ")
           << valueType << " does not match variable '" << name.getValue()
           << "' of type " << variable.getType();
  return success();
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVariableUse(*this, getVariableAttr(), getType(), symbolTable);
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyVariableUse(*this, getVariableAttr(), getValue().getType(),
                           symbolTable);
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  auto ids = cast<RankedTensorType>(getIds().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (failed(expectRank(*this, "table", table, 2)))
    return failure();
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(table.getDimSize(1));
  // The gather may round: an F32 table gives BF16 activations.
  return expectShape(*this, "result", result, expected);
}

LogicalResult LinearOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto weight = cast<RankedTensorType>(getWeight().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (failed(expectRank(*this, "weight", weight, 2)) ||
      failed(expectMinRank(*this, "input", input, 1)))
    return failure();
  int64_t k = input.getShape().back();
  if (!sameDim(k, weight.getDimSize(1)))
    return emitOpError("weight is [out, in]: its dimension 1 (")
           << weight.getDimSize(1) << ") must equal the input's last dimension ("
           << k << ")";
  int64_t n = weight.getDimSize(0);
  if (getBias()) {
    auto bias = cast<RankedTensorType>(getBias().getType());
    if (failed(expectShape(*this, "bias", bias, {n})))
      return failure();
  }
  SmallVector<int64_t> expected(input.getShape());
  expected.back() = n;
  return expectShape(*this, "result", result, expected);
}

LogicalResult MatmulOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (failed(expectRank(*this, "lhs", lhs, 2)) ||
      failed(expectRank(*this, "rhs", rhs, 2)) ||
      failed(expectRank(*this, "result", result, 2)))
    return failure();
  int64_t m = getTransposeA() ? lhs.getDimSize(1) : lhs.getDimSize(0);
  int64_t ka = getTransposeA() ? lhs.getDimSize(0) : lhs.getDimSize(1);
  int64_t kb = getTransposeB() ? rhs.getDimSize(1) : rhs.getDimSize(0);
  int64_t n = getTransposeB() ? rhs.getDimSize(0) : rhs.getDimSize(1);
  if (!sameDim(ka, kb))
    return emitOpError("contraction dimensions differ: lhs gives K = ")
           << ka << ", rhs gives K = " << kb;
  if (auto role = getRole()) {
    if (*role != "fprop" && *role != "dgrad" && *role != "wgrad")
      return emitOpError("role must be fprop, dgrad or wgrad; got '")
             << *role << "'";
  }
  return expectShape(*this, "result", result, {m, n});
}

static LogicalResult verifyNormWeight(Operation *op, RankedTensorType input,
                                      Value param, StringRef what) {
  auto type = cast<RankedTensorType>(param.getType());
  if (input.getRank() < 1)
    return op->emitOpError("input must have rank at least 1");
  return expectShape(op, what, type, {input.getShape().back()});
}

LogicalResult RMSNormOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(verifyNormWeight(*this, input, getWeight(), "weight")) ||
      failed(expectShape(*this, "result",
                         cast<RankedTensorType>(getResult().getType()),
                         input.getShape())))
    return failure();
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  if (failed(verifyNormWeight(*this, input, getWeight(), "weight")) ||
      failed(verifyNormWeight(*this, input, getBias(), "bias")) ||
      failed(expectShape(*this, "result",
                         cast<RankedTensorType>(getResult().getType()),
                         input.getShape())))
    return failure();
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult RopeOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto positions = cast<RankedTensorType>(getPositions().getType());
  if (failed(expectRank(*this, "input", input, 4)) ||
      failed(expectShape(*this, "positions", positions,
                         input.getShape().take_front(2))) ||
      failed(expectShape(*this, "result",
                         cast<RankedTensorType>(getResult().getType()),
                         input.getShape())))
    return failure();
  int64_t headDim = input.getDimSize(3);
  if (!ShapedType::isDynamic(headDim) && headDim % 2 != 0)
    return emitOpError("head dimension must be even for rotary embedding; got ")
           << headDim;
  if (getTheta().convertToDouble() <= 0)
    return emitOpError("theta must be positive");
  StringRef scaling = getScaling();
  if (scaling == "llama3") {
    if (!getFactor() || !getLowFreqFactor() || !getHighFreqFactor() ||
        !getOriginalMaxPosition())
      return emitOpError("scaling = \"llama3\" needs factor, low_freq_factor, "
                         "high_freq_factor and original_max_position");
  } else if (scaling != "none") {
    return emitOpError("scaling must be \"none\" or \"llama3\"; got '")
           << scaling << "'";
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  auto q = cast<RankedTensorType>(getQ().getType());
  auto k = cast<RankedTensorType>(getK().getType());
  auto v = cast<RankedTensorType>(getV().getType());
  if (failed(expectRank(*this, "q", q, 4)) ||
      failed(expectRank(*this, "k", k, 4)) ||
      failed(expectShape(*this, "v", v, k.getShape())))
    return failure();
  if (!sameDim(q.getDimSize(0), k.getDimSize(0)) ||
      !sameDim(q.getDimSize(1), k.getDimSize(1)) ||
      !sameDim(q.getDimSize(3), k.getDimSize(3)))
    return emitOpError("q [B, S, Hq, Dh] and k [B, S, Hkv, Dh] must agree on "
                       "B, S and Dh; got ")
           << q << " and " << k;
  int64_t hq = q.getDimSize(2), hkv = k.getDimSize(2);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError("kv heads (") << hkv << ") must divide query heads ("
                                     << hq << ")";
  if (getCuSeqlens()) {
    auto cu = cast<RankedTensorType>(getCuSeqlens().getType());
    if (failed(expectRank(*this, "cu_seqlens", cu, 1)))
      return failure();
  }
  if (failed(expectShape(*this, "result",
                         cast<RankedTensorType>(getResult().getType()),
                         q.getShape())))
    return failure();
  return expectShape(*this, "lse", cast<RankedTensorType>(getLse().getType()),
                     {q.getDimSize(0), hq, q.getDimSize(1)});
}

LogicalResult ReshapeOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (!input.hasStaticShape() || !result.hasStaticShape())
    return emitOpError("reshape needs static shapes");
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("element count changes from ")
           << input.getNumElements() << " to " << result.getNumElements();
  return expectSameElementType(*this, "result", result, "input", input);
}

LogicalResult CastOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  return expectShape(*this, "result",
                     cast<RankedTensorType>(getResult().getType()),
                     input.getShape());
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\"; got '")
           << getApproximate() << "'";
  return success();
}

// A chunk's batch mask holds at least the chunk's tokens, in the chunk
// mask's element type.
static LogicalResult verifyBatchMask(Operation *op, Value batchMask,
                                     RankedTensorType chunkMask) {
  if (!batchMask)
    return success();
  auto batch = cast<RankedTensorType>(batchMask.getType());
  if (batch.getElementType() != chunkMask.getElementType())
    return op->emitOpError("batch_mask has element type ")
           << batch.getElementType() << " but loss_mask has "
           << chunkMask.getElementType();
  if (!batch.hasStaticShape() || !chunkMask.hasStaticShape() ||
      batch.getNumElements() < chunkMask.getNumElements())
    return op->emitOpError("batch_mask ")
           << batch << " must hold at least the chunk's " << chunkMask
           << " tokens";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = cast<RankedTensorType>(getLogits().getType());
  auto labels = cast<RankedTensorType>(getLabels().getType());
  auto mask = cast<RankedTensorType>(getLossMask().getType());
  if (failed(expectMinRank(*this, "logits", logits, 2)))
    return failure();
  auto prefix = logits.getShape().drop_back();
  if (failed(expectShape(*this, "labels", labels, prefix)) ||
      failed(expectShape(*this, "loss_mask", mask, prefix)))
    return failure();
  return verifyBatchMask(*this, getBatchMask(), mask);
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

static RankedTensorType rankedType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

LogicalResult FillOp::verify() {
  auto type = rankedType(getResult());
  if (!type.hasStaticShape())
    return emitOpError("fill needs a static shape");
  if (!isa<FloatType, IntegerType>(type.getElementType()))
    return emitOpError("fill needs a float or integer element type");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto grad = rankedType(getGrad());
  auto ids = rankedType(getIds());
  auto result = rankedType(getResult());
  if (failed(expectRank(*this, "result", result, 2)))
    return failure();
  SmallVector<int64_t> expected(ids.getShape());
  expected.push_back(result.getDimSize(1));
  // BF16 gradients scatter-add into an F32 table gradient.
  return expectShape(*this, "grad", grad, expected);
}

LogicalResult RMSNormGradOp::verify() {
  auto input = rankedType(getInput());
  if (failed(expectShape(*this, "grad", rankedType(getGrad()),
                         input.getShape())) ||
      failed(verifyNormWeight(*this, input, getWeight(), "weight")) ||
      failed(expectShape(*this, "input_grad", rankedType(getInputGrad()),
                         input.getShape())) ||
      failed(expectShape(*this, "weight_grad", rankedType(getWeightGrad()),
                         rankedType(getWeight()).getShape())))
    return failure();
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto input = rankedType(getInput());
  auto weightShape = rankedType(getWeight()).getShape();
  if (failed(expectShape(*this, "grad", rankedType(getGrad()),
                         input.getShape())) ||
      failed(verifyNormWeight(*this, input, getWeight(), "weight")) ||
      failed(expectShape(*this, "input_grad", rankedType(getInputGrad()),
                         input.getShape())) ||
      failed(expectShape(*this, "weight_grad", rankedType(getWeightGrad()),
                         weightShape)) ||
      failed(expectShape(*this, "bias_grad", rankedType(getBiasGrad()),
                         weightShape)))
    return failure();
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  auto q = rankedType(getQ());
  auto k = rankedType(getK());
  if (failed(expectRank(*this, "q", q, 4)) ||
      failed(expectRank(*this, "k", k, 4)) ||
      failed(expectShape(*this, "v", rankedType(getV()), k.getShape())) ||
      failed(expectShape(*this, "grad", rankedType(getGrad()), q.getShape())) ||
      failed(expectShape(*this, "out", rankedType(getOut()), q.getShape())))
    return failure();
  if (!sameDim(q.getDimSize(0), k.getDimSize(0)) ||
      !sameDim(q.getDimSize(1), k.getDimSize(1)) ||
      !sameDim(q.getDimSize(3), k.getDimSize(3)))
    return emitOpError("q [B, S, Hq, Dh] and k [B, S, Hkv, Dh] must agree on "
                       "B, S and Dh; got ")
           << q << " and " << k;
  int64_t hq = q.getDimSize(2), hkv = k.getDimSize(2);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError("kv heads (") << hkv << ") must divide query heads ("
                                     << hq << ")";
  if (failed(expectShape(*this, "lse", rankedType(getLse()),
                         {q.getDimSize(0), hq, q.getDimSize(1)})))
    return failure();
  if (getCuSeqlens() &&
      failed(expectRank(*this, "cu_seqlens", rankedType(getCuSeqlens()), 1)))
    return failure();
  if (failed(expectShape(*this, "q_grad", rankedType(getQGrad()),
                         q.getShape())) ||
      failed(expectShape(*this, "k_grad", rankedType(getKGrad()),
                         k.getShape())))
    return failure();
  return expectShape(*this, "v_grad", rankedType(getVGrad()), k.getShape());
}

LogicalResult GeluGradOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\"; got '")
           << getApproximate() << "'";
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  auto logits = rankedType(getLogits());
  if (failed(expectMinRank(*this, "logits", logits, 2)))
    return failure();
  auto prefix = logits.getShape().drop_back();
  if (failed(expectShape(*this, "labels", rankedType(getLabels()), prefix)) ||
      failed(expectShape(*this, "loss_mask", rankedType(getLossMask()),
                         prefix)) ||
      failed(verifyBatchMask(*this, getBatchMask(),
                             rankedType(getLossMask()))))
    return failure();
  return expectShape(*this, "result", rankedType(getResult()),
                     logits.getShape());
}

LogicalResult BiasGradOp::verify() {
  auto grad = rankedType(getGrad());
  if (failed(expectMinRank(*this, "grad", grad, 1)))
    return failure();
  return expectShape(*this, "result", rankedType(getResult()),
                     {grad.getShape().back()});
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

LogicalResult LrScheduleOp::verify() {
  if (getLr().convertToDouble() < 0)
    return emitOpError("lr must be non-negative; got ")
           << getLr().convertToDouble();
  // The getters return the raw uint64_t; read them signed.
  int64_t warmup = getWarmupStepsAttr().getInt();
  int64_t total = getTotalStepsAttr().getInt();
  if (warmup < 0)
    return emitOpError("warmup_steps must be non-negative; got ") << warmup;
  if (total < 1)
    return emitOpError("total_steps must be at least 1; got ") << total;
  double ratio = getMinLrRatio().convertToDouble();
  if (ratio < 0 || ratio > 1)
    return emitOpError("min_lr_ratio must lie in [0, 1]; got ") << ratio;
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  if (getScale().convertToDouble() <= 0)
    return emitOpError("scale must be positive");
  return success();
}

LogicalResult ClipScaleOp::verify() {
  if (getMaxNorm().convertToDouble() < 0)
    return emitOpError("max_norm must be non-negative (0 disables clipping)");
  if (getScale().convertToDouble() <= 0)
    return emitOpError("scale must be positive");
  return success();
}

LogicalResult AdamWUpdateOp::verify() {
  auto param = rankedType(getParam());
  for (auto [what, value] :
       {std::pair<StringRef, Value>{"grad", getGrad()},
        {"exp_avg", getExpAvg()},
        {"exp_avg_sq", getExpAvgSq()},
        {"new_param", getNewParam()},
        {"new_exp_avg", getNewExpAvg()},
        {"new_exp_avg_sq", getNewExpAvgSq()}})
    if (failed(expectShape(*this, what, rankedType(value), param.getShape())))
      return failure();
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  if (beta1 < 0 || beta1 >= 1)
    return emitOpError("beta1 must lie in [0, 1); got ") << beta1;
  if (beta2 < 0 || beta2 >= 1)
    return emitOpError("beta2 must lie in [0, 1); got ") << beta2;
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  if (getWeightDecay().convertToDouble() < 0)
    return emitOpError("weight_decay must be non-negative");
  return success();
}

LogicalResult SliceOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t dim = getDim(), offset = getOffset();
  if (failed(expectRank(*this, "result", result, input.getRank())) ||
      failed(expectSameElementType(*this, "result", result, "input", input)))
    return failure();
  if (dim < 0 || dim >= input.getRank())
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << input.getRank();
  SmallVector<int64_t> expected(input.getShape());
  expected[dim] = result.getDimSize(dim);
  if (offset < 0 || offset + result.getDimSize(dim) > input.getDimSize(dim))
    return emitOpError("slice [")
           << offset << ", " << offset + result.getDimSize(dim)
           << ") does not fit dimension " << dim << " of size "
           << input.getDimSize(dim);
  return expectShape(*this, "result", result, expected);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one operand");
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t dim = getDim();
  if (dim < 0 || dim >= result.getRank())
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << result.getRank();
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (failed(expectRank(*this, "operand", t, result.getRank())) ||
        failed(expectSameElementType(*this, "operand", t, "result", result)))
      return failure();
    SmallVector<int64_t> expected(result.getShape());
    expected[dim] = t.getDimSize(dim);
    if (failed(expectShape(*this, "operand", t, expected)))
      return failure();
    total += t.getDimSize(dim);
  }
  if (total != result.getDimSize(dim))
    return emitOpError("operands add up to ")
           << total << " along dim " << dim << " but the result has "
           << result.getDimSize(dim);
  return success();
}
