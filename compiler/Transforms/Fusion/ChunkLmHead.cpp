// octet-chunk-lm-head: the LM head, its loss and their gradients over
// chunks of tokens, so the [tokens, vocabulary] logits are never live
// whole: per chunk the fprop GEMM, the cross-entropy and its gradient
// (each divided by the whole batch's token count), the dgrad GEMM (its
// rows of dx) and the wgrad GEMM, accumulated into the previous chunk's.
// A head in FP8 (tensorwise scales) the same way, with its gradient cast
// and transposed per chunk and its amax the largest of the chunks'.

#include "compiler/Transforms/Fusion/FusionUtils.h"
#include "compiler/Transforms/Fusion/Passes.h"

#include "dialects/fp8/Fp8Dialect.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

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

// The rows of a chunk of the head's `tokens`: 0 to keep the head whole (at
// most `limit` tokens), an error where no chunk divides them.
FailureOr<int64_t> headChunkRows(kernel::GemmOp fprop, int64_t tokens,
                                 int64_t limit) {
  if (tokens <= limit)
    return int64_t(0);
  int64_t rows = chunkRows(tokens, limit);
  if (!rows)
    return fprop.emitError("octet-chunk-lm-head: no chunk of at most ")
           << limit << " tokens, a multiple of " << kRowAlignment
           << ", divides the head's " << tokens
           << " tokens; set chunk-tokens to a multiple of " << kRowAlignment
           << " that divides them, or 0 to keep the head whole";
  return rows;
}

// Where a head's chunks go: after every one of `inputs`, before every
// reader of `results` (views of a result that sit before that point move
// behind the chunks, into `moved`, when what reads them comes later). A
// load of the wgrad's accumulator moves up to the chunks when no store of
// its variable lies between. None when the readers cannot follow or a
// store is in the way.
std::optional<OpBuilder> chunkPlace(Block *block, ArrayRef<Value> inputs,
                                    Value accumulator, ArrayRef<Value> results,
                                    SmallVector<Operation *> &moved) {
  auto load = accumulator ? accumulator.getDefiningOp<graph::LoadOp>()
                          : graph::LoadOp();
  Operation *after = nullptr;
  for (Value v : inputs)
    if (Operation *def = v ? v.getDefiningOp() : nullptr)
      if (def != load && def->getBlock() == block &&
          (!after || after->isBeforeInBlock(def)))
        after = def;
  if (load && load->getBlock() == block && after &&
      after->isBeforeInBlock(load)) {
    for (Operation *op = after; op != load; op = op->getNextNode())
      if (auto store = dyn_cast<graph::StoreOp>(op);
          store && store.getVariable() == load.getVariable())
        return std::nullopt;
    load->moveAfter(after);
    after = load;
  }
  if (!fusion::readersFollow(*block, after, results, moved))
    return std::nullopt;
  return after ? OpBuilder(after->getBlock(), ++Block::iterator(after))
               : OpBuilder::atBlockBegin(block);
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
    FailureOr<int64_t> chunk = headChunkRows(m.fprop, tokens, limit);
    if (failed(chunk))
      return failure();
    if (*chunk == 0)
      return success();
    int64_t rows = *chunk;
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

    SmallVector<Value> results = {m.loss->getResult(0), m.dgrad.getResult(),
                                  m.wgrad.getResult()};
    SmallVector<Operation *> moved;
    std::optional<OpBuilder> place = chunkPlace(
        block, {x, w, labels, mask, dloss, xw, accumulator}, accumulator,
        results, moved);
    if (!place)
      return success();
    OpBuilder &b = *place;
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

// An FP8 head (octet-precision with the head in FP8, tensorwise scales):
// its GEMMs take inverse scales, the loss gradient's kernel casts the
// gradient to FP8 (with the amax delayed scaling records) and transposes
// it for the wgrad, whose other operand is the K-major copy of the head's
// quantized input.
struct Fp8LmHead {
  fusion::LmHead m;
  fp8::QuantizeOp quantize;
  fp8::TransposeOp transpose;
  // The loss gradient kernel's results: the FP8 gradient, its amax, the
  // transposed copy and the copy's scale.
  Value grad, amax, gradT, gradTScale;
};

Value yieldedAs(kernel::FusedOp fused, Value inner) {
  for (OpOperand &use : inner.getUses())
    if (isa<kernel::YieldOp>(use.getOwner()))
      return fused->getResult(use.getOperandNumber());
  return Value();
}

// The fp8.quantize behind an FP8 GEMM operand that a kernel yields, looking
// through an fp8.transpose: what names the tensor and its scale.
fp8::QuantizeOp quantizeBehind(Value operand) {
  auto result = dyn_cast<OpResult>(fusion::throughViews(operand));
  auto fused =
      result ? dyn_cast<kernel::FusedOp>(result.getOwner()) : kernel::FusedOp();
  if (!fused)
    return {};
  Value inner = fused.getBodyBlock().getTerminator()->getOperand(
      result.getResultNumber());
  if (auto t = inner.getDefiningOp<fp8::TransposeOp>())
    inner = t.getInput();
  return inner.getDefiningOp<fp8::QuantizeOp>();
}

std::optional<Fp8LmHead> matchFp8LmHead(kernel::GemmOp fprop) {
  auto tensorwise = [](kernel::GemmOp g) {
    return g && g.getAScaleInv() && g.getBScaleInv() && !g.getAScale() &&
           !g.getBias() && g.getEpilogueKind() == "none" &&
           !g.getTransposeA() && g.getTransposeB();
  };
  if (!tensorwise(fprop) || fprop.getRole() != "fprop" || fprop.getC())
    return std::nullopt;
  Fp8LmHead h;
  fusion::LmHead &m = h.m;
  m.fprop = fprop;
  for (Operation *reader : fusion::readersThroughViews(fprop.getResult())) {
    auto fused = dyn_cast<kernel::FusedOp>(reader);
    if (!fused)
      return std::nullopt;
    Block &body = fused.getBodyBlock();
    if (fusion::bodyOnly(fused, {"graph.cross_entropy"}) &&
        body.getOperations().size() == 2 && !m.loss) {
      m.loss = fused;
      continue;
    }
    auto grads = body.getOps<graph::CrossEntropyGradOp>();
    if (m.lossGrad || grads.empty())
      return std::nullopt;
    m.lossGrad = fused;
    m.crossEntropyGrad = *grads.begin();
  }
  if (!m.loss || !m.lossGrad)
    return std::nullopt;
  m.crossEntropy =
      *m.loss.getBodyBlock().getOps<graph::CrossEntropyOp>().begin();
  // The gradient kernel: cross_entropy_grad, reshapes, the cast and its
  // transpose, nothing else.
  Value v = m.crossEntropyGrad.getResult();
  while (v.hasOneUse() && isa<graph::ReshapeOp>(*v.user_begin()))
    v = v.user_begin()->getResult(0);
  h.quantize = v.hasOneUse() ? dyn_cast<fp8::QuantizeOp>(*v.user_begin())
                             : fp8::QuantizeOp();
  if (!h.quantize || !isa<BlockArgument>(h.quantize.getScale()))
    return std::nullopt;
  for (Operation *user : h.quantize.getResult().getUsers())
    if (auto t = dyn_cast<fp8::TransposeOp>(user))
      h.transpose = t;
  if (!h.transpose)
    return std::nullopt;
  for (Operation &op : m.lossGrad.getBodyBlock().without_terminator())
    if (!isa<graph::CrossEntropyGradOp, graph::ReshapeOp, fp8::QuantizeOp,
             fp8::TransposeOp>(op))
      return std::nullopt;
  h.grad = yieldedAs(m.lossGrad, h.quantize.getResult());
  h.amax = yieldedAs(m.lossGrad, h.quantize.getAmax());
  h.gradT = yieldedAs(m.lossGrad, h.transpose.getResult());
  h.gradTScale = yieldedAs(m.lossGrad, h.transpose.getResultScale());
  if (!h.grad || !h.amax || !h.gradT ||
      (h.gradTScale && !h.gradTScale.use_empty()))
    return std::nullopt;
  for (Operation *reader : fusion::readersThroughViews(h.grad)) {
    auto g = dyn_cast<kernel::GemmOp>(reader);
    if (!tensorwise(g) || g.getRole() != "dgrad" || g.getC() || m.dgrad ||
        g.getParam() != fprop.getParam() ||
        fusion::throughViews(g.getA()) != h.grad)
      return std::nullopt;
    m.dgrad = g;
  }
  for (Operation *reader : fusion::readersThroughViews(h.gradT)) {
    auto g = dyn_cast<kernel::GemmOp>(reader);
    if (!tensorwise(g) || g.getRole() != "wgrad" || m.wgrad ||
        g.getParam() != fprop.getParam() ||
        fusion::throughViews(g.getA()) != h.gradT)
      return std::nullopt;
    m.wgrad = g;
  }
  if (!m.dgrad || !m.wgrad)
    return std::nullopt;
  graph::CrossEntropyOp ce = m.crossEntropy;
  graph::CrossEntropyGradOp ceGrad = m.crossEntropyGrad;
  if (ce.getBatchMask() || ceGrad.getBatchMask() ||
      fusion::throughViews(m.lossGradInput(ceGrad.getLogits())) !=
          fprop.getResult() ||
      m.lossInput(ce.getLabels()) != m.lossGradInput(ceGrad.getLabels()) ||
      m.lossInput(ce.getLossMask()) != m.lossGradInput(ceGrad.getLossMask()))
    return std::nullopt;
  // The wgrad's input must be the fprop's, transposed: the same tensor
  // quantized with the same scale (the backward's recompute of it).
  fp8::QuantizeOp forward = quantizeBehind(fprop.getA());
  fp8::QuantizeOp backward = quantizeBehind(m.wgrad.getB());
  if (!forward || !backward ||
      forward->getAttr("tensor") != backward->getAttr("tensor") ||
      !forward->getAttr("tensor"))
    return std::nullopt;
  return h;
}

// The FP8 head over chunks: per chunk the fprop GEMM on the chunk's rows
// of the quantized input, the loss, the gradient kernel (cast and
// transposed as before, dividing by the whole batch's count), the dgrad,
// the K-major copy of the chunk's input (a transpose kernel: the
// backward's whole copy is made after the head's dgrad, too late for the
// chunks) and the wgrad into the previous chunk's sum. The gradient's amax
// is the largest of the chunks', one kernel after them.
struct Fp8Chunker {
  Fp8LmHead h;
  int64_t limit;

  LogicalResult run() {
    fusion::LmHead &m = h.m;
    Block *block = m.fprop->getBlock();
    graph::CrossEntropyOp ce = m.crossEntropy;
    graph::CrossEntropyGradOp ceGrad = m.crossEntropyGrad;
    Value x = m.fprop.getA(), w = m.fprop.getB(), wt = m.dgrad.getB();
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t tokens = xType.getDimSize(0);
    FailureOr<int64_t> chunk = headChunkRows(m.fprop, tokens, limit);
    if (failed(chunk))
      return failure();
    if (*chunk == 0)
      return success();
    int64_t rows = *chunk;
    Value labels = m.lossInput(ce.getLabels());
    Value mask = m.lossInput(ce.getLossMask());
    Value dloss = m.lossGradInput(ceGrad.getGrad());
    Value gradScale = m.lossGradInput(h.quantize.getScale());
    Value accumulator = m.wgrad.getC();
    if (cast<RankedTensorType>(labels.getType()).getNumElements() != tokens)
      return success();
    SmallVector<Value> inputs = {x,
                                 w,
                                 wt,
                                 labels,
                                 mask,
                                 dloss,
                                 gradScale,
                                 m.fprop.getAScaleInv(),
                                 m.fprop.getBScaleInv(),
                                 m.dgrad.getAScaleInv(),
                                 m.dgrad.getBScaleInv(),
                                 m.wgrad.getAScaleInv(),
                                 m.wgrad.getBScaleInv(),
                                 accumulator};
    SmallVector<Value> results = {m.loss->getResult(0), m.dgrad.getResult(),
                                  m.wgrad.getResult(), h.amax};
    SmallVector<Operation *> moved;
    std::optional<OpBuilder> place =
        chunkPlace(block, inputs, accumulator, results, moved);
    if (!place)
      return success();
    OpBuilder &b = *place;
    Location loc = m.fprop.getLoc();
    auto logitsType = cast<RankedTensorType>(m.fprop.getResult().getType());
    int64_t vocab = logitsType.getDimSize(1), hidden = xType.getDimSize(1);
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    auto slice = [&](Value v, ArrayRef<int64_t> shape, int64_t dim,
                     int64_t offset) -> Value {
      return graph::SliceOp::create(b, loc, withShape(v, shape), v, i64(dim),
                                    i64(offset));
    };
    auto reshape = [&](OpBuilder &at, Value v,
                       ArrayRef<int64_t> shape) -> Value {
      return graph::ReshapeOp::create(at, loc, withShape(v, shape), v);
    };
    auto gemm = [&](kernel::GemmOp like, Type type, Value lhs, Value rhs,
                    Value c) {
      auto g = kernel::GemmOp::create(
          b, loc, type, TypeRange(), lhs, rhs, Value(), Value(),
          like.getAScaleInv(), like.getBScaleInv(), Value(), c,
          like.getTransposeA(), like.getTransposeB(), like.getRoleAttr(),
          like.getParamAttr(), StringAttr(), DenseI64ArrayAttr(),
          DenseI64ArrayAttr());
      copyPlacement(like, g);
      return g.getResult();
    };
    auto fusedLike = [&](Operation *like, StringRef name, StringRef kind,
                         TypeRange types, ValueRange ins,
                         function_ref<SmallVector<Value>(OpBuilder &,
                                                         ValueRange)>
                             body) {
      auto fused = kernel::FusedOp::create(b, loc, types, ins, name, kind);
      OpBuilder in = OpBuilder::atBlockEnd(&fused.getBodyBlock());
      kernel::YieldOp::create(in, loc,
                              body(in, fused.getBodyBlock().getArguments()));
      copyPlacement(like, fused);
      return fused;
    };

    Value labelRow = reshape(b, labels, {1, tokens});
    Value maskRow = reshape(b, mask, {1, tokens});
    Type lossType = ce.getLoss().getType();
    Type f32Scalar = h.amax.getType();
    Type gradElem = getElementTypeOrSelf(ceGrad.getResult().getType());
    Type fp8Elem = getElementTypeOrSelf(h.grad.getType());
    auto chunkGrad3 = RankedTensorType::get({1, rows, vocab}, gradElem);
    auto chunkGrad = RankedTensorType::get({rows, vocab}, gradElem);
    auto chunkQ = RankedTensorType::get({rows, vocab}, fp8Elem);
    auto chunkQT = RankedTensorType::get({vocab, rows}, fp8Elem);
    auto xElem = getElementTypeOrSelf(x.getType());
    auto chunkXT = RankedTensorType::get({hidden, rows}, xElem);
    auto dgradType = cast<RankedTensorType>(m.dgrad.getResult().getType());
    SmallVector<Value> losses, dxs, amaxes;
    Value dw = accumulator;
    for (int64_t at = 0; at < tokens; at += rows) {
      Value xc = slice(x, {rows, hidden}, 0, at);
      Value logits = gemm(m.fprop, withShape(m.fprop.getResult(), {rows, vocab}),
                          xc, w, Value());
      Value logits3 = reshape(b, logits, {1, rows, vocab});
      Value labelsC = slice(labelRow, {1, rows}, 1, at);
      Value maskC = slice(maskRow, {1, rows}, 1, at);
      losses.push_back(
          fusedLike(m.loss, m.loss.getName(), m.loss.getKind(), {lossType},
                    ValueRange{logits3, labelsC, maskC, mask},
                    [&](OpBuilder &in, ValueRange a) -> SmallVector<Value> {
                      return {graph::CrossEntropyOp::create(
                          in, loc, lossType, a[0], a[1], a[2], a[3])};
                    })
              ->getResult(0));
      kernel::FusedOp grad = fusedLike(
          m.lossGrad, m.lossGrad.getName(), m.lossGrad.getKind(),
          {chunkQ, f32Scalar, chunkQT},
          ValueRange{dloss, logits3, labelsC, maskC, mask, gradScale},
          [&](OpBuilder &in, ValueRange a) -> SmallVector<Value> {
            Value g = graph::CrossEntropyGradOp::create(
                in, loc, chunkGrad3, a[0], a[1], a[2], a[3], a[4]);
            Value g2 = graph::ReshapeOp::create(in, loc, chunkGrad, g);
            auto q = fp8::QuantizeOp::create(in, loc, chunkQ, f32Scalar, g2,
                                             a[5],
                                             h.quantize.getAmaxReduceAttr());
            q->setAttr("tensor", h.quantize->getAttr("tensor"));
            auto t = fp8::TransposeOp::create(
                in, loc, TypeRange{chunkQT, f32Scalar}, q.getResult(), a[5],
                DenseI64ArrayAttr());
            return {q.getResult(), q.getAmax(), t.getResult()};
          });
      amaxes.push_back(grad->getResult(1));
      dxs.push_back(gemm(m.dgrad,
                         RankedTensorType::get({rows, dgradType.getDimSize(1)},
                                               dgradType.getElementType()),
                         grad->getResult(0), wt, Value()));
      Value xt =
          fusedLike(m.wgrad, "lm_head.x.kmajor", "elementwise", {chunkXT},
                    ValueRange{xc, m.wgrad.getBScaleInv()},
                    [&](OpBuilder &in, ValueRange a) -> SmallVector<Value> {
                      auto t = fp8::TransposeOp::create(
                          in, loc, TypeRange{chunkXT, a[1].getType()}, a[0],
                          a[1], DenseI64ArrayAttr());
                      return {t.getResult()};
                    })
              ->getResult(0);
      dw = gemm(m.wgrad, m.wgrad.getResult().getType(), grad->getResult(2), xt,
                dw);
    }
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
    // The whole gradient's amax: the largest of the chunks' (each chunk's
    // kernel measures its own), reduced over the groups the cast names.
    Value amax =
        fusedLike(m.lossGrad, "lm_head.dy.amax", "elementwise", {f32Scalar},
                  amaxes, [&](OpBuilder &in, ValueRange a) -> SmallVector<Value> {
                    SmallVector<Value> pieces;
                    for (Value part : a)
                      pieces.push_back(reshape(in, part, {1}));
                    auto all = RankedTensorType::get(
                        {(int64_t)pieces.size()}, getElementTypeOrSelf(f32Scalar));
                    Value joined = graph::ConcatOp::create(in, loc, all, pieces,
                                                           in.getI64IntegerAttr(0));
                    return {fp8::AmaxOp::create(in, loc, f32Scalar, joined,
                                                h.quantize.getAmaxReduceAttr())
                                .getResult()};
                  })
            ->getResult(0);
    Value dx = graph::ConcatOp::create(b, loc, dgradType, dxs, i64(0));

    // The backward's whole K-major copy of the input (and the row-major
    // recompute beside it) that only the replaced wgrad read.
    auto wholeCopy = fusion::throughViews(m.wgrad.getB())
                         .getDefiningOp<kernel::FusedOp>();
    SmallVector<Value> replacements = {sum->getResult(0), dx, dw, amax};
    for (auto [old, now] : llvm::zip(results, replacements))
      old.replaceAllUsesWith(now);
    fusion::placeViewsAfter(moved, dx.getDefiningOp());
    fusion::eraseReplacedLmHead(m, nullptr);
    if (wholeCopy) {
      // With the ops that made them: codegen plans what the body holds.
      Block &body = fusion::dropUnusedResults(wholeCopy).getBodyBlock();
      SmallVector<Operation *> ops;
      for (Operation &op : body.without_terminator())
        ops.push_back(&op);
      // Readers first, so that what only they read is dead in turn.
      for (Operation *op : llvm::reverse(ops))
        if (isOpTriviallyDead(op))
          op->erase();
    }
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
      for (kernel::GemmOp gemm : gemms) {
        if (auto m = fusion::matchLmHead(gemm, /*wgradMayAccumulate=*/true)) {
          if (failed(Chunker{*m, chunkTokens}.run()))
            return signalPassFailure();
          break;
        }
        if (auto h = matchFp8LmHead(gemm)) {
          if (failed(Fp8Chunker{*h, chunkTokens}.run()))
            return signalPassFailure();
          break;
        }
      }
    }
  }
};

} // namespace
