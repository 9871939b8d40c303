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

kernel::FusedOp singleOp(Operation *op, StringRef name) {
  auto fused = dyn_cast_or_null<kernel::FusedOp>(op);
  if (!fused || !fusion::bodyOnly(fused, {name}) ||
      fused.getBodyBlock().getOperations().size() != 2)
    return nullptr;
  return fused;
}

struct Match {
  kernel::GemmOp fprop, dgrad, wgrad;
  kernel::FusedOp loss, lossGrad;
};

// fprop → cross_entropy, cross_entropy_grad → dgrad, wgrad: plain
// (non-FP8, no epilogue) GEMMs of one parameter and nothing else reading
// the logits or their gradient.
std::optional<Match> match(kernel::GemmOp fprop) {
  auto plain = [](kernel::GemmOp g) {
    return g && !g.getAScale() && !g.getBias() && !g.getC() &&
           g.getEpilogueKind() == "none";
  };
  if (!plain(fprop) || fprop.getRole() != "fprop" || !fprop.getTransposeB() ||
      fprop.getTransposeA())
    return std::nullopt;
  Match m{fprop, nullptr, nullptr, nullptr, nullptr};
  for (Operation *reader : fusion::readersThroughViews(fprop.getResult())) {
    if (auto f = singleOp(reader, "graph.cross_entropy"); f && !m.loss)
      m.loss = f;
    else if (auto g = singleOp(reader, "graph.cross_entropy_grad");
             g && !m.lossGrad)
      m.lossGrad = g;
    else
      return std::nullopt;
  }
  if (!m.loss || !m.lossGrad)
    return std::nullopt;
  for (Operation *reader : fusion::readersThroughViews(m.lossGrad->getResult(0))) {
    auto g = dyn_cast<kernel::GemmOp>(reader);
    if (!plain(g) || g.getParam() != fprop.getParam() ||
        throughViews(g.getA()) != m.lossGrad->getResult(0))
      return std::nullopt;
    if (g.getRole() == "dgrad" && !m.dgrad && !g.getTransposeA() &&
        !g.getTransposeB() && g.getB() == fprop.getB())
      m.dgrad = g;
    else if (g.getRole() == "wgrad" && !m.wgrad && g.getTransposeA() &&
             !g.getTransposeB())
      m.wgrad = g;
    else
      return std::nullopt;
  }
  if (!m.dgrad || !m.wgrad)
    return std::nullopt;
  // Both cross-entropy kernels read the same logits, labels and mask.
  Block &lossBody = m.loss.getBodyBlock();
  auto ce = *lossBody.getOps<graph::CrossEntropyOp>().begin();
  auto ceGrad = *m.lossGrad.getBodyBlock().getOps<graph::CrossEntropyGradOp>().begin();
  auto outer = [](kernel::FusedOp f, Value inner) {
    return f.getInputs()[cast<BlockArgument>(inner).getArgNumber()];
  };
  if (throughViews(outer(m.lossGrad, ceGrad.getLogits())) !=
          fprop.getResult() ||
      outer(m.loss, ce.getLabels()) != outer(m.lossGrad, ceGrad.getLabels()) ||
      outer(m.loss, ce.getLossMask()) != outer(m.lossGrad, ceGrad.getLossMask()))
    return std::nullopt;
  return m;
}

// The one-op kernel behind `value` (through views), if any.
kernel::FusedOp oneOpKernel(Value value) {
  auto fused = throughViews(value).getDefiningOp<kernel::FusedOp>();
  if (!fused || fused.getBodyBlock().getOperations().size() != 2 ||
      fused->getNumResults() != 1)
    return nullptr;
  return fused;
}

// True if `recompute` recomputes what `original` computed: same inputs, the
// same op with the same attributes but autodiff's `recomputed` mark.
bool recomputes(kernel::FusedOp recompute, kernel::FusedOp original) {
  // A save is the same tensor, kept for the backward.
  auto unsaved = [](Value v) {
    while (auto save = v.getDefiningOp<graph::SaveOp>())
      v = save->getOperand(0);
    return v;
  };
  if (!recompute || !original || recompute == original ||
      recompute.getInputs().size() != original.getInputs().size() ||
      !llvm::all_of_zip(recompute.getInputs(), original.getInputs(),
                        [&](Value a, Value b) {
                          return unsaved(a) == unsaved(b);
                        }))
    return false;
  Operation &a = recompute.getBodyBlock().front();
  Operation &b = original.getBodyBlock().front();
  if (a.getName() != b.getName() || !a.hasAttr("recomputed"))
    return false;
  NamedAttrList attrs(a.getAttrDictionary());
  attrs.erase("recomputed");
  return attrs.getDictionary(a.getContext()) == b.getAttrDictionary();
}

void fuse(Match m) {
  Block *block = m.fprop->getBlock();
  auto ce = *m.loss.getBodyBlock().getOps<graph::CrossEntropyOp>().begin();
  auto ceGrad =
      *m.lossGrad.getBodyBlock().getOps<graph::CrossEntropyGradOp>().begin();
  auto outer = [](kernel::FusedOp f, Value inner) {
    return f.getInputs()[cast<BlockArgument>(inner).getArgNumber()];
  };
  Value x = m.fprop.getA(), w = m.fprop.getB(), xw = m.wgrad.getB();
  // The wgrad reads the head's input as the backward recomputed it; the
  // kernel has the forward's at hand.
  kernel::FusedOp recompute = oneOpKernel(xw);
  if (xw.getType() == x.getType() &&
      recomputes(recompute, oneOpKernel(x)))
    xw = x;
  else
    recompute = nullptr;
  Value labels = outer(m.loss, ce.getLabels());
  Value mask = outer(m.loss, ce.getLossMask());
  Value dloss = outer(m.lossGrad, ceGrad.getGrad());
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
  std::function<bool(Operation *)> lateEnough = [&](Operation *user) {
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!after || after->isBeforeInBlock(top))
      return true;
    if (!fusion::isView(top) || !llvm::all_of(top->getUsers(), lateEnough))
      return false;
    moved.push_back(top);
    return true;
  };
  for (Value r : results)
    if (!llvm::all_of(r.getUsers(), lateEnough))
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
                                             arg(labels), arg(mask));
  Value dlogits3 = graph::CrossEntropyGradOp::create(
      in, loc, ceGrad.getResult().getType(), arg(dloss), logits3, arg(labels), arg(mask));
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
  // Views first in, first placed: each lands after the one it reads.
  Operation *last = fused;
  for (Operation *view : llvm::reverse(moved)) {
    view->moveAfter(last);
    last = view;
  }
  // The GEMMs, then the cross-entropy kernels and the logits GEMM with the
  // views and saves that now lead nowhere: readers before what they read.
  std::function<void(Operation *)> eraseDead = [&](Operation *op) {
    for (Operation *user : llvm::to_vector(op->getUsers()))
      if (fusion::isView(user) || isa<graph::SaveOp>(user))
        eraseDead(user);
    if (op->use_empty())
      op->erase();
  };
  for (Operation *op : {m.wgrad.getOperation(), m.dgrad.getOperation(),
                        m.lossGrad.getOperation(), m.loss.getOperation(),
                        m.fprop.getOperation()})
    eraseDead(op);
  if (recompute)
    eraseDead(recompute);
}

struct FuseLmHead : public octet::impl::OctetFuseLmHeadBase<FuseLmHead> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<kernel::GemmOp> gemms(
          func.getBody().front().getOps<kernel::GemmOp>());
      for (kernel::GemmOp gemm : gemms)
        if (auto m = match(gemm)) {
          fuse(*m);
          break;
        }
    }
  }
};

} // namespace
