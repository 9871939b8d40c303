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
  if (failed(expectShape(*this, "result", result, expected)))
    return failure();
  return expectSameElementType(*this, "result", result, "table", table);
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
  return success();
}
