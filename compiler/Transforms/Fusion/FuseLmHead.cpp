// octet-fuse-lm-head: the LM head GEMM, cross-entropy, its gradient and the
// head's dgrad and wgrad as one kernel that walks the tokens in chunks, so
// the fp32 logits [tokens, vocab] and their gradient never exist whole.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace octet {
#define GEN_PASS_DEF_OCTETFUSELMHEAD
#include "compiler/Transforms/Fusion/FusionPasses.h.inc"
} // namespace octet

using namespace mlir;
using namespace octet;

namespace {

// Chunks small enough that one chunk's logits stay in L2-sized slabs of the
// arena rather than gigabytes (Llama 3's vocabulary: 512 rows, 256 MiB).
constexpr int64_t kChunkLogitBytes = 256ll << 20;

using fusion::throughViews;

void fuse(fusion::LmHead m) {
  Block *block = m.fprop->getBlock();
  graph::CrossEntropyOp ce = m.crossEntropy;
  graph::CrossEntropyGradOp ceGrad = m.crossEntropyGrad;
  Value x = m.fprop.getA(), w = m.fprop.getB();
  // The kernel has the forward's input at hand.
  kernel::FusedOp recompute;
  Value xw = fusion::wgradInputOf(m, recompute);
  Value labels = m.lossInput(ce.getLabels());
  Value mask = m.lossInput(ce.getLossMask());
  Value dloss = m.lossGradInput(ceGrad.getGrad());
  llvm::SetVector<Value> inputs;
  for (Value v : {x, w, labels, mask, dloss, xw})
    inputs.insert(v);
  // After every input, before every reader of the three results.
  Operation *after = nullptr;
  for (Value v : inputs)
    if (Operation *def = v.getDefiningOp())
      if (def->getBlock() == block && (!after || after->isBeforeInBlock(def)))
        after = def;
  SmallVector<Value> results = {m.loss->getResult(0), m.dgrad.getResult(),
                                m.wgrad.getResult()};
  // Views of a result that sit before `after` move behind the new kernel
  // when what reads them comes later.
  SmallVector<Operation *> moved;
  if (!fusion::readersFollow(*block, after, results, moved))
    return;

  OpBuilder b = after ? OpBuilder(after->getBlock(), ++Block::iterator(after))
                      : OpBuilder::atBlockBegin(block);
  Location loc = m.fprop.getLoc();
  SmallVector<Type> types;
  for (Value r : results)
    types.push_back(r.getType());
  auto fused = kernel::FusedOp::create(b, loc, types, inputs.getArrayRef(),
                                       "lm_head_cross_entropy", "row");
  Block &body = fused.getBodyBlock();
  auto arg = [&](Value v) {
    return body.getArgument(llvm::find(inputs, v) - inputs.begin());
  };
  OpBuilder in = OpBuilder::atBlockEnd(&body);
  auto logitsType = cast<RankedTensorType>(m.fprop.getResult().getType());
  Value logits = graph::MatmulOp::create(
      in, loc, logitsType, arg(x), arg(w), false, true,
      in.getStringAttr("fprop"), m.fprop.getParamAttr());
  Value logits3 =
      graph::ReshapeOp::create(in, loc, ce.getLogits().getType(), logits);
  Value loss = graph::CrossEntropyOp::create(in, loc, ce.getLoss().getType(), logits3,
                                             arg(labels), arg(mask), Value());
  Value dlogits3 = graph::CrossEntropyGradOp::create(
      in, loc, ceGrad.getResult().getType(), arg(dloss), logits3, arg(labels), arg(mask),
      Value());
  Value dlogits = graph::ReshapeOp::create(in, loc, logitsType, dlogits3);
  Value dx = graph::MatmulOp::create(
      in, loc, m.dgrad.getResult().getType(), dlogits, arg(w), false, false,
      in.getStringAttr("dgrad"), m.dgrad.getParamAttr());
  Value dw = graph::MatmulOp::create(
      in, loc, m.wgrad.getResult().getType(), dlogits, arg(xw), true, false,
      in.getStringAttr("wgrad"), m.wgrad.getParamAttr());
  kernel::YieldOp::create(in, loc, ValueRange{loss, dx, dw});

  int64_t tokens = logitsType.getDimSize(0), vocab = logitsType.getDimSize(1);
  int64_t chunk = 1;
  while (chunk * 2 <= tokens && chunk * 2 * vocab * 4 <= kChunkLogitBytes)
    chunk *= 2;
  fused->setAttr("chunk_rows", b.getI64IntegerAttr(chunk));
  fused->setAttr("layer", b.getI64IntegerAttr(-1));
  fused->setAttr("section", m.loss->getAttr("section"));

  for (auto [old, now] : llvm::zip(results, fused->getResults()))
    old.replaceAllUsesWith(now);
  fusion::placeViewsAfter(moved, fused);
  fusion::eraseReplacedLmHead(m, recompute);
}

struct FuseLmHead : public octet::impl::OctetFuseLmHeadBase<FuseLmHead> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<kernel::GemmOp> gemms(
          func.getBody().front().getOps<kernel::GemmOp>());
      for (kernel::GemmOp gemm : gemms)
        if (auto m = fusion::matchLmHead(gemm, /*wgradMayAccumulate=*/false)) {
          fuse(*m);
          break;
        }
    }
  }
};

} // namespace
