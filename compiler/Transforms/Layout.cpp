// octet-layout: K-major (TN) operands for every FP8 GEMM.

#include "compiler/Transforms/Precision.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace octet {
#define GEN_PASS_DEF_OCTETLAYOUT
#include "compiler/Transforms/PrecisionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

class LayoutPass : public octet::impl::OctetLayoutBase<LayoutPass> {
public:
  using OctetLayoutBase::OctetLayoutBase;

  void runOnOperation() override {
    copies.clear();
    getOperation().walk([&](fp8::MatmulOp mm) {
      OpBuilder b(mm);
      if (mm.getTransposeA()) {
        mm.setABlockAttr(retarget(b, mm.getAMutable(), mm.getAScaleMutable(),
                                  mm.getABlockAttr()));
        mm.setTransposeA(false);
      }
      if (!mm.getTransposeB()) {
        mm.setBBlockAttr(retarget(b, mm.getBMutable(), mm.getBScaleMutable(),
                                  mm.getBBlockAttr()));
        mm.setTransposeB(true);
      }
    });
    // The row-major saves the copies replaced.
    for (auto &[from, to] : copies)
      for (Value v : {from.first, from.second})
        if (auto save = v.getDefiningOp<graph::SaveOp>(); save && save->use_empty())
          save->erase();
  }

private:
  DenseMap<std::pair<Value, Value>, std::pair<Value, Value>> copies;

  // Points an operand (data, scale) at its transposed copy; returns the
  // copy's block shape.
  DenseI64ArrayAttr retarget(OpBuilder &b, OpOperand &data, OpOperand &scale,
                             DenseI64ArrayAttr block) {
    auto [t, ts] = transposed(b, data.get(), scale.get(), block);
    data.set(t);
    scale.set(ts);
    if (!block)
      return block;
    return b.getDenseI64ArrayAttr({block[1], block[0]});
  }

  // The K-major copy of (data, scale), made once per value right after its
  // producer. A saved tensor is transposed before the save, so the copy is
  // what stays alive until the backward.
  std::pair<Value, Value> transposed(OpBuilder &b, Value data, Value scale,
                                     DenseI64ArrayAttr block) {
    auto key = std::make_pair(data, scale);
    auto it = copies.find(key);
    if (it != copies.end())
      return it->second;
    auto dataSave = data.getDefiningOp<graph::SaveOp>();
    auto scaleSave = scale.getDefiningOp<graph::SaveOp>();
    if (dataSave && scaleSave) {
      auto [t, ts] = transposed(b, dataSave.getInput(), scaleSave.getInput(),
                                block);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(dataSave);
      Value savedData = graph::SaveOp::create(b, data.getLoc(), t.getType(), t);
      Value savedScale =
          graph::SaveOp::create(b, scale.getLoc(), ts.getType(), ts);
      return copies[key] = {savedData, savedScale};
    }
    OpBuilder::InsertionGuard guard(b);
    // After whichever of data and scale is defined last.
    Operation *dataDef = data.getDefiningOp(), *scaleDef = scale.getDefiningOp();
    Operation *after = dataDef;
    if (!after || (scaleDef && after->isBeforeInBlock(scaleDef)))
      after = scaleDef;
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(data).getOwner());
    auto type = cast<RankedTensorType>(data.getType());
    auto dataT = RankedTensorType::get(
        {type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
    auto scaleType = cast<RankedTensorType>(scale.getType());
    Type scaleT = scaleType;
    if (scaleType.getRank() == 2)
      scaleT = RankedTensorType::get(
          {scaleType.getDimSize(1), scaleType.getDimSize(0)},
          scaleType.getElementType());
    auto t = fp8::TransposeOp::create(b, data.getLoc(), dataT, scaleT, data,
                                      scale, block);
    return copies[key] = {t.getResult(), t.getResultScale()};
  }
};

} // namespace
