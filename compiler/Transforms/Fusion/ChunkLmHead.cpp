// octet-chunk-lm-head: the LM head, its loss and their gradients over
// chunks of tokens, so the [tokens, vocabulary] logits are never live
// whole: per chunk the fprop GEMM, the cross-entropy and its gradient
// (each divided by the whole batch's token count), the dgrad GEMM (its
// rows of dx) and the wgrad GEMM, accumulated into the previous chunk's.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "llvm/ADT/STLExtras.h"

#include <functional>

namespace octet {
#define GEN_PASS_DEF_OCTETCHUNKLMHEAD
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Chunks start on 16-byte boundaries (cuBLASLt's operand alignment) of the
// 4-byte labels and mask.
constexpr int64_t kRowAlignment = 4;

// The largest row count that divides `tokens`, is at most `limit` and a
// multiple of kRowAlignment; 0 if none.
int64_t chunkRows(int64_t tokens, int64_t limit) {
  for (int64_t rows = limit - limit % kRowAlignment; rows > 0;
       rows -= kRowAlignment)
    if (tokens % rows == 0)
      return rows;
  return 0;
}

RankedTensorType withShape(Value v, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(
      shape, cast<RankedTensorType>(v.getType()).getElementType());
}

void copyPlacement(Operation *from, Operation *to) {
  for (StringRef name : {"layer", "section"})
    if (Attribute attr = from->getAttr(name))
      to->setAttr(name, attr);
}

struct Chunker {
  fusion::LmHead m;
  int64_t limit;

  LogicalResult run() {
    Block *block = m.fprop->getBlock();
    graph::CrossEntropyOp ce = m.crossEntropy;
    graph::CrossEntropyGradOp ceGrad = m.crossEntropyGrad;
    Value x = m.fprop.getA(), w = m.fprop.getB();
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t tokens = xType.getDimSize(0);
    if (tokens <= limit)
      return success();
    int64_t rows = chunkRows(tokens, limit);
    if (!rows)
      return m.fprop.emitError("octet-chunk-lm-head: no chunk of at most ")
             << limit << " tokens, a multiple of " << kRowAlignment
             << ", divides the head's " << tokens
             << " tokens; set chunk-tokens to a multiple of " << kRowAlignment
             << " that divides them, or 0 to keep the head whole";
    // Reading the forward's input drops the backward's recompute of it.
    kernel::FusedOp recompute;
    Value xw = fusion::wgradInputOf(m, recompute);
    Value labels = m.lossInput(ce.getLabels());
    Value mask = m.lossInput(ce.getLossMask());
    Value dloss = m.lossGradInput(ceGrad.getGrad());
    Value accumulator = m.wgrad.getC();
    auto labelsType = cast<RankedTensorType>(labels.getType());
    if (labelsType.getNumElements() != tokens)
      return success();

    // After every input, before every reader of the three results. A load
    // of the wgrad's accumulator moves up to the chunks when no store of
    // its variable lies between.
    auto load = accumulator ? accumulator.getDefiningOp<graph::LoadOp>()
                            : graph::LoadOp();
    Operation *after = nullptr;
    for (Value v : {x, w, labels, mask, dloss, xw, accumulator})
      if (Operation *def = v ? v.getDefiningOp() : nullptr)
        if (def != load && def->getBlock() == block &&
            (!after || after->isBeforeInBlock(def)))
          after = def;
    if (load && load->getBlock() == block && after &&
        after->isBeforeInBlock(load)) {
      for (Operation *op = after; op != load; op = op->getNextNode())
        if (auto store = dyn_cast<graph::StoreOp>(op);
            store && store.getVariable() == load.getVariable())
          return success();
      load->moveAfter(after);
      after = load;
    }
    SmallVector<Value> results = {m.loss->getResult(0), m.dgrad.getResult(),
                                  m.wgrad.getResult()};
    // Views of a result that sit before `after` move behind the chunks when
    // what reads them comes later.
    SmallVector<Operation *> moved;
    if (!fusion::readersFollow(*block, after, results, moved))
      return success();

    OpBuilder b = after
                      ? OpBuilder(after->getBlock(), ++Block::iterator(after))
                      : OpBuilder::atBlockBegin(block);
    Location loc = m.fprop.getLoc();
    auto logitsType = cast<RankedTensorType>(m.fprop.getResult().getType());
    int64_t vocab = logitsType.getDimSize(1), hidden = xType.getDimSize(1);
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    auto slice = [&](Value v, ArrayRef<int64_t> shape, int64_t dim,
                     int64_t offset) -> Value {
      return graph::SliceOp::create(b, loc, withShape(v, shape), v, i64(dim),
                                    i64(offset));
    };
    auto reshape = [&](Value v, ArrayRef<int64_t> shape) -> Value {
      return graph::ReshapeOp::create(b, loc, withShape(v, shape), v);
    };
    auto gemm = [&](kernel::GemmOp like, Type type, Value lhs, Value rhs,
                    Value c) {
      auto g = kernel::GemmOp::create(
          b, loc, type, TypeRange(), lhs, rhs, Value(), Value(), Value(),
          Value(), Value(), c, like.getTransposeA(), like.getTransposeB(),
          like.getRoleAttr(), like.getParamAttr(), StringAttr(),
          DenseI64ArrayAttr(), DenseI64ArrayAttr());
      copyPlacement(like, g);
      return g.getResult();
    };
    // A one-op kernel like `like` over `inputs`, its op built by `body`
    // from the block arguments.
    auto kernelLike = [&](kernel::FusedOp like, Type type, ValueRange inputs,
                          function_ref<Value(OpBuilder &, ValueRange)> body) {
      auto fused = kernel::FusedOp::create(b, loc, TypeRange{type}, inputs,
                                           like.getName(), like.getKind());
      OpBuilder in = OpBuilder::atBlockEnd(&fused.getBodyBlock());
      Value out = body(in, fused.getBodyBlock().getArguments());
      kernel::YieldOp::create(in, loc, out);
      copyPlacement(like, fused);
      return fused->getResult(0);
    };

    Value labelRow = reshape(labels, {1, tokens});
    Value maskRow = reshape(mask, {1, tokens});
    Type lossType = ce.getLoss().getType();
    Type chunkGrad = RankedTensorType::get(
        {1, rows, vocab},
        cast<RankedTensorType>(ceGrad.getResult().getType()).getElementType());
    auto dgradType = cast<RankedTensorType>(m.dgrad.getResult().getType());
    SmallVector<Value> losses, dxs;
    Value dw = accumulator;
    for (int64_t at = 0; at < tokens; at += rows) {
      Value xc = slice(x, {rows, hidden}, 0, at);
      Value xwc = xw == x ? xc : slice(xw, {rows, hidden}, 0, at);
      Value logits = gemm(m.fprop, withShape(m.fprop.getResult(), {rows, vocab}),
                          xc, w, Value());
      Value logits3 = reshape(logits, {1, rows, vocab});
      Value labelsC = slice(labelRow, {1, rows}, 1, at);
      Value maskC = slice(maskRow, {1, rows}, 1, at);
      losses.push_back(kernelLike(
          m.loss, lossType, ValueRange{logits3, labelsC, maskC, mask},
          [&](OpBuilder &in, ValueRange a) -> Value {
            return graph::CrossEntropyOp::create(in, loc, lossType, a[0], a[1],
                                                 a[2], a[3]);
          }));
      Value dlogits3 = kernelLike(
          m.lossGrad, chunkGrad,
          ValueRange{dloss, logits3, labelsC, maskC, mask},
          [&](OpBuilder &in, ValueRange a) -> Value {
            return graph::CrossEntropyGradOp::create(in, loc, chunkGrad, a[0],
                                                     a[1], a[2], a[3], a[4]);
          });
      Value dlogits = reshape(dlogits3, {rows, vocab});
      dxs.push_back(gemm(m.dgrad,
                         RankedTensorType::get({rows, dgradType.getDimSize(1)},
                                               dgradType.getElementType()),
                         dlogits, w, Value()));
      dw = gemm(m.wgrad, m.wgrad.getResult().getType(), dlogits, xwc, dw);
    }
    // The chunks' losses, each already divided by the batch's count.
    auto sum = kernel::FusedOp::create(b, loc, TypeRange{lossType}, losses,
                                       "lm_head.loss", "elementwise");
    {
      OpBuilder in = OpBuilder::atBlockEnd(&sum.getBodyBlock());
      Value total = sum.getBodyBlock().getArgument(0);
      for (Value part : sum.getBodyBlock().getArguments().drop_front())
        total = graph::AddOp::create(in, loc, lossType, total, part);
      kernel::YieldOp::create(in, loc, total);
      copyPlacement(m.loss, sum);
    }
    // Each chunk's dgrad writes its rows of dx (the memory plan places the
    // pieces of a concatenation along dimension 0 in its buffer).
    Value dx = graph::ConcatOp::create(b, loc, dgradType, dxs, i64(0));

    SmallVector<Value> replacements = {sum->getResult(0), dx, dw};
    for (auto [old, now] : llvm::zip(results, replacements))
      old.replaceAllUsesWith(now);
    fusion::placeViewsAfter(moved, dx.getDefiningOp());
    fusion::eraseReplacedLmHead(m, recompute);
    return success();
  }
};

struct ChunkLmHead : public octet::impl::OctetChunkLmHeadBase<ChunkLmHead> {
  using OctetChunkLmHeadBase::OctetChunkLmHeadBase;
  void runOnOperation() override {
    if (chunkTokens <= 0)
      return;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<kernel::GemmOp> gemms(
          func.getBody().front().getOps<kernel::GemmOp>());
      for (kernel::GemmOp gemm : gemms)
        if (auto m = fusion::matchLmHead(gemm, /*wgradMayAccumulate=*/true)) {
          if (failed(Chunker{*m, chunkTokens}.run()))
            return signalPassFailure();
          break;
        }
    }
  }
};

} // namespace
